#!/usr/bin/env python3
"""transformers `model.generate` end to end, the way its docs make decode fast (static cache + torch.compile of
forward, mode="reduce-overhead"), with and without kernelkit.patch, next to the eager model patched and not.

A LLaMA-7B-shaped LlamaForCausalLM (hidden 4096, intermediate 11008, 32 heads of 128, vocab 32000; --layers 8 by
default) with random weights, greedy. Per variant and batch: prefill ms (generate of one new token), decode ms per step
and tokens/s ((time of N new tokens - time of 1) / (N - 1)), wall clock with a synchronize (what a caller waits), median
of --runs; the tokens of every variant against the unpatched compiled model's (and where they first differ, that
model's margin between the two tokens), then the compiled pair's tokens again in --token-check's dtype (fp32); for the
compiled patched model, torch._dynamo.explain's graph break count (kernelkit's ops are registered custom ops: it
should be 0).

  python3 bench/generate.py [--layers 8 --batch 1 16 --prompt 512 --new 64 --dtype bf16] [--json F] [--markdown F]
  python3 bench/generate.py --tiny --device cpu --compile-backend eager    # wiring check without a GPU
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_common import DTYPES, add_common_args, gpu_name, on_cuda, sync, write_outputs  # noqa: E402


def build_model(args, dtype, device):
    import transformers
    cfg = transformers.LlamaConfig(
        hidden_size=args.hidden, intermediate_size=args.intermediate, num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // args.head_dim, num_key_value_heads=args.hidden // args.head_dim,
        vocab_size=args.vocab, max_position_embeddings=args.prompt + args.new + 16, rms_norm_eps=1e-5,
        attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    for m in model.modules():  # random norm weights: the ones of init would hide a missing weight
        if type(m).__name__.endswith("RMSNorm"):
            m.weight.data.uniform_(0.5, 1.5)
    return model


def generate(model, ids, new, static, compile_config=None, logits=False):
    """The new tokens' ids [batch, prompt + new] (logits: also the raw logits of each new token, [batch, new, vocab])."""
    gen = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
    if static:
        # On CUDA transformers compiles the forward itself for a static cache (compile_config; it sets the cache up
        # before the compiled calls, so the CUDA graphs never own it); elsewhere the caller compiled model.forward.
        gen["cache_implementation"] = "static"
        gen.update(compile_config=compile_config) if compile_config else gen.update(disable_compile=True)
    if logits:
        gen.update(output_logits=True, return_dict_in_generate=True)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), **gen)
    return (out.sequences, torch.stack(out.logits, 1).float().cpu()) if logits else out


def divergence(tokens, want, want_logits):
    """How `tokens` [batch][new] agree with the reference's `want`: equal tokens over all, and where they first differ
    (step, sequence) the reference's own logit margin between its token and this one, next to the spread of its
    logits there (a greedy decode of random weights has near-ties that any change of rounding order flips)."""
    same = [a == b for ra, rb in zip(tokens, want) for a, b in zip(ra, rb)]
    first = min(((i, b) for b, (ra, rb) in enumerate(zip(tokens, want)) for i, (x, y) in enumerate(zip(ra, rb))
                 if x != y), default=None)
    result = {"equal": f"{sum(same)}/{len(same)}", "first_difference": None}
    if first is not None:
        i, b = first
        row = want_logits[b, i]
        result["first_difference"] = {"step": i, "sequence": b,
                                      "reference_margin": float(row[want[b][i]] - row[tokens[b][i]]),
                                      "reference_logit_std": float(row.std())}
    return result


