#!/usr/bin/env python3
"""diffusers denoising end to end: a pipeline's loop (the SD3 transformer, the SD 1.5 UNet or the Flux transformer,
with its pipeline's guidance and scheduler) with and without kernelkit.patch (and its attention=True), eager and
torch.compile'd.

--model picks the denoiser, with random weights and the real model's shape unless options change it:
  sd3   StableDiffusion3Pipeline on an SD3.5-medium-shaped SD3Transformer2DModel (24 joint blocks, 24 heads of 64,
        qk RMSNorm, 16 latent channels), a 1024 x 1024 image (128 x 128 latent, 4096 image tokens), 333 text tokens;
        classifier-free guidance 7.0 (the transformer on a batch of 2), the flow-matching Euler step.
  unet  StableDiffusionPipeline on an SD 1.5-shaped UNet2DConditionModel (block widths 320 / 640 / 1280 / 1280, 2
        layers a block, 8 heads, cross-attention to 768-dim text), a 512 x 512 image (64 x 64 latent), 77 text
        tokens; classifier-free guidance 7.5 (batch 2), the Euler discrete step (SD 1.5's scaled-linear betas).
  flux  FluxPipeline on a Flux.1-shaped FluxTransformer2DModel (19 double-stream and 38 single-stream blocks, 24
        heads of 128, rope axes (16, 56, 56)), a 1024 x 1024 image (128 x 128 latent packed into 4096 tokens of 64
        channels), 512 text tokens; guidance-distilled (guidance 3.5 embedded, batch 1), the flow-matching Euler step
        with the resolution-dependent shift.
A step is what the pipeline does per timestep; the text encoders and the VAE run once per image and are left out.
Per variant: ms per step and for --steps steps (wall clock with a synchronize, median of --runs after a warm-up loop
that compiles), and the final latents against the unpatched eager ones.

  python3 bench/diffusion.py [--model sd3|unet|flux] [--layers N --steps 8 --dtype bf16] [--json F] [--markdown F]
  python3 bench/diffusion.py [--model M] --tiny --device cpu --dtype fp32 --compile-backend eager    # wiring check
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

# Each model's shape options: the real model's (the defaults) and --tiny's (a few seconds on 2 CPU cores in fp32);
# an option given on the command line wins over both.
SHAPES = {
    "sd3": (dict(layers=24, heads=24, head_dim=64, latent=128, channels=16, text_tokens=333, text_dim=4096,
                 pooled_dim=2048),
            dict(layers=2, heads=2, head_dim=16, latent=8, channels=4, text_tokens=5, text_dim=32, pooled_dim=32)),
    "unet": (dict(layers=2, heads=8, widths=(320, 640, 1280, 1280), latent=64, channels=4, text_tokens=77,
                  text_dim=768),
             dict(layers=1, heads=2, widths=(32, 32, 64, 64), latent=8, channels=4, text_tokens=5, text_dim=32)),
    "flux": (dict(layers=19, heads=24, head_dim=128, latent=128, channels=16, text_tokens=512, text_dim=4096,
                  pooled_dim=768),
             dict(layers=1, heads=2, head_dim=32, latent=8, channels=4, text_tokens=5, text_dim=32, pooled_dim=32)),
}
SHAPE_OPTIONS = ("layers", "heads", "head_dim", "widths", "latent", "channels", "text_tokens", "text_dim", "pooled_dim")


def random_inputs(args, dtype, device, **shapes):
    g = torch.Generator().manual_seed(1)
    return {k: torch.randn(*shape, generator=g).to(device=device, dtype=dtype) for k, shape in shapes.items()}


def on_device(make, dtype, device):
    """The model built by make() with its weights initialized on `device` (Flux's 12B parameters take minutes to
    initialize on the CPU), then cast."""
    torch.manual_seed(0)
    with torch.device(device):
        model = make()
    return model.to(dtype=dtype).eval()


def build_sd3(args, dtype, device):
    import diffusers
    model = on_device(lambda: diffusers.SD3Transformer2DModel(
        sample_size=args.latent, patch_size=2, in_channels=args.channels, out_channels=args.channels,
        num_layers=args.layers, attention_head_dim=args.head_dim, num_attention_heads=args.heads,
        joint_attention_dim=args.text_dim, caption_projection_dim=args.heads * args.head_dim,
        pooled_projection_dim=args.pooled_dim, qk_norm="rms_norm"), dtype, device)
    return model, random_inputs(args, dtype, device, latents=(1, args.channels, args.latent, args.latent),
                                prompt=(2, args.text_tokens, args.text_dim), pooled=(2, args.pooled_dim))


def denoise_sd3(model, inputs, steps, guidance=7.0):
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


def build_unet(args, dtype, device):
    import diffusers
    levels = len(args.widths)
    model = on_device(lambda: diffusers.UNet2DConditionModel(
        sample_size=args.latent, in_channels=args.channels, out_channels=args.channels, layers_per_block=args.layers,
        block_out_channels=args.widths, cross_attention_dim=args.text_dim,
        # diffusers' UNet2DConditionModel takes the number of heads as attention_head_dim (its num_attention_heads
        # is refused), as SD 1.5's config gives it.
        attention_head_dim=args.heads,
        down_block_types=("CrossAttnDownBlock2D",) * (levels - 1) + ("DownBlock2D",),
        up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * (levels - 1)), dtype, device)
    return model, random_inputs(args, dtype, device, latents=(1, args.channels, args.latent, args.latent),
                                prompt=(2, args.text_tokens, args.text_dim))


def denoise_unet(model, inputs, steps, guidance=7.5):
    """StableDiffusionPipeline's loop: the noise scaled to the sampler's first sigma, then per timestep the UNet on
    [uncond, cond] (the input scaled for the sampler), guidance, one Euler step."""
    from diffusers import EulerDiscreteScheduler
    # SD 1.5's noise schedule (its scheduler config's betas and step offset) on the Euler sampler.
    sched = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1)
    sched.set_timesteps(steps, device=inputs["latents"].device)
    latents = inputs["latents"] * sched.init_noise_sigma
    with torch.no_grad():
        for t in sched.timesteps:
            noise = model(sched.scale_model_input(torch.cat([latents] * 2), t), t,
                          encoder_hidden_states=inputs["prompt"]).sample
            uncond, cond = noise.chunk(2)
            latents = sched.step(uncond + guidance * (cond - uncond), t, latents).prev_sample
    return latents


def flux_rope_axes(head_dim):
    """The rotary dims of Flux's three position ids (a text/image index, the latent's row and column): an eighth of
    the head dim, the rest split between row and column (Flux.1's (16, 56, 56) at 128): all even (rotary pairs) for
    head dims that are multiples of 32."""
    first = head_dim // 8
    return first, (head_dim - first) // 2, (head_dim - first) // 2


def build_flux(args, dtype, device):
    import diffusers
    from diffusers.pipelines.flux.pipeline_flux import FluxPipeline
    model = on_device(lambda: diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=args.channels * 4, num_layers=args.layers, num_single_layers=2 * args.layers,
        attention_head_dim=args.head_dim, num_attention_heads=args.heads, joint_attention_dim=args.text_dim,
        pooled_projection_dim=args.pooled_dim, guidance_embeds=True,
        axes_dims_rope=flux_rope_axes(args.head_dim)), dtype, device)
    inputs = random_inputs(args, dtype, device, latents=(1, args.channels, args.latent, args.latent),
                           prompt=(1, args.text_tokens, args.text_dim), pooled=(1, args.pooled_dim))
    # FluxPipeline.prepare_latents / encode_prompt: 2 x 2 latent patches as tokens, their (0, row, column) ids, the
    # text's ids all 0.
    inputs["latents"] = FluxPipeline._pack_latents(inputs["latents"], 1, args.channels, args.latent, args.latent)
    inputs["img_ids"] = FluxPipeline._prepare_latent_image_ids(1, args.latent // 2, args.latent // 2, device, dtype)
    inputs["txt_ids"] = torch.zeros(args.text_tokens, 3, device=device, dtype=dtype)
    return model, inputs


def denoise_flux(model, inputs, steps, guidance=3.5):
    """FluxPipeline's loop: sigmas 1 .. 1/steps shifted by the image's token count (FLUX.1's dynamic-shift scheduler
    config), then per timestep the transformer once with the guidance scale as an input, one Euler step."""
    import numpy as np
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.pipelines.flux.pipeline_flux import calculate_shift
    latents = inputs["latents"]
    sched = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True)
    c = sched.config
    sched.set_timesteps(sigmas=np.linspace(1.0, 1 / steps, steps), device=latents.device,
                        mu=calculate_shift(latents.shape[1], c.base_image_seq_len, c.max_image_seq_len, c.base_shift,
                                           c.max_shift))
    guidance = torch.full([1], guidance, device=latents.device, dtype=torch.float32)
    with torch.no_grad():
        for t in sched.timesteps:
            noise = model(hidden_states=latents, timestep=t.expand(1).to(latents.dtype) / 1000, guidance=guidance,
                          pooled_projections=inputs["pooled"], encoder_hidden_states=inputs["prompt"],
                          txt_ids=inputs["txt_ids"], img_ids=inputs["img_ids"]).sample
            latents = sched.step(noise, t, latents).prev_sample
    return latents


def describe(args):
    """The markdown title's model and shape, and the step's guidance."""
    image = f"latent {args.latent}x{args.latent}"
    if args.model == "sd3":
        return (f"SD3 denoising loop, {args.layers} joint blocks x {args.heads} heads of {args.head_dim}, {image}, "
                f"{args.text_tokens} text tokens", "classifier-free guidance (batch 2)")
    if args.model == "unet":
        widths = "/".join(map(str, args.widths))
        dims = "/".join(str(w // args.heads) for w in sorted(set(args.widths)))
        return (f"SD 1.5 UNet denoising loop, widths {widths} with {args.layers} layers a block, {args.heads} heads "
                f"(head dim {dims}), {image}, {args.text_tokens} text tokens of {args.text_dim}",
                "classifier-free guidance (batch 2)")
    return (f"Flux denoising loop, {args.layers} double + {2 * args.layers} single blocks x {args.heads} heads of "
            f"{args.head_dim}, {image} ({(args.latent // 2) ** 2} tokens of {4 * args.channels}), {args.text_tokens} "
            f"text tokens", "guidance-distilled (guidance embedded, batch 1)")


MODELS = {"sd3": (build_sd3, denoise_sd3), "unet": (build_unet, denoise_unet), "flux": (build_flux, denoise_flux)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="sd3", choices=sorted(MODELS))
    p.add_argument("--layers", type=int, help="sd3: joint blocks; unet: layers a block; flux: double-stream blocks "
                   "(and twice as many single-stream ones)")
    p.add_argument("--heads", type=int, help="unet: at every width (head dim = width / heads)")
    p.add_argument("--head-dim", type=int, help="sd3; flux: a multiple of 32")
    p.add_argument("--widths", type=lambda s: tuple(int(w) for w in s.split(",")),
                   help="unet: the block widths, e.g. 320,640,1280,1280 (cross-attention in all but the last)")
    p.add_argument("--latent", type=int, help="latent side (image side / 8)")
    p.add_argument("--channels", type=int, help="latent channels")
    p.add_argument("--text-tokens", type=int)
    p.add_argument("--text-dim", type=int)
    p.add_argument("--pooled-dim", type=int, help="sd3, flux")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tiny", action="store_true", help="the model's tiny shape, 2 steps, 1 run")
    add_common_args(p, runs=3)
    args = p.parse_args(argv)
    shape = SHAPES[args.model][args.tiny]
    for k in SHAPE_OPTIONS:
        given = getattr(args, k)
        if given is not None and k not in shape:
            p.error(f"--{k.replace('_', '-')} is no option of --model {args.model}")
        setattr(args, k, shape[k] if given is None and k in shape else given)
    if args.tiny:
        args.steps, args.runs = 2, 1
    build, denoise = MODELS[args.model]
    dtype = DTYPES[args.dtype]
    import kernelkit

    rows, ref = [], None
    # patched: kernelkit.patch (norms, GELU / GEGLU, AdaLayerNorm); + attention: with attention=True (the processors'
    # SDPA on kernelkit.attention).
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
    meta = {"model": args.model, "gpu": gpu_name(args.device), "torch": torch.__version__,
            "commit": args.commit, "dtype": args.dtype,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "config": {k: getattr(args, k) for k in SHAPE_OPTIONS + ("steps", "runs", "compile_backend")
                       if getattr(args, k) is not None}}
    title, guidance = describe(args)
    lines = [f"# diffusers {title}, {args.dtype}, {meta['gpu']}, commit {args.commit}", "",
             f"{args.steps} steps, {guidance}; wall clock, median of {args.runs}. "
             f"compiled: torch.compile(denoiser, backend={args.compile_backend}).", "",
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
