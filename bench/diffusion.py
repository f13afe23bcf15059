#!/usr/bin/env python3
"""diffusers denoising end to end: the SD3 pipeline's loop (the MMDiT transformer under classifier-free guidance and
the flow-matching Euler scheduler) with and without kernelkit.patch (and its attention=True), eager and
torch.compile'd.

An SD3.5-medium-shaped SD3Transformer2DModel (24 joint blocks, 24 heads of 64, qk RMSNorm, 16 latent channels) with
random weights on a 1024 x 1024 image's latent (128 x 128, 4096 image tokens) and 333 text tokens of random prompt
embeddings; a step is what StableDiffusion3Pipeline does per timestep (the transformer on the doubled batch, guidance
7.0, scheduler.step). The text encoders and the VAE run once per image and are left out. Per variant: ms per step and
for --steps steps (wall clock with a synchronize, median of --runs after a warm-up loop that compiles), and the final
latents against the unpatched eager ones.

  python3 bench/diffusion.py [--layers 24 --steps 8 --dtype bf16] [--json F] [--markdown F]
  python3 bench/diffusion.py --tiny --device cpu --dtype fp32 --compile-backend eager    # wiring check
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


def build(args, dtype, device):
    import diffusers
    torch.manual_seed(0)
    model = diffusers.SD3Transformer2DModel(
        sample_size=args.latent, patch_size=2, in_channels=args.channels, out_channels=args.channels,
        num_layers=args.layers, attention_head_dim=args.head_dim, num_attention_heads=args.heads,
        joint_attention_dim=args.text_dim, caption_projection_dim=args.heads * args.head_dim,
        pooled_projection_dim=args.pooled_dim, qk_norm="rms_norm").to(device=device, dtype=dtype).eval()
    g = torch.Generator().manual_seed(1)
    inputs = dict(latents=torch.randn(1, args.channels, args.latent, args.latent, generator=g),
                  prompt=torch.randn(2, args.text_tokens, args.text_dim, generator=g),
                  pooled=torch.randn(2, args.pooled_dim, generator=g))
    return model, {k: v.to(device=device, dtype=dtype) for k, v in inputs.items()}


def denoise(model, inputs, steps, guidance=7.0):
    """StableDiffusion3Pipeline's loop: the transformer on [uncond, cond], guidance, one Euler step per timestep."""
    from diffusers import FlowMatchEulerDiscreteScheduler
    sched = FlowMatchEulerDiscreteScheduler(shift=3.0)
    sched.set_timesteps(steps, device=inputs["latents"].device)
    latents = inputs["latents"]
    with torch.no_grad():
        for t in sched.timesteps:
            noise = model(hidden_states=torch.cat([latents] * 2), timestep=t.expand(2),
                          encoder_hidden_states=inputs["prompt"], pooled_projections=inputs["pooled"]).sample
            uncond, cond = noise.chunk(2)
            latents = sched.step(uncond + guidance * (cond - uncond), t, latents).prev_sample
    return latents


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--heads", type=int, default=24)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--latent", type=int, default=128, help="latent side (image side / 8)")
    p.add_argument("--channels", type=int, default=16)
    p.add_argument("--text-tokens", type=int, default=333)
    p.add_argument("--text-dim", type=int, default=4096)
    p.add_argument("--pooled-dim", type=int, default=2048)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tiny", action="store_true", help="2 layers, 2 heads of 16, an 8 x 8 latent, 2 steps")
    add_common_args(p, runs=3)
    args = p.parse_args(argv)
    if args.tiny:
        args.layers, args.heads, args.head_dim, args.latent, args.channels = 2, 2, 16, 8, 4
        args.text_tokens, args.text_dim, args.pooled_dim, args.steps, args.runs = 5, 32, 32, 2, 1
    dtype = DTYPES[args.dtype]
    import kernelkit

    rows, ref = [], None
    # patched: kernelkit.patch (norms, GELU, AdaLayerNorm); + attention: with attention=True (the processors' SDPA on
    # kernelkit.attention).
    for name, patched, attention, compiled in (
            ("eager", False, False, False), ("kernelkit eager", True, False, False),
            ("kernelkit eager + attention", True, True, False), ("compiled", False, False, True),
            ("kernelkit compiled", True, False, True)):
        model, inputs = build(args, dtype, args.device)
        report = kernelkit.patch(model, attention=attention) if patched else None
        if compiled:
            torch._dynamo.reset()
            model = torch.compile(model, backend=args.compile_backend)
        out = denoise(model, inputs, args.steps)  # warm-up (compiles)
        times = []
        for _ in range(args.runs):
            sync(args.device)
            t0 = time.perf_counter()
            out = denoise(model, inputs, args.steps)
            sync(args.device)
            times.append((time.perf_counter() - t0) * 1e3)
        ms = statistics.median(times)
        ref = out.double() if ref is None else ref
        diff = ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
        rows.append({"variant": name, "ms": ms, "ms_per_step": ms / args.steps, "finite": bool(out.isfinite().all()),
                     "max_rel_diff_vs_eager": diff,
                     "patched": dict(sorted(report.patched.items())) if report else {}})
        del model
        if on_cuda(args.device):
            torch.cuda.empty_cache()
    base = rows[0]["ms"]
    for r in rows:
        r["speedup_vs_eager"] = base / r["ms"]
    meta = {"gpu": gpu_name(args.device), "torch": torch.__version__,
            "commit": args.commit, "dtype": args.dtype,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "config": {k: getattr(args, k) for k in ("layers", "heads", "head_dim", "latent", "channels",
                                                     "text_tokens", "steps", "runs", "compile_backend")}}
    lines = [f"# diffusers SD3 denoising loop, {args.layers} joint blocks x {args.heads} heads of {args.head_dim}, "
             f"latent {args.latent}x{args.latent}, {args.dtype}, {meta['gpu']}, commit {args.commit}", "",
             f"{args.steps} steps, classifier-free guidance (batch 2); wall clock, median of {args.runs}. "
             f"compiled: torch.compile(transformer, backend={args.compile_backend}).", "",
             "| variant | ms / step | ms for all steps | vs eager | final latents vs eager (max rel) |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['ms_per_step']:.2f} | {r['ms']:.1f} | {r['speedup_vs_eager']:.2f}x | "
                     f"{r['max_rel_diff_vs_eager']:.2e} |")
    md = "\n".join(lines) + "\n"
    write_outputs(args, {"meta": meta, "rows": rows}, md)
    return 0 if all(r["finite"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