def timed(fn, runs, device):
    times = []
    for _ in range(runs):
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def graph_breaks(model, ids):
    """torch._dynamo.explain over one forward of the model as generate's prefill calls it."""
    import torch._dynamo
    with torch.no_grad():
        report = torch._dynamo.explain(model.forward)(ids, attention_mask=torch.ones_like(ids), use_cache=False)
    return report.graph_break_count, [str(r.reason)[:200] for r in report.break_reasons][:5]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--intermediate", type=int, default=11008)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, nargs="+", help="batch sizes (default 1 16; --tiny: 1 2)")
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--new", type=int, default=64, help="new tokens a timed generate makes")
    p.add_argument("--compile-mode", default="reduce-overhead")
    p.add_argument("--tiny", action="store_true", help="hidden 64, 2 layers, vocab 128, prompt 8, 4 new tokens")
    p.add_argument("--token-check", default="fp32", choices=sorted(DTYPES) + ["none"],
                   help="also generate with the compiled pair in this dtype and compare their tokens (untimed; "
                        "skipped when it is --dtype)")
    add_common_args(p, runs=3)
    args = p.parse_args(argv)
    if args.tiny:
        args.layers, args.hidden, args.intermediate, args.head_dim, args.vocab = 2, 64, 128, 16, 128
        args.prompt, args.new, args.runs = 8, 4, 1
    args.batch = args.batch or ([1, 2] if args.tiny else [1, 16])
    if args.new < 2:
        p.error("--new must be at least 2 (decode time = time of --new tokens minus the prefill's)")
    dtype = DTYPES[args.dtype]
    import kernelkit

    compile_kw = dict(backend=args.compile_backend, fullgraph=True)
    if args.compile_backend == "inductor":
        compile_kw["mode"] = args.compile_mode
    # Each variant: (patched, compiled). Compiled ones use the static cache (transformers' recipe for compile).
    variants = {"eager": (False, False), "kernelkit eager": (True, False), "compiled": (False, True),
                "kernelkit compiled": (True, True)}
    def prepare(dtype, patched, compiled, explain=False):
        """The model of a variant, the compile_config generate() takes for it (None: eager, or compiled here) and,
        with `explain`, the graph breaks of its forward."""
        model = build_model(args, dtype, args.device)
        if patched:
            kernelkit.patch(model)
        breaks = None
        if explain:
            breaks = graph_breaks(model, torch.zeros(1, args.prompt, dtype=torch.long, device=args.device))
        compile_config = None
        if compiled:
            torch._dynamo.reset()
            if on_cuda(args.device):
                import transformers
                compile_config = transformers.CompileConfig(**compile_kw)
            else:
                model.forward = torch.compile(model.forward, **compile_kw)
        return model, compile_config, breaks

    def prompt(batch):
        g = torch.Generator().manual_seed(batch)
        return torch.randint(1, args.vocab, (batch, args.prompt), generator=g).to(args.device)

    rows, breaks = [], None
    for name, (patched, compiled) in variants.items():
        model, compile_config, variant_breaks = prepare(dtype, patched, compiled, explain=patched and compiled)
        breaks = variant_breaks or breaks
        for batch in args.batch:
            ids = prompt(batch)
            for _ in range(2):  # warm-up: compiles the prefill and the decode step, captures the graphs
                generate(model, ids, args.new, compiled, compile_config)
            prefill_ms, _ = timed(lambda: generate(model, ids, 1, compiled, compile_config), args.runs, args.device)
            total_ms, tokens = timed(lambda: generate(model, ids, args.new, compiled, compile_config), args.runs, args.device)
            step_ms = (total_ms - prefill_ms) / (args.new - 1)
            row = {"variant": name, "batch": batch, "prefill_ms": prefill_ms, "decode_ms_per_step": step_ms,
                   "decode_tokens_per_s": batch * 1e3 / step_ms if step_ms > 0 else float("inf"),
                   "tokens": tokens[:, args.prompt:].tolist()}
            if name == "compiled":  # the reference: its logits too, for divergence()
                _, row["logits"] = generate(model, ids, args.new, compiled, compile_config, logits=True)
            rows.append(row)
        del model
        if on_cuda(args.device):
            torch.cuda.empty_cache()
    ref = {r["batch"]: (r["tokens"], r.pop("logits")) for r in rows if r["variant"] == "compiled"}
    for r in rows:
        want, want_logits = ref[r["batch"]]
        d = divergence(r.pop("tokens"), want, want_logits)
        r["tokens_equal_compiled"], r["first_difference"] = d["equal"], d["first_difference"]
    # The compiled pair once more in --token-check's dtype (untimed): fp32's rounding is 2^16 times finer than bf16's,
    # so a difference in the tokens there points at what kernelkit computes rather than at a near-tie.
    token_check = {}
    if args.token_check != "none" and args.token_check != args.dtype:
        got = {}
        for patched in (False, True):
            model, compile_config, _ = prepare(DTYPES[args.token_check], patched, True)
            for batch in args.batch:
                got[patched, batch] = generate(model, prompt(batch), args.new, True, compile_config, logits=True)
            del model
            if on_cuda(args.device):
                torch.cuda.empty_cache()
        for batch in args.batch:
            want, want_logits = got[False, batch]
            token_check[batch] = divergence(got[True, batch][0][:, args.prompt:].tolist(),
                                            want[:, args.prompt:].tolist(), want_logits)
    result = {"meta": {"gpu": gpu_name(args.device),
                       "torch": torch.__version__, "commit": args.commit, "dtype": args.dtype,
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "config": {k: getattr(args, k) for k in ("layers", "hidden", "intermediate", "head_dim",
                                                                "vocab", "prompt", "new", "runs")},
                       "compile": compile_kw},
              "graph_breaks_patched_compiled": breaks[0] if breaks else None,
              "graph_break_reasons": breaks[1] if breaks else [], "rows": rows,
              "token_check": {"dtype": args.token_check, "batches": token_check} if token_check else None}
    shape = "LLaMA-7B shape" if (args.hidden, args.intermediate) == (4096, 11008) else f"hidden {args.hidden}"
    lines = [f"# transformers generate, {shape} x {args.layers} layers, {args.dtype}, "
             f"{result['meta']['gpu']}, commit {args.commit}", "",
             f"Prompt {args.prompt} tokens, {args.new} new (greedy); wall clock, median of {args.runs}. compiled: "
             f"static cache + torch.compile(forward, {compile_kw}). Graph breaks in the patched compiled forward "
             f"(torch._dynamo.explain): {result['graph_breaks_patched_compiled']}.", "",
             "| variant | batch | prefill ms | decode ms / step | decode tokens/s | tokens = compiled's | first "
             "difference: step, compiled's margin / logit std |",
             "|---|---:|---:|---:|---:|---:|---|"]
    def where(f):
        return f"{f['step']}, {f['reference_margin']:.3f} / {f['reference_logit_std']:.2f}" if f else "none"

    for r in rows:
        lines.append(f"| {r['variant']} | {r['batch']} | {r['prefill_ms']:.1f} | {r['decode_ms_per_step']:.2f} | "
                     f"{r['decode_tokens_per_s']:.0f} | {r['tokens_equal_compiled']} | {where(r['first_difference'])} |")
    if token_check:
        lines += ["", f"The compiled pair again in {args.token_check} (untimed): kernelkit compiled's greedy tokens "
                  "against compiled's.", "", "| batch | tokens equal | first difference |", "|---:|---:|---|"]
        lines += [f"| {b} | {d['equal']} | {where(d['first_difference'])} |" for b, d in token_check.items()]
    md = "\n".join(lines) + "\n"
    write_outputs(args, result, md)
    return 0 if result["graph_breaks_patched_compiled"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
