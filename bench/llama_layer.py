#!/usr/bin/env python3
"""One transformers Llama decoder layer forward: eager vs torch.compile vs kernelkit.patch, and patched + compile.

The layer is transformers' own LlamaDecoderLayer (SDPA attention, causal) with random weights; kernelkit.patch swaps
its RMSNorms and the gated MLP's silu(gate) * up for kernelkit ops (the GEMMs and attention stay PyTorch's). Every
variant runs on the same input; the patched outputs are checked against eager before timing. GPU time: CUDA events
around each forward, median of --runs after warm-up (torch.compile compiled first).

  python3 bench/llama_layer.py [--hidden 4096 --intermediate 11008 --seq 2048 --batch 1 --dtype bf16] [--json F]
  python3 bench/llama_layer.py --tiny --device cpu     # wiring check without a GPU (no timing claims)
"""
from __future__ import annotations

import argparse
import copy
import datetime
import json
import statistics
import sys
import time

import torch


def build_layer(args, dtype, device):
    import transformers
    from transformers.models.llama import modeling_llama as ml

    heads = args.hidden // args.head_dim
    cfg = transformers.LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                                   num_attention_heads=heads, num_key_value_heads=heads // args.gqa,
                                   num_hidden_layers=1, max_position_embeddings=max(4096, args.seq),
                                   rms_norm_eps=1e-5, attn_implementation="sdpa")
    torch.manual_seed(0)
    layer = ml.LlamaDecoderLayer(cfg, layer_idx=0).to(device=device, dtype=dtype).eval()
    for m in layer.modules():  # random norm weights (ones would hide a missing weight)
        if type(m).__name__.endswith("RMSNorm"):
            m.weight.data.uniform_(0.5, 1.5)
    rope = ml.LlamaRotaryEmbedding(cfg).to(device)
    x = torch.randn(args.batch, args.seq, args.hidden, device=device, dtype=dtype)
    pos = torch.arange(args.seq, device=device)[None].expand(args.batch, -1)
    cos_sin = rope(x, pos)
    return layer, x, cos_sin


def forward_fn(layer, cos_sin):
    def fn(x):
        out = layer(x, position_embeddings=cos_sin)
        return out[0] if isinstance(out, tuple) else out
    return fn


def time_gpu(fn, x, runs, warmup=5):
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
        for a, b in ev:
            a.record()
            fn(x)
            b.record()
        torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--intermediate", type=int, default=11008)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--gqa", type=int, default=1, help="query heads per kv head (LLaMA-7B: 1)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--tiny", action="store_true", help="hidden 64, intermediate 128, seq 16, head_dim 16")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--commit", default="")
    args = p.parse_args(argv)
    if args.tiny:
        args.hidden, args.intermediate, args.seq, args.head_dim = 64, 128, 16, 16
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    import kernelkit

    layer, x, cos_sin = build_layer(args, dtype, args.device)
    patched = copy.deepcopy(layer)
    report = kernelkit.patch(patched)
    variants = {"eager": forward_fn(layer, cos_sin), "kernelkit.patch": forward_fn(patched, cos_sin)}
    if not args.no_compile:
        variants["torch.compile"] = torch.compile(forward_fn(layer, cos_sin))
        variants["kernelkit.patch + torch.compile"] = torch.compile(forward_fn(patched, cos_sin))

    with torch.no_grad():
        want = variants["eager"](x).double()
        tol = {torch.float32: 1e-3, torch.float16: 3e-2, torch.bfloat16: 1.5e-1}[dtype]
        check = {}
        for name, fn in variants.items():
            t0 = time.perf_counter()
            got = fn(x).double()  # the first call also compiles
            err = (got - want).abs().max().item()
            check[name] = {"max_abs_diff": err, "ok": err <= tol * max(1.0, want.abs().max().item()),
                           "first_call_s": time.perf_counter() - t0}
    result = {"layer": "transformers LlamaDecoderLayer (sdpa)", "hidden": args.hidden,
              "intermediate": args.intermediate, "seq": args.seq, "batch": args.batch, "heads": args.hidden // args.head_dim,
              "kv_heads": args.hidden // args.head_dim // args.gqa, "dtype": args.dtype, "patched": dict(report.patched),
              "check": check, "commit": args.commit, "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    print(f"patched: {dict(report.patched)}")
    for name, c in check.items():
        print(f"check {name:34s} max |diff| vs eager {c['max_abs_diff']:.3g} {'ok' if c['ok'] else 'MISMATCH'}")
    failed = not all(c["ok"] for c in check.values())
    if args.device == "cuda" and torch.cuda.is_available():
        result["gpu"] = torch.cuda.get_device_name()
        times = {name: time_gpu(fn, x, args.runs) for name, fn in variants.items()}
        result["gpu_ms"] = times
        base = times["eager"]
        print(f"\n{'variant':34s} {'median ms':>10s} {'vs eager':>9s}")
        for name, ms in times.items():
            print(f"{name:34s} {ms:10.3f} {base / ms:8.2f}x")
    else:
        print("(no CUDA: wiring check only, nothing timed)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
