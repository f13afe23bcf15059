#!/usr/bin/env python3
"""A tensor-parallel transformers Llama with kernelkit, under torchrun: every rank builds the same random model
(seeded, no download), computes the unsharded model's logits as the reference, shards it with
kernelkit.tp.parallelize (column-parallel q / k / v / gate / up, row-parallel o / down with an all-reduce), patches it
with kernelkit.patch and checks its logits against the reference on every rank. With --time it then times a prefill
and a decode step (CUDA events, median of --runs) of the unsharded model on one GPU and the sharded one across the
ranks: the scaling table.

  torchrun --nproc-per-node 2 bench/tp_llama.py                          # CPU, gloo (a wiring check: no timing)
  torchrun --nproc-per-node 2 bench/tp_llama.py --hf-tp DIR              # transformers' own TP (tp_plan="auto",
                                                                         # DTensor weights; needs accelerate), patched
  torchrun --nproc-per-node 2 bench/tp_llama.py --device cuda --dtype bf16 --attention --time \\
      --hidden 4096 --intermediate 11008 --heads 32 --kv-heads 8 --layers 4 --seq 2048
Prints one line per rank ("rank r/w: max |tp - reference| = e (tol t) ok"); exits non-zero when a rank's check fails.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
import torch.distributed as dist

import kernelkit
from e2e_common import DTYPES
# The logits' tolerance per dtype: a sum over ranks in another order, and (fp16 / bf16) the dtype's rounding of the
# partial sums before the all-reduce, as kernelkit.patch's own check on the unsharded model allows.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}


def build(args, dtype, device):
    import transformers
    cfg = transformers.LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                                   num_hidden_layers=args.layers, num_attention_heads=args.heads,
                                   num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                                   max_position_embeddings=max(4096, args.seq + 1), attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    for m in model.modules():  # random norm weights (ones would hide a missing weight)
        if type(m).__name__.endswith("RMSNorm"):
            m.weight.data.uniform_(0.5, 1.5)
    return model


def gpu_ms(fn, runs):
    for _ in range(3):
        fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    p.add_argument("--attention", action="store_true", help="kernelkit.patch(attention=True) (fp16 / bf16)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--time", action="store_true", help="time prefill and one decode step (CUDA only)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--hf-tp", metavar="DIR",
                   help="shard with transformers' tp_plan='auto' instead (the model saved to DIR and loaded back)")
    args = p.parse_args(argv)
    dtype = DTYPES[args.dtype]
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    model = build(args, dtype, device)
    if args.hf_tp:  # rank 0 saves the model; every rank loads it whole (the reference) and with transformers' TP
        import transformers
        if rank == 0:
            model.save_pretrained(args.hf_tp)
        dist.barrier()
        load = dict(dtype=dtype)
        model = transformers.AutoModelForCausalLM.from_pretrained(args.hf_tp, **load).to(device).eval()
        tp_model = transformers.AutoModelForCausalLM.from_pretrained(args.hf_tp, tp_plan="auto", **load).eval()
    torch.manual_seed(1)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    with torch.no_grad():
        want = model(ids).logits.double()
        single = {}
        if args.time and args.device == "cuda":
            kernelkit.patch(model, attention=args.attention)
            single = times(model, ids, args)
            kernelkit.unpatch(model)
        if args.hf_tp:
            model = tp_model
        else:
            kernelkit.tp.parallelize(model)
        kernelkit.patch(model, attention=args.attention)
        got = model(ids).logits.double()
        err, tol = (got - want).abs().max().item(), TOLERANCE[dtype]
        ok = err < tol
        print(f"rank {rank}/{world}: max |tp - reference| = {err:.3g} (tol {tol:g}) {'ok' if ok else 'FAILED'}",
              flush=True)
        if args.time and args.device == "cuda":
            tp = times(model, ids, args)
            if rank == 0:
                print(f"| {world} GPU{'s' if world > 1 else ''} | prefill {args.batch}x{args.seq}: "
                      f"{single['prefill']:.3f} ms on 1 GPU, {tp['prefill']:.3f} ms tensor-parallel | decode step: "
                      f"{single['decode']:.3f} ms, {tp['decode']:.3f} ms |", flush=True)
    # Every rank past its last collective before any tears the group down (gloo aborts a process whose peer left
    # while it was still in one).
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


def times(model, ids, args):
    """Prefill of ids, and one decode step after it (a DynamicCache), in ms."""
    import transformers

    def prefill():
        return model(ids)

    cache = transformers.DynamicCache()
    out = model(ids, past_key_values=cache, use_cache=True)
    step = out.logits[:, -1:].argmax(-1)

    def decode():  # the cache back to the prompt first (a negative crop removes that many tokens, in every version)
        extra = cache.get_seq_length() - args.seq
        if extra > 0:
            cache.crop(-extra)
        return model(step, past_key_values=cache, use_cache=True)

    return {"prefill": gpu_ms(prefill, args.runs), "decode": gpu_ms(decode, args.runs)}


if __name__ == "__main__":
    code = main()
    # Past destroy_process_group nothing is left to do; leave without the interpreter's teardown, where a gloo rank
    # now and then dies in a C++ destructor ("terminate called without an active exception") after its results are in.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
