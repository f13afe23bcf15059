#!/usr/bin/env python3
"""kernelkit's compute-heavy and decode ops against PyTorch in one run, through the PyTorch ops:

  attention   kernelkit.attention vs F.scaled_dot_product_attention with the flash, cuDNN and efficient backends
              (prefill, causal; TFLOP/s from the visible query-key pairs)
  varlen      packed varlen prefill (cu_seqlens, max_seqlen given) vs torch.nn.attention.varlen and SDPA per sequence
  masks       sliding-window, soft-capped and ALiBi prefill vs kernelkit without them, flex_attention and SDPA with
              a mask or bias
  headdims    prefill at each head_dim from 32 to 256 (b2 h16 s4096 causal) vs SDPA cuDNN and flash
  decode      kernelkit.decode_attention vs SDPA (one query token against a KV cache; TB/s of K and V read)
  decodefp8   decode_attention over an e4m3 KV cache (per-head scales) vs the same cache in bf16 / fp16 and SDPA
              cuDNN; TB/s of the bytes each reads, the time ratio, the e4m3 output's distance from the 16-bit one
  pages       paged decode with pages of 16, 1 and 64 keys and the contiguous cache (268 MB of K/V: past L2 as is)
  kvwrite     write_kv_cache (with and without RoPE) vs index_copy_ into the cache (and RoPE first)
  linear      kernelkit.linear_weight_only (W8A16, W4A16 group 128) vs F.linear in fp16/bf16 (cuBLAS); GB/s of weight
              bytes and % of the copy ceiling measured in the same run
  checkpoints GPTQ (zero points, act-order) and AWQ INT4 layers (kernelkit.nn.ZeroPointLinear) vs F.linear
              and kernelkit's symmetric W4A16; GB/s of the int4 weights
  w8a8        kernelkit.linear_w8a8 (INT8 tensor cores) vs torch._int_mm (cuBLASLt INT8, with and without the scaling
              epilogue in torch) and F.linear; TOPS
  fp8         kernelkit.linear_fp8 (cuBLASLt FP8) vs torch._scaled_mm with the same per-tensor / row-wise scales and
              F.linear; with DeepSeek-V3's block scales vs torch._scaled_mm's block-scaled mode and per-token x
              per-channel linear_fp8; TFLOP/s (Hopper)
  normquant   rms_norm_quant / fused_add_rms_norm_quant (RMSNorm + per-token FP8 or INT8, one pass) vs kernelkit's
              rms_norm then quantize_per_token, the same formula in PyTorch eager and torch.compile; GB/s of the
              minimal bytes and % of the copy ceiling
  actquant    silu_and_mul_quant (SwiGLU + per-token FP8 or INT8, one pass) vs kernelkit's silu_and_mul then
              quantize_per_token, the same formula in PyTorch eager and torch.compile; GB/s and % of the copy ceiling
  accuracy    a random-init transformers Llama (fp16) quantized W8A16 / W4A16 / W8A8: logits' cosine and max diff
  fp8model    a LLaMA-7B-shaped transformers model (4 layers, bf16) vs its kernelkit.quantize(model, "fp8") copy:
              logits' relative error and cosine, eager forward time of a 512-token prefill and of decode steps

Every kernelkit output is checked against a float32 PyTorch evaluation before it is timed. GPU time: the calls captured
in a CUDA graph, median of --runs replays (bench/torch_baselines.py's time_calls). Writes JSON and markdown with --out.

  python3 bench/op_baselines.py [--only attention,varlen,masks,headdims,decode,decodefp8,pages,kvwrite,linear,checkpoints,
                                        w8a8,fp8,normquant,actquant,accuracy,fp8model,host] [--quick] [--tuned | --tunes S;S] [--shapes REGEX]
                                        [--out DIR] [--commit SHA]
  python3 bench/op_baselines.py --check-cpu     # no GPU: the formulas and checks on small CPU shapes
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_baselines as tb  # noqa: E402  (time_calls, copy_peak)

import kernelkit  # noqa: E402

SDPA_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")


def sdpa(q, k, v, causal, backend=None):
    """SDPA on [b, s, h, d] tensors (transposed to its [b, h, s, d]); GQA through enable_gqa."""
    args = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    kw = dict(is_causal=causal, enable_gqa=q.shape[2] != k.shape[2])
    if backend is None:
        return F.scaled_dot_product_attention(*args, **kw).transpose(1, 2)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(*args, **kw).transpose(1, 2)


def visible_pairs(s_q, s_k, causal):
    if not causal:
        return s_q * s_k
    return sum(max(0, min(s_k, i + s_k - s_q + 1)) for i in range(s_q))


def check(name, got, want, tol):
    err = (got.float() - want.float()).abs().max().item()
    scale = max(1.0, want.float().abs().max().item())
    if not err <= tol * scale:
        raise AssertionError(f"{name}: max |kernelkit - reference| = {err:.3g} > {tol} x {scale:.3g}")
    return err


# The planner's alternatives timed next to its choice (KERNELKIT_TUNE, include/kernelkit/planner.hpp): the kernels
# that are not the default here (on sm_90 the mma.sync prefill, attn_wgmma=0, with its 128x64 tile, its 128x32 one and
# one row tile a warp; the two-warpgroup wgmma prefill fed by cp.async or TMA, attn_wgmma=1 / 2; the CUDA-core
# decode, decode_tc=0, and its 4-stage ring; the GEMV's register prefetch and cp.async ring, each the default on some
# shapes), candidates (the wgmma prefills' other key tiles, P V form and K/V depth), and sweeps of the split counts the planner's cost model
# picks (decode on the H200 at h32/8 d128: 16 splits at b1 s4096, one at b32 (256 blocks, one wave of 264 at 3
# stages) and at b64 (512 blocks, 1.94 waves, 0.8x cuDNN); the GEMV: 2 warps along k at m1 n11008 k4096). On the A100 / T4 profiles
# attn_wgmma=1 / 2 / 3 are refused (rows say so).
TUNED = {"attention": ["attn_wgmma=0", "attn_wgmma=0,attn_mw=1", "attn_wgmma=0,attn_stages=1",
                       "attn_wgmma=0,attn_bn=32", "attn_wgmma=1", "attn_wgmma=1,attn_bn=128", "attn_wgmma=2",
                       "attn_wgmma=2,attn_bn=64", "attn_wgmma=3,attn_pv_n=64", "attn_wgmma=3,attn_stages=3",
                       "attn_slack=0"],
         # past head_dim 128: the warp-specialized kernel's 64-key tiles (its masked forms'; default 96 / 80 keys)
         "headdims": ["attn_bn=64"],
         # packed varlen batches through the two-warpgroup kernel by cp.async; the mma.sync kernel
         "varlen": ["attn_varlen_ws=0", "attn_wgmma=0"],
         "decode": ["decode_tc=0", "decode_tc=0,decode_stages=4", "decode_stages=2", "decode_stages=3", "decode_stages=4", "decode_stages=5", "decode_stages=6", "decode_waves=1", "decode_splits=2", "decode_splits=3", "decode_splits=4",
                    "decode_splits=6", "decode_splits=8", "decode_splits=16", "decode_splits=64", "decode_splits=128",
                    "decode_rotate=1"],
         "decodefp8": ["decode_f16mma=0", "decode_tc=0", "decode_splits=8", "decode_stages=2", "decode_stages=3",
                       "decode_stages=4", "decode_stages=5", "decode_stages=6", "decode_rotate=1", "decode_kt=1",
                       "decode_kt=1,decode_splits=2", "decode_kt=1,decode_stages=3"],
         "fp8": ["fp8_gemv=1", "fp8_gemv=2"],  # 2: the FP8 tensor-core GEMV up to 16 tokens
         "normquant": ["rows_cap=2", "rows_held=0", "rows_onepass=1"],
         "linear": ["gemv_stages=0", "gemv_stages=3", "gemv_kwarps=1", "gemv_kwarps=4", "gemv_kwarps=8", "gemv_pdl=0",
                    "gemv_pdl=1"],
         "linear_mma": ["gemv_mma=1"],  # the tensor-core GEMV, W4A16 / W8A16 up to 16 tokens
         # m 9-16: the tiles, and batches of four or two regions (the default for W4A16 groups of 128 on sm_90)
         "linear_mma_pairs": ["gemv_mma=0", "gemv_mma=1", "gemv_mma=3"],
         "linear_mma_wide": ["gemv_mma=0", "gemv_mma=2"],  # the tiles and the same GEMV to 32 tokens (m 17-32)
         # INT4 with groups of 64+: 1, 2 or 4 row tiles a warp (each region's x shared by them), by token tiles (the
         # default takes 2 at m9-16 where the 32-row blocks number two an SM)
         "linear_mma_mtiles": ["gemv_mma=1,gemv_mma_mtiles=2", "gemv_mma=1,gemv_mma_mtiles=4"],
         "linear_mma_mtiles_pairs": ["gemv_mma=3,gemv_mma_mtiles=1", "gemv_mma=3,gemv_mma_mtiles=2",
                                     "gemv_mma=1,gemv_mma_mtiles=2", "gemv_mma=3,gemv_mma_mtiles=4"],
         "linear_mma_mtiles_wide": ["gemv_mma=3,gemv_mma_mtiles=1", "gemv_mma=3,gemv_mma_mtiles=2"]}


def tuned(op, fns):
    """[(row name suffix, fns run with KERNELKIT_TUNE set to one of the op's alternatives)], empty without --tuned;
    `fns`: one call per buffer set (see cold_sets). The planner reads the variable at each call, so a CUDA graph
    captures the kernel chosen under it."""
    if not args.tuned:
        return []
    settings = args.tunes.split(";") if args.tunes else TUNED[op]
    return [(s, [with_tune(s, f) for f in fns]) for s in settings]


def add_tuned(op, fn, check_output, impls, untimed, what, name="kernelkit"):
    """impls["<name> <setting>"] for each of the op's --tuned alternatives of `fn` (a call, or one a buffer set) whose
    output passes check_output(setting, out); the refused ones (NotImplementedError: unsupported on this GPU / build,
    e.g. attn_wgmma off sm_90a; a ValueError naming KERNELKIT_TUNE: a value this GPU's shared memory cannot hold, e.g.
    decode_stages=6 off Hopper) and failed checks become untimed rows, and a failed check also fails the run."""
    for setting, calls in tuned(op, fn if isinstance(fn, list) else [fn]):
        key = f"{name} {setting}"
        try:
            check_output(setting, calls[0]())
            impls[key] = calls
        except (NotImplementedError, ValueError) as e:
            if isinstance(e, ValueError) and "KERNELKIT_TUNE" not in str(e):
                raise
            untimed[key] = {"error": "refused: " + str(e).splitlines()[0][:200]}
        except Exception as e:  # a wrong result or a failed launch
            untimed[key] = {"error": f"CHECK FAILED: {type(e).__name__}: {e}"[:300]}
            CHECK_FAILURES.append(f"{what} {setting}: {e}")


def mma_gemv_tunes(m, fns, int4_groups=False):
    """tuned() of the weight-only tensor-core GEMV that covers m tokens (none past 32); `int4_groups` (INT4 weights
    with groups of 64 or more): its row-tile forms too."""
    size = "" if m <= 8 else "_pairs" if m <= 16 else "_wide" if m <= 32 else None
    if size is None:
        return []
    return tuned("linear_mma" + size, fns) + (tuned("linear_mma_mtiles" + size, fns) if int4_groups else [])


def with_tune(setting, fn):
    """fn, called with KERNELKIT_TUNE set to `setting` (and restored after)."""
    def call():
        old = os.environ.get("KERNELKIT_TUNE")
        os.environ["KERNELKIT_TUNE"] = setting
        try:
            return fn()
        finally:
            if old is None:
                os.environ.pop("KERNELKIT_TUNE", None)
            else:
                os.environ["KERNELKIT_TUNE"] = old
    return call


def cold_sets(tensors, set_bytes):
    """(sets, cold): the tensors, then copies of them, so that one timed CUDA graph cycling through the sets exceeds
    2x L2 (as kernelkit bench and torch_baselines.py do): a memory-bound op then reads DRAM, not what the previous
    replay left in L2 (a 24 MB INT4 weight fits the H200's L2, the 90 MB bf16 weight F.linear reads does not).
    `set_bytes`: what the smallest implementation reads of one set, so every implementation gets the same count."""
    n, cold = tb.buffer_sets(set_bytes, torch.cuda.get_device_properties(0).L2_cache_size)
    return [tuple(tensors)] + [tuple(t.clone() for t in tensors) for _ in range(n - 1)], cold


def attention_cases(quick):
    """(b, h, h_kv, s, d, causal). --quick: LLaMA-7B's 4096-token prefill (MHA and GQA 4). Otherwise the grid the
    Hopper prefill is held to: long-context GQA prefill, Qwen2-7B's heads, a diffusion-like full attention, hd64 and
    hd256, and a sweep of s from 512 to 16384 at 16K tokens a batch (at most 16 sequences; h32/8 d128 causal)."""
    if quick:
        return [(1, 32, 32, 4096, 128, True), (1, 32, 8, 4096, 128, True)]
    named = [(1, 32, 8, 8192, 128, True), (2, 28, 4, 2048, 128, True), (8, 16, 16, 1024, 64, False),
             (1, 24, 24, 4096, 128, False), (4, 40, 8, 4096, 128, True), (1, 32, 32, 4096, 128, True),
             (2, 16, 16, 4096, 64, True), (4, 32, 32, 2048, 128, False), (2, 16, 16, 4096, 256, True),
             (1, 32, 8, 4096, 256, False)]
    sweep = [(min(16, 16384 // s), 32, 8, s, 128, True) for s in (512, 1024, 2048, 4096, 16384)]  # s 8192: named
    return named + sweep


def picked(shape):
    """--shapes: only the rows whose shape label the regular expression finds (e.g. "^b(16|64) " or "d256")."""
    return not args.shapes or re.search(args.shapes, shape) is not None


def attention_checked(name, got, q, k, v, causal):
    """got against float32 attention on the first and last 128 query rows (the fewest and the most visible keys under
    the causal mask): every case of the grid checked without an s x s float32 score matrix."""
    s = q.shape[1]
    rows = [slice(0, min(128, s)), slice(max(0, s - 128), s)]
    return max(check(name, got[:, r], masked_ref(q, k, v, r, causal), 2e-2) for r in rows)


def run_attention(dtype, runs, device):
    rows = []
    for b, h, hk, s, d, causal in attention_cases(args.quick):
        shape = f"b{b} h{h}/{hk} s{s} d{d}" + (" causal" if causal else "")
        if not picked(shape):
            continue
        q = torch.randn(b, s, h, d, device=device, dtype=dtype)
        k, v = torch.randn(b, s, hk, d, device=device, dtype=dtype), torch.randn(b, s, hk, d, device=device, dtype=dtype)
        row = {"op": "attention", "shape": shape,
               "max_err": attention_checked("attention", kernelkit.attention(q, k, v, causal=causal), q, k, v, causal)}
        flops = 4.0 * b * h * d * visible_pairs(s, s, causal)
        impls = {"kernelkit": lambda: kernelkit.attention(q, k, v, causal=causal)}
        untimed = {}  # alternatives that are refused here, or fail their check: a row saying so, not a time
        add_tuned("attention", impls["kernelkit"],
                  lambda setting, out: attention_checked("attention " + setting, out, q, k, v, causal), impls, untimed,
                  f"attention {row['shape']}")
        for be in SDPA_BACKENDS:
            impls["sdpa " + be.split("_")[0].lower()] = (lambda be=be: sdpa(q, k, v, causal, be))
        row.update(time_all(impls, runs, lambda us: flops / us / 1e6, "TFLOP/s"))
        row["impls"].update(untimed)
        rows.append(row)
        del q, k, v
    return rows


def masked_ref(q, k, v, rows, causal, window=-1, softcap=0.0, alibi=None):
    """float32 attention of query rows `rows` (a slice) of [b, s_q, h, d] q against every key: the bottom-right
    causal mask, a sliding window (keys from position - window), a soft-cap and ALiBi slopes [h], spelled out."""
    sq, h, d, sk, hk = q.shape[1], q.shape[2], q.shape[3], k.shape[1], k.shape[2]
    qs = q[:, rows].float().transpose(1, 2)
    ks, vs = (t.float().transpose(1, 2).repeat_interleave(h // hk, 1) for t in (k, v))
    s = qs @ ks.transpose(-1, -2) * d ** -0.5
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    pos = torch.arange(sq, device=q.device)[rows][:, None] + (sk - sq)
    key = torch.arange(sk, device=q.device)[None, :]
    if alibi is not None:
        s = s - alibi[:, None, None] * (pos - key).abs()
    hidden = (key > pos) & causal
    if window >= 0:
        hidden |= key < pos - window
    return (s.masked_fill(hidden, float("-inf")).softmax(-1).nan_to_num(0.0) @ vs).transpose(1, 2)


def flex(q, k, v, causal, window=-1, softcap=0.0, alibi=None):
    """torch.nn.attention.flex_attention (compiled, a block mask that skips the hidden tiles), the PyTorch way to a
    sliding window, a soft-cap or ALiBi (slopes [h])."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    s_q, s_k = q.shape[1], k.shape[1]

    def visible(b, h, i, j):
        pos = i + (s_k - s_q)
        ok = (j <= pos) if causal else (j >= 0)
        return ok & (j >= pos - window) if window >= 0 else ok

    def mod(score, b, h, i, j):
        if softcap > 0:
            score = softcap * torch.tanh(score / softcap)
        if alibi is not None:
            score = score - alibi[h] * (i + (s_k - s_q) - j).abs()
        return score
    mask = create_block_mask(visible, None, None, s_q, s_k, device=q.device)
    fn = torch.compile(flex_attention)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    kw = dict(block_mask=mask, enable_gqa=q.shape[2] != k.shape[2],
              score_mod=mod if softcap > 0 or alibi is not None else None)
    return lambda: fn(qt, kt, vt, **kw).transpose(1, 2)


def run_masks(dtype, runs, device):
    """Sliding window (Mistral / Gemma), soft-cap (Gemma 2) and ALiBi (BLOOM: slopes 2^(-8 (i + 1) / h)) prefill,
    causal: kernelkit with them, kernelkit without them on the same inputs (the window's rate is the tiles it skips:
    its time over the full causal one), flex_attention (compiled, block mask, score_mod) and SDPA given the window as
    a boolean mask or ALiBi as a float bias (how transformers runs BLOOM under SDPA). Checked on the first and last
    512 query rows against masked_ref."""
    rows = []
    for h, hk, s, d, window, softcap, with_alibi in ((32, 8, 16384, 128, 4096, 0.0, False),
                                                     (16, 8, 4096, 128, 4096, 50.0, False),
                                                     (32, 32, 4096, 128, -1, 0.0, True)):
        q = torch.randn(1, s, h, d, device=device, dtype=dtype)
        k, v = (torch.randn(1, s, hk, d, device=device, dtype=dtype) for _ in range(2))
        alibi = 2.0 ** (-8.0 * torch.arange(1, h + 1, device=device) / h) if with_alibi else None
        kw = dict(causal=True, window_left=window, softcap=softcap, alibi_slopes=alibi)
        got = kernelkit.attention(q, k, v, **kw)
        err = max(check("attention masked", got[:, r], masked_ref(q, k, v, r, True, window, softcap, alibi), 2e-2)
                  for r in (slice(0, 512), slice(s - 512, s)))
        what = ((f" window {window}" if window >= 0 else "") + (f" softcap {softcap:g}" if softcap else "") +
                (" alibi" if with_alibi else ""))
        row = {"op": "attention" + what, "shape": f"b1 h{h}/{hk} s{s} d{d} causal", "max_err": err}
        flops = 4.0 * h * d * sum(min(i + 1, window + 1) if window >= 0 else i + 1 for i in range(s))  # visible pairs
        impls = {"kernelkit": lambda: kernelkit.attention(q, k, v, **kw),
                 "kernelkit without" + what: lambda: kernelkit.attention(q, k, v, causal=True)}
        untimed = {}
        try:
            impls["flex_attention"] = flex(q, k, v, True, window, softcap, alibi)
        except Exception as e:  # its compile needs Triton and a working inductor
            untimed["flex_attention"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        pos = torch.arange(s, device=device)
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if with_alibi:  # [h, s, s] in q's dtype (1 GiB at h32 s4096), -inf above the diagonal
            bias = (-alibi[:, None, None] * (pos[:, None] - pos[None, :]).abs()).masked_fill(
                pos[None, :] > pos[:, None], float("-inf")).to(dtype)
            impls["sdpa, alibi as a float bias"] = lambda: F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias)
        elif not softcap:
            mask = (pos[None, :] <= pos[:, None]) & (pos[None, :] >= pos[:, None] - window)
            impls["sdpa, window as a boolean mask"] = lambda: F.scaled_dot_product_attention(
                qt, kt, vt, attn_mask=mask, enable_gqa=True)
        row.update(time_all(impls, runs, lambda us: flops / us / 1e6, "TFLOP/s"))
        row["impls"].update(untimed)
        rows.append(row)
    return rows


HEAD_DIMS = (32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256)


def run_head_dims(dtype, runs, device):
    """Prefill at b2 h16 s4096 causal for each head_dim models use (SD 1.5's 40 / 80 / 160, Phi's 80 / 96, ViTs' 72 /
    112, ...) against SDPA's cuDNN and flash backends; --quick: 40, 80, 96, 160."""
    rows = []
    for d in ((40, 80, 96, 160) if args.quick else HEAD_DIMS):
        b, h, s = 2, 16, 4096
        q, k, v = (torch.randn(b, s, h, d, device=device, dtype=dtype) for _ in range(3))
        want = masked_ref(q, k, v, slice(s - 256, s), True)  # the last 256 query rows
        err = check("attention head_dim", kernelkit.attention(q, k, v, causal=True)[:, -256:], want, 2e-2)
        row = {"op": "attention head_dim", "shape": f"b{b} h{h} s{s} d{d} causal", "max_err": err}
        impls = {"kernelkit": lambda: kernelkit.attention(q, k, v, causal=True)}
        untimed = {}
        if d > 128:
            add_tuned("headdims", impls["kernelkit"],
                      lambda setting, out: check("attention head_dim " + setting, out[:, -256:], want, 2e-2),
                      impls, untimed, f"attention head_dim {row['shape']}")
        for be in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
            impls["sdpa " + be.split("_")[0].lower()] = (lambda be=be: sdpa(q, k, v, True, be))
        flops = 4.0 * b * h * d * visible_pairs(s, s, True)
        row.update(time_all(impls, runs, lambda us: flops / us / 1e6, "TFLOP/s"))
        row["impls"].update(untimed)
        rows.append(row)
    return rows


def torch_varlen(q, k, v, cu_q, cu_k, max_q, max_k):
    """PyTorch's own packed-varlen attention (torch.nn.attention.varlen, FlashAttention kernels), causal; its keyword
    for the mask changed between releases (is_causal, then window_size)."""
    import inspect
    from torch.nn.attention.varlen import varlen_attn
    old_api = "is_causal" in inspect.signature(varlen_attn).parameters
    causal = {"is_causal": True} if old_api else {"window_size": (-1, 0)}
    return varlen_attn(q, k, v, cu_q, cu_k, max_q, max_k, **causal)


def run_varlen(dtype, runs, device):
    """Packed varlen prefill (a serving batch of prompts of different lengths), causal GQA: kernelkit given
    max_seqlen_q / k (nothing read back, so it is captured like the others) and without them (one read-back a call:
    timed eagerly, since a synchronization cannot be captured), PyTorch's varlen_attn, and SDPA called per sequence."""
    rows = []
    for lens in ((512, 1024, 2048, 512), (128,) * 32):
        h, hk, d = 32, 8, 128
        cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
        total, longest = int(cu[-1]), max(lens)
        q = torch.randn(total, h, d, device=device, dtype=dtype)
        k, v = (torch.randn(total, hk, d, device=device, dtype=dtype) for _ in range(2))
        spans = [(int(cu[i]), int(cu[i + 1])) for i in range(len(lens))]
        want = torch.cat([sdpa(q[None, a:b].float(), k[None, a:b].float(), v[None, a:b].float(), True)[0]
                          for a, b in spans])
        given = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest, max_seqlen_k=longest)
        row = {"op": "attention varlen", "shape": f"{len(lens)} seqs of {'/'.join(map(str, sorted(set(lens))))} "
                                                  f"({total} tokens) h{h}/{hk} d{d} causal",
               "max_err": check("attention varlen", kernelkit.attention(q, k, v, causal=True, **given), want, 2e-2)}
        flops = 4.0 * h * d * sum(visible_pairs(n, n, True) for n in lens)
        impls = {"kernelkit": lambda: kernelkit.attention(q, k, v, causal=True, **given),
                 "torch varlen_attn": lambda: torch_varlen(q, k, v, cu, cu, longest, longest)}
        untimed = {}
        add_tuned("varlen", impls["kernelkit"],
                  lambda setting, out: check("attention varlen " + setting, out, want, 2e-2), impls, untimed,
                  f"attention varlen {row['shape']}")
        for be in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
            impls["sdpa " + be.split("_")[0].lower() + " per sequence"] = (
                lambda be=be: [sdpa(q[None, a:b], k[None, a:b], v[None, a:b], True, be) for a, b in spans])
        row.update(time_all(impls, runs, lambda us: flops / us / 1e6, "TFLOP/s"))
        row["impls"].update(untimed)
        # Without max_seqlen: the read-back (a stream synchronization) rules out a graph; eager CUDA-event time.
        row["impls"]["kernelkit, cu_seqlens read back (eager)"] = eager_time(
            lambda: kernelkit.attention(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu), runs,
            row["impls"]["kernelkit"].get("gpu_us"), lambda us: flops / us / 1e6, "TFLOP/s")
        rows.append(row)
    return rows


def eager_time(fn, runs, base_us, rate, unit):
    """Median of `runs` eager calls between CUDA events (what a call that synchronizes costs on the stream); a
    failure is reported in its row, as time_all does."""
    times = []
    try:
        for _ in range(3):
            fn()
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    us = sorted(times)[len(times) // 2]
    r = {"gpu_us": us, unit: rate(us)}
    if base_us:
        r["time_over_kernelkit"] = us / base_us
    return r


def decode_cases(quick):
    """(b, h, h_kv, ctx, d). --quick: GQA 4 at batch 1 and 32, and LLaMA-7B's MHA (one query row per KV head: the
    tensor-core decode's 16-row MMA tile is then 1/16 used, so this row says whether decode_tc should stay on at GQA 1).
    Otherwise batch {1, 4, 16, 64, 256} x context {512, 2048, 8192, 32768} at h32/8 d128 (up to 34 GB of KV), and
    GQA 1 and 7 rows."""
    if quick:
        return [(1, 32, 8, 4096, 128), (32, 32, 8, 4096, 128), (1, 32, 32, 4096, 128)]
    grid = [(b, 32, 8, ctx, 128) for b in (1, 4, 16, 64, 256) for ctx in (512, 2048, 8192, 32768)]
    return grid + [(1, 32, 32, 4096, 128), (16, 28, 4, 2000, 128), (64, 32, 8, 1024, 128)]


def run_decode(dtype, runs, device):
    rows = []
    for b, h, hk, s, d in decode_cases(args.quick):
        if not picked(f"b{b} h{h}/{hk} s{s} d{d}"):
            continue
        q = torch.randn(b, 1, h, d, device=device, dtype=dtype)
        kc, vc = torch.randn(b, s, hk, d, device=device, dtype=dtype), torch.randn(b, s, hk, d, device=device, dtype=dtype)
        # The float32 reference on the first two sequences (each is independent): 34 GB of KV has no float32 twin.
        n = min(b, 2)
        want = sdpa(q[:n].float(), kc[:n].float(), vc[:n].float(), False)
        kv_bytes = 2 * kc.numel() * kc.element_size()
        caches, cold = cold_sets((kc, vc), kv_bytes)
        row = {"op": "decode_attention", "shape": f"b{b} h{h}/{hk} s{s} d{d}", "l2": "cold" if cold else "warm",
               "buffer_sets": len(caches), "kv_MB": kv_bytes / 1e6,
               "max_err": check("decode", kernelkit.decode_attention(q, kc, vc)[:n], want, 2e-2)}
        impls = {"kernelkit": [lambda c=c: kernelkit.decode_attention(q, *c) for c in caches]}
        untimed = {}
        add_tuned("decode", impls["kernelkit"], lambda setting, out: check("decode " + setting, out[:n], want, 2e-2),
                  impls, untimed, f"decode {row['shape']}")
        for be in SDPA_BACKENDS:
            impls["sdpa " + be.split("_")[0].lower()] = [lambda be=be, c=c: sdpa(q, c[0], c[1], False, be)
                                                         for c in caches]
        row.update(time_all(impls, runs, lambda us: kv_bytes / us / 1e6, "TB/s (KV)"))
        row["impls"].update(untimed)
        rows.append(row)
        del q, kc, vc, caches, impls
        torch.cuda.empty_cache()
    return rows


def run_decode_fp8(dtype, runs, device):
    """decode_attention over an e4m3 KV cache (scales per KV head, amax / 448, as write_kv_cache fills it) against the
    same cache in dtype, both kernelkit, and SDPA cuDNN over the dtype cache: TB/s of the bytes each reads, the
    16-bit / e4m3 time ratio, and how far the e4m3 output is from the 16-bit one (max |difference|)."""
    cases = [(16, 32, 8, 8192, 128), (1, 32, 8, 8192, 128), (64, 32, 8, 2048, 128)]
    if not args.quick:
        cases += [(b, 32, 8, ctx, 128) for b in (4, 32) for ctx in (2048, 32768)] + [(128, 32, 8, 2048, 128),
                                                                                     (16, 28, 4, 2000, 128)]
    rows = []
    for b, h, hk, s, d in cases:
        if not picked(f"b{b} h{h}/{hk} s{s} d{d}"):
            continue
        q = torch.randn(b, 1, h, d, device=device, dtype=dtype)
        kc, vc = torch.randn(b, s, hk, d, device=device, dtype=dtype), torch.randn(b, s, hk, d, device=device, dtype=dtype)
        ks, vs = (c.float().abs().amax(dim=(0, 1, 3)) / 448 for c in (kc, vc))
        k8 = (kc.float() / ks[:, None]).to(torch.float8_e4m3fn)
        v8 = (vc.float() / vs[:, None]).to(torch.float8_e4m3fn)
        n = min(b, 2)
        want = sdpa(q[:n].float(), k8[:n].float() * ks[:, None], v8[:n].float() * vs[:, None], False)
        fp8_bytes, bf_bytes = 2 * k8.numel(), 2 * kc.numel() * kc.element_size()
        got8 = kernelkit.decode_attention(q, k8, v8, k_scale=ks, v_scale=vs)
        row = {"op": "decode_attention e4m3 cache", "shape": f"b{b} h{h}/{hk} s{s} d{d}", "kv_MB": fp8_bytes / 1e6,
               "max_err": check("decode e4m3", got8[:n], want, 2e-2),
               "max_diff_vs_16bit_cache": (got8.float() - kernelkit.decode_attention(q, kc, vc).float()).abs().max().item()}
        sets8, cold = cold_sets((k8, v8, ks, vs), fp8_bytes)
        sets16, _ = cold_sets((kc, vc), bf_bytes)
        row["l2"] = "cold" if cold else "warm"
        impls = {"kernelkit e4m3": [lambda c=c: kernelkit.decode_attention(q, c[0], c[1], k_scale=c[2], v_scale=c[3])
                                    for c in sets8],
                 "kernelkit 16-bit": [lambda c=c: kernelkit.decode_attention(q, *c) for c in sets16],
                 "sdpa cudnn 16-bit": [lambda c=c: sdpa(q, c[0], c[1], False, "CUDNN_ATTENTION") for c in sets16]}
        untimed = {}
        add_tuned("decodefp8", impls["kernelkit e4m3"],
                  lambda setting, out: check("decode e4m3 " + setting, out[:n], want, 2e-2), impls, untimed,
                  f"decode e4m3 {row['shape']}", name="kernelkit e4m3")
        row.update(time_all(impls, runs, None, "TB/s (KV)"))
        for name, r in row["impls"].items():
            if "gpu_us" in r:
                r["TB/s (KV)"] = (fp8_bytes if "e4m3" in name else bf_bytes) / r["gpu_us"] / 1e6
        row["impls"].update(untimed)
        rows.append(row)
        del q, kc, vc, k8, v8, sets8, sets16, impls
        torch.cuda.empty_cache()
    return rows


def paged(cache, page, perm):
    """cache [b, s, h_kv, d] as pages of `page` keys, the pool's pages in the order perm (the block table's)."""
    b, s = cache.shape[:2]
    return cache.reshape(b * s // page, page, *cache.shape[2:])[perm.argsort()].contiguous()


def run_decode_pages(dtype, runs, device):
    """Paged decode at b16 h32/8 ctx 4096 d128 with pages of 16 keys (vLLM's default, the base) against pages of 1
    (SGLang / TGI) and 64, shuffled page tables; the contiguous cache for reference. TB/s of K and V read."""
    b, h, hk, s, d = 16, 32, 8, 4096, 128
    q = torch.randn(b, 1, h, d, device=device, dtype=dtype)
    kc, vc = (torch.randn(b, s, hk, d, device=device, dtype=dtype) for _ in range(2))
    lens = torch.full((b,), s, dtype=torch.int32, device=device)
    want = sdpa(q.float(), kc.float(), vc.float(), False)
    kv_bytes = 2 * kc.numel() * kc.element_size()
    impls, errs = {}, []
    for page in (16, 1, 64):
        perm = torch.randperm(b * s // page, device=device)
        table = perm.reshape(b, s // page).to(torch.int32)
        kp, vp = paged(kc, page, perm), paged(vc, page, perm)
        errs.append(check(f"decode page {page}", kernelkit.decode_attention(q, kp, vp, block_table=table,
                                                                          seqlens_k=lens), want, 2e-2))
        impls[f"kernelkit page {page}"] = (lambda kp=kp, vp=vp, table=table: kernelkit.decode_attention(
            q, kp, vp, block_table=table, seqlens_k=lens))
    impls["kernelkit contiguous"] = lambda: kernelkit.decode_attention(q, kc, vc)
    row = {"op": "decode_attention paged", "shape": f"b{b} h{h}/{hk} s{s} d{d}", "max_err": max(errs)}
    row.update(time_all(impls, runs, lambda us: kv_bytes / us / 1e6, "TB/s (KV)"))
    return [row]


def rope_torch(x, positions, cos_sin_cache):
    """NeoX RoPE of x [tokens, heads, d] in PyTorch ops (rotate_half, as transformers and vLLM's native path do)."""
    cos, sin = (t[:, None, :] for t in cos_sin_cache[positions].chunk(2, dim=-1))
    half = x.shape[-1] // 2
    a, b = x[..., :half].float(), x[..., half:].float()
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1).to(x.dtype)


def run_kv_write(dtype, runs, device, peak_gbps):
    """write_kv_cache (vLLM's reshape_and_cache) into a paged cache of 16-key pages (shuffled slots): a decode step of
    256 sequences and a prefill of 8192 tokens, h32/8 d128, without and with RoPE fused, against index assignment
    into the cache (and RoPE first: kernelkit.rotary_embedding, or PyTorch ops). GB/s of the bytes the op must move
    (k, v read and written; with RoPE q read and written too) and % of the copy ceiling."""
    rows = []
    h, hk, d, page, pages = 32, 8, 128, 16, 16384
    k_cache, v_cache = (torch.randn(pages, page, hk, d, device=device, dtype=dtype) for _ in range(2))
    flat_k, flat_v = k_cache.view(-1, hk, d), v_cache.view(-1, hk, d)
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(8192, dtype=torch.float64)[:, None] * inv
    cos_sin = torch.cat([angles.cos(), angles.sin()], dim=-1).float().to(device)
    for tokens in (256, 8192):
        k, v = (torch.randn(tokens, hk, d, device=device, dtype=dtype) for _ in range(2))
        q = torch.randn(tokens, h, d, device=device, dtype=dtype)
        slots = torch.randperm(pages * page, device=device)[:tokens]
        positions = torch.randint(0, 8192, (tokens,), device=device)
        e = k.element_size()
        for rope in (False, True):
            kw = dict(q=q.clone(), positions=positions, cos_sin_cache=cos_sin) if rope else {}
            q_out = kernelkit.write_kv_cache(k_cache, v_cache, k, v, slots, **kw)
            want_k = rope_torch(k, positions, cos_sin) if rope else k
            err = check("write_kv_cache k", flat_k[slots], want_k, 2e-2)
            assert torch.equal(flat_v[slots], v)
            if rope:
                err = max(err, check("write_kv_cache q", q_out, rope_torch(q, positions, cos_sin), 2e-2))
            moved = 4 * k.numel() * e + (2 * q.numel() * e if rope else 0)
            what = " + RoPE" if rope else ""
            row = {"op": "write_kv_cache" + what, "shape": f"tokens {tokens} h{h}/{hk} d{d} pages of {page}",
                   "max_err": err}
            qs = q.clone()

            def index_copy(k=k, v=v, slots=slots):
                flat_k.index_copy_(0, slots, k)
                flat_v.index_copy_(0, slots, v)

            if rope:
                impls = {"kernelkit": lambda: kernelkit.write_kv_cache(k_cache, v_cache, k, v, slots, q=qs,
                                                                       positions=positions, cos_sin_cache=cos_sin),
                         "kernelkit.rotary_embedding + index_copy_": [
                             lambda: kernelkit.rotary_embedding(qs, k.clone(), positions, cos_sin),
                             index_copy],
                         "PyTorch RoPE + index_copy_": [lambda: rope_torch(q, positions, cos_sin),
                                                        lambda: index_copy(rope_torch(k, positions, cos_sin))]}
            else:
                impls = {"kernelkit": lambda: kernelkit.write_kv_cache(k_cache, v_cache, k, v, slots),
                         "index_copy_ (k, v)": index_copy}
            row.update(time_all(impls, runs, lambda us: moved / us / 1e3, "GB/s"))
            for r in row["impls"].values():
                if "GB/s" in r:
                    r["% of copy"] = 100.0 * r["GB/s"] / peak_gbps
            rows.append(row)
    return rows


def run_linear(dtype, runs, device, peak_gbps):
    rows = []
    shapes = [(11008, 4096), (4096, 11008), (28672, 8192)]
    ms = (1, 16, 32) if args.quick else (1, 8, 16, 32, 64)
    for n, k in shapes[:1] if args.quick else shapes:
        w = torch.randn(n, k, device=device, dtype=dtype) * 0.02
        packs = {bits: kernelkit.quantize_weight(w, bits, 128) for bits in (8, 4)}
        for m in ms:
            x = torch.randn(m, k, device=device, dtype=dtype)
            # Sets of (x, w, INT8 q and s, INT4 q and s), counted by the INT4 working set (the smallest).
            sets, cold = cold_sets((x, w, *packs[8], *packs[4]),
                                   packs[4][0].numel() + packs[4][1].numel() * 4 + x.numel() * x.element_size())
            row = {"op": "linear_weight_only", "shape": f"m{m} n{n} k{k}", "l2": "cold" if cold else "warm",
                   "buffer_sets": len(sets)}
            impls = {"F.linear " + str(dtype).split(".")[-1]: [lambda st=st: F.linear(st[0], st[1]) for st in sets]}
            for bits, (q, s) in packs.items():
                # Check against F.linear on the dequantized weights (float32).
                if bits == 8:
                    deq = q.float() * s[:, None]
                else:
                    deq = None  # the int4 layout is checked by the C++ tests; here the quantization error bound
                qs = slice(2, 4) if bits == 8 else slice(4, 6)  # the set's (q, s) of this width
                runs_ = [lambda st=st, bits=bits, qs=qs: kernelkit.linear_weight_only(st[0], *st[qs], bits,
                                                                                       128 if bits == 4 else 0)
                         for st in sets]
                got = runs_[0]()
                if deq is not None:
                    row["max_err_w8"] = check("w8a16", got, x.float() @ deq.T, 1e-2)
                else:
                    row["max_err_w4_vs_fp"] = check("w4a16", got, x.float() @ w.float().T, 0.25)
                impls[f"kernelkit w{bits}a16"] = runs_
                alternatives = (tuned("linear", runs_) if m <= 2 else []) + mma_gemv_tunes(m, runs_, bits == 4)
                for setting, calls in alternatives:  # the same sums in another order
                    check(f"w{bits}a16 " + setting, calls[0](), got, 1e-2)
                    impls[f"kernelkit w{bits}a16 {setting}"] = calls
            weight_bytes = {"F.linear": w.numel() * w.element_size(), 8: packs[8][0].numel() + packs[8][1].numel() * 4,
                            4: packs[4][0].numel() + packs[4][1].numel() * 4}
            res = time_all(impls, runs, None, None)
            for name, r in res["impls"].items():
                key = 8 if "w8" in name else 4 if "w4" in name else "F.linear"
                r["weight_GBps"] = weight_bytes[key] / r["gpu_us"] / 1e3
                r["pct_copy"] = 100 * r["weight_GBps"] / peak_gbps
            row.update(res)
            rows.append(row)
    return rows


def checkpoint_layers(n, k, device, seed):
    """Random INT4 checkpoint weights [n, k] with groups of 128 as GPTQ (asymmetric, act-order) and AWQ
    (asymmetric) layers, and the float weights they dequantize to (for F.linear and the check)."""
    from kernelkit import formats
    g = torch.Generator(device=device).manual_seed(seed)
    groups = k // 128
    q = torch.randint(0, 16, (n, k), generator=g, device=device, dtype=torch.uint8)
    zeros = torch.randint(1, 16, (n, groups), generator=g, device=device, dtype=torch.int16)
    scales = (torch.rand(n, groups, generator=g, device=device) * 0.004 + 0.001).half().float()
    act = torch.arange(k, device=device)[torch.randperm(k, generator=g, device=device)] // 128
    plain = torch.arange(k, device=device) // 128
    layer = kernelkit.nn.ZeroPointLinear.from_weights
    layers = {"gptq act-order": layer(formats.IntWeights(q, zeros, scales, act)),
              "awq": layer(formats.IntWeights(q, zeros, scales, plain))}
    deq = {name: scales[:, gi] * (q.float() - zeros.float()[:, gi]) for name, gi in (("gptq act-order", act),
                                                                                    ("awq", plain))}
    return layers, deq


def run_checkpoints(dtype, runs, device, peak_gbps):
    """GPTQ- and AWQ-format layers (zero points; GPTQ with act-order) on kernelkit.nn.ZeroPointLinear against
    F.linear on the dequantized weights and kernelkit's own symmetric W4A16 layout; GB/s of the int4 weights."""
    import copy
    rows = []
    shapes = [(13824, 5120), (5120, 13824), (14336, 4096), (4096, 14336), (28672, 8192), (151936, 3584)]
    ms = (1, 16, 32) if args.quick else (1, 2, 4, 8, 16, 32, 64)
    for n, k in shapes[:2] if args.quick else shapes:
        layers, deq = checkpoint_layers(n, k, device, seed=n + k)
        w = deq["awq"].to(dtype)
        native = kernelkit.quantize_weight(w, 4, 128)
        q_bytes = n * k // 2 + n * (k // 128) * 5  # int4 values, fp32 scales and int8 zero points
        for m in ms:
            x = torch.randn(m, k, device=device, dtype=dtype)
            count, cold = tb.buffer_sets(q_bytes + x.numel() * x.element_size(),
                                         torch.cuda.get_device_properties(0).L2_cache_size)
            sets = [(x, layers, w, native)] + [(x.clone(), copy.deepcopy(layers), w.clone(),
                                                tuple(t.clone() for t in native)) for _ in range(count - 1)]
            row = {"op": "linear checkpoint int4", "shape": f"m{m} n{n} k{k} g128", "l2": "cold" if cold else "warm",
                   "buffer_sets": len(sets)}
            impls = {}
            for name in ("gptq act-order", "awq"):
                calls = [lambda st=st, name=name: st[1][name](st[0]) for st in sets]
                row[f"max_err_{name}"] = check(name, calls[0](), x.float() @ deq[name].T, 1e-2)
                impls[f"kernelkit {name}"] = calls
                for setting, tuned_calls in mma_gemv_tunes(m, calls, True):
                    check(f"{name} {setting}", tuned_calls[0](), x.float() @ deq[name].T, 1e-2)
                    impls[f"kernelkit {name} {setting}"] = tuned_calls
            impls["kernelkit int4 (symmetric, native)"] = [lambda st=st: kernelkit.linear_weight_only(
                st[0], *st[3], 4, 128) for st in sets]
            impls["F.linear " + str(dtype).split(".")[-1]] = [lambda st=st: F.linear(st[0], st[2]) for st in sets]
            res = time_all(impls, runs, None, None)
            for name, r in res["impls"].items():
                if "gpu_us" in r:
                    r["weight_GBps"] = (w.numel() * w.element_size() if name.startswith("F.") else q_bytes) / \
                        r["gpu_us"] / 1e3
                    r["pct_copy"] = 100 * r["weight_GBps"] / peak_gbps
            row.update(res)
            rows.append(row)
        del layers, deq, w, native
        torch.cuda.empty_cache()
    return rows


def run_w8a8(dtype, runs, device):
    """W8A8 on INT8 tensor cores vs torch._int_mm (cuBLASLt INT8; with and without the same scaling epilogue in torch)
    and F.linear in the activation dtype; rate in TOPS (2 m n k int8 ops)."""
    rows = []
    ms = (256, 2048) if args.quick else (256, 1024, 4096)
    for n, k in [(11008, 4096)] if args.quick else [(4096, 4096), (11008, 4096), (4096, 11008)]:
        w = torch.randn(n, k, device=device, dtype=dtype) * 0.02
        qw, sw = kernelkit.quantize_weight(w, 8)
        for m in ms:
            x = torch.randn(m, k, device=device, dtype=dtype)
            xq, sx = kernelkit.quantize_per_token(x)
            exact = (xq.double() @ qw.double().T) * sx.double()[:, None] * sw.double()  # integer sums exact in fp64
            # Sized by INT8 weights, x and the output.
            sets, cold = cold_sets((x, w, xq, sx, qw, sw), qw.numel() + xq.numel() + m * n * 2)
            row = {"op": "linear_w8a8", "shape": f"m{m} n{n} k{k}", "l2": "cold" if cold else "warm",
                   "buffer_sets": len(sets),
                   "max_err": check("w8a8", kernelkit.linear_w8a8(xq, sx, qw, sw, out_dtype=dtype), exact, 1e-2)}
            # st[4].t(): the [k, n] column-major view of a set's weights that torch._int_mm (cuBLASLt) takes
            impls = {"kernelkit w8a8": [lambda st=st: kernelkit.linear_w8a8(*st[2:], out_dtype=dtype) for st in sets],
                     "torch._int_mm + scale": [lambda st=st: (torch._int_mm(st[2], st[4].t()).float() * st[3][:, None] *
                                                              st[5]).to(dtype) for st in sets],
                     "torch._int_mm (int32 out)": [lambda st=st: torch._int_mm(st[2], st[4].t()) for st in sets],
                     "F.linear " + str(dtype).split(".")[-1]: [lambda st=st: F.linear(st[0], st[1]) for st in sets]}
            row.update(time_all(impls, runs, lambda us, m=m: 2 * m * n * k / us / 1e6, "TOPS"))
            rows.append(row)
    return rows


def run_quant_accuracy(device):
    """The accuracy check: a random-init transformers Llama in fp16, its logits against the same model with every
    Linear (but lm_head) quantized: W8A16, W4A16 (group 128), W8A8; cosine similarity and max |difference|."""
    import copy

    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=8,
                                   num_key_value_heads=8, vocab_size=4096, max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=torch.float16).eval()
    out = []
    for tokens in (1, 48):  # a decode step (the GEMV path) and a short prefill (W8A8's GEMM)
        ids = torch.randint(0, cfg.vocab_size, (1, tokens), device=device)
        with torch.no_grad():
            want = model(ids).logits.double()
            for name, kw in (("w8a16", dict(bits=8)), ("w4a16", dict(bits=4, group=128)),
                             ("w8a8", dict(bits=8, activations=True))):
                q = copy.deepcopy(model)
                report = kernelkit.quantize(q, **kw)
                got = q(ids).logits.double()
                out.append({"model": f"Llama h1024 x4 layers fp16, {tokens} tokens", "weights": name,
                            "cosine": F.cosine_similarity(got.flatten(), want.flatten(), dim=0).item(),
                            "max_abs_diff": (got - want).abs().max().item(), "max_abs_logit": want.abs().max().item(),
                            "bytes_before": report["bytes_before"], "bytes_after": report["bytes_after"]})
    return out


def run_fp8_model(device):
    """A LLaMA-7B-shaped transformers model (4 decoder layers, random init, bf16) against its copy with every Linear
    but lm_head replaced by kernelkit.quantize(model, "fp8") (e4m3 weights per channel, activations per token): logits'
    relative L2 error and cosine, and the time of a forward pass for a 512-token prefill and one-token steps at batch 1
    and 16: eager (eager_time: what a user's un-compiled model pays, host included; median of 20 after warm-up) and
    replayed as a CUDA graph (the GPU's own time, what a serving loop that captures its steps pays)."""
    import copy

    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=4, num_attention_heads=32,
                                   num_key_value_heads=32, vocab_size=32000, max_position_embeddings=1024)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=torch.bfloat16).eval()
    fp8 = copy.deepcopy(model)
    report = kernelkit.quantize(fp8, "fp8")
    rows, acc = [], []

    for name, b, t in (("prefill", 1, 512), ("decode step", 1, 1), ("decode step", 16, 1)):
        ids = torch.randint(0, cfg.vocab_size, (b, t), device=device)
        with torch.no_grad():
            want, got = model(ids, use_cache=False).logits.double(), fp8(ids, use_cache=False).logits.double()
        acc.append({"model": f"Llama-7B shape x4 layers bf16, {name} b{b} s{t}", "weights": "fp8 (e4m3, per channel "
                    "x per token)", "cosine": F.cosine_similarity(got.flatten(), want.flatten(), dim=0).item(),
                    "rel_err": ((got - want).norm() / want.norm()).item(),
                    "max_abs_diff": (got - want).abs().max().item(), "max_abs_logit": want.abs().max().item(),
                    "bytes_before": report["bytes_before"], "bytes_after": report["bytes_after"]})
        impls = {}
        with torch.no_grad():
            for label, m in (("kernelkit fp8", fp8), ("bf16 (PyTorch)", model)):
                impls[label] = eager_time(lambda m=m: m(ids, use_cache=False), 20,
                                          impls.get("kernelkit fp8", {}).get("gpu_us"), lambda us: b * t / us * 1e6,
                                          "tok/s")
        if "gpu_us" in impls["kernelkit fp8"]:
            impls["kernelkit fp8"]["time_over_kernelkit"] = 1.0
        rows.append({"op": "Llama-7B shape x4 layers, eager forward", "shape": f"{name} b{b} s{t}", "l2": "cold",
                     "impls": impls, "unit": "tok/s"})
        with torch.no_grad():
            graphed = time_all({"kernelkit fp8": lambda: fp8(ids, use_cache=False),
                                "bf16 (PyTorch)": lambda: model(ids, use_cache=False)}, 20,
                               lambda us: b * t / us * 1e6, "tok/s")
        rows.append({"op": "Llama-7B shape x4 layers, CUDA graph", "shape": f"{name} b{b} s{t}", "l2": "cold", **graphed})
    del model, fp8
    torch.cuda.empty_cache()
    return rows, acc


def run_host_latency(dtype, runs, device):
    """Host time of one eager call from Python (the cost a small-batch decode pays per op): each implementation called
    back to back `runs` x 20 times, then one synchronize; median per call over 5 repeats. The row's "µs" is host time,
    not GPU time; kernelkit is called as a user's model calls it (kernelkit.rms_norm: its eager fast path, which calls
    the registered op through the dispatcher's typed entry), and its registered op through torch.ops beside it."""
    rows = []
    for shape in ([1, 4096], [16, 4096]):
        x = torch.randn(*shape, device=device, dtype=dtype)
        w = torch.rand(shape[-1], device=device, dtype=dtype) + 0.5
        want = F.rms_norm(x.float(), (shape[-1],), w.float(), 1e-6)
        check(f"host rms_norm {shape}", kernelkit.rms_norm(x, w, 1e-6).float(), want, 2e-2)
        y, op = torch.empty_like(x), torch.ops.kernelkit.rms_norm.default
        # Where kernelkit's time goes: its registered op through torch.ops (output given: no wrapper, no allocation),
        # and an allocation.
        path = "fast path" if kernelkit._common._fast else "torch.ops: this build has no fast path"
        impls = {f"kernelkit.rms_norm ({path})": lambda: kernelkit.rms_norm(x, w, 1e-6),
                 "torch.ops.kernelkit.rms_norm (out given)": lambda: op(y, x, w, 1e-6, 0.0),
                 "torch.empty_like": lambda: torch.empty_like(x),
                 "F.rms_norm (eager)": lambda: F.rms_norm(x, (shape[-1],), w, 1e-6),
                 "torch.add (eager)": lambda: torch.add(x, x)}
        out = {}
        for name, fn in impls.items():
            calls = max(runs, 50) * 20
            per_call = []
            for _ in range(5):
                fn()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                torch.cuda.synchronize()
                per_call.append((time.perf_counter() - t0) * 1e6 / calls)
            us = statistics.median(per_call)
            out[name] = {"gpu_us": us, "calls/ms": 1e3 / us}
        for r in out.values():
            r["time_over_kernelkit"] = r["gpu_us"] / out[f"kernelkit.rms_norm ({path})"]["gpu_us"]
        rows.append({"op": "host latency (eager call)", "shape": f"{shape} {str(dtype).removeprefix('torch.')}",
                     "impls": out, "unit": "calls/ms"})
    return rows


# FP8 linear shapes (m, n, k): the square and Llama-3-8B MLP GEMMs, and m 1 / 16 / 128 / 1024 at Llama-3-8B's
# projections (qkv 6144 x 4096, o 4096 x 4096, gate_up 28672 x 4096, down 4096 x 14336).
FP8_SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 14336, 4096), (1, 14336, 4096)] + [
    (m, n, k) for m in (1, 16, 128, 1024) for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336))]


def run_fp8(dtype, runs, device):
    """linear_fp8 (cuBLASLt FP8) vs torch._scaled_mm with the same scaling (per tensor; row-wise = per token x per
    channel) and F.linear in the activation dtype, on the same e4m3 inputs; rate in TFLOP/s (2 m n k)."""
    rows = []
    shapes = [(4096, 4096, 4096), (2048, 14336, 4096), (1, 14336, 4096), (16, 6144, 4096)] if args.quick \
        else FP8_SHAPES
    for m, n, k in shapes:
        w = torch.randn(n, k, device=device, dtype=dtype) * 0.02
        x = torch.randn(m, k, device=device, dtype=dtype)
        wq, sw = kernelkit.quantize_per_token(w, dtype=torch.float8_e4m3fn)
        xq, sx = kernelkit.quantize_per_token(x, dtype=torch.float8_e4m3fn)
        for scaling in ("per_tensor", "rowwise"):
            rowwise = scaling == "rowwise"
            sxs, sws = (sx, sw) if rowwise else (sx.amax().reshape(1), sw.amax().reshape(1))
            exact = (xq.double() @ wq.double().T) * sxs.double().reshape(-1, 1) * sws.double().reshape(1, -1)
            sets, cold = cold_sets((x, w, xq, sxs, wq, sws), wq.numel() + xq.numel() + m * n * 2)
            row = {"op": "linear_fp8 " + scaling, "shape": f"m{m} n{n} k{k}", "l2": "cold" if cold else "warm",
                   "buffer_sets": len(sets),
                   "max_err": check("fp8", kernelkit.linear_fp8(xq, sxs, wq, sws, out_dtype=dtype), exact, 1e-2)}

            def scaled_mm(st, rowwise=rowwise):  # torch's scale shapes: [m, 1] x [1, n], or 0-dim
                a, b = (st[3].reshape(-1, 1), st[5].reshape(1, -1)) if rowwise else (st[3].reshape(()),
                                                                                     st[5].reshape(()))
                return torch._scaled_mm(st[2], st[4].t(), scale_a=a, scale_b=b, out_dtype=dtype)
            impls = {"kernelkit fp8": [lambda st=st: kernelkit.linear_fp8(*st[2:], out_dtype=dtype) for st in sets],
                     "torch._scaled_mm": [lambda st=st: scaled_mm(st) for st in sets],
                     "F.linear " + str(dtype).split(".")[-1]: [lambda st=st: F.linear(st[0], st[1]) for st in sets]}
            for setting, calls in tuned("fp8", impls["kernelkit fp8"]):
                check("fp8 " + setting, calls[0](), exact, 1e-2)
                impls["kernelkit fp8 " + setting] = calls
            row.update(time_all(impls, runs, lambda us, m=m, n=n, k=k: 2 * m * n * k / us / 1e6, "TFLOP/s"))
            rows.append(row)
    return rows


# Block-scaled FP8 shapes (m, n, k): decode to prefill token counts at a square and an MLP-up projection.
FP8_BLOCK_SHAPES = [(m, n, 4096) for m in (1, 16, 128, 1024) for n in (4096, 14336)]


def fp8_block_quantized(x, w):
    """DeepSeek-V3's FP8 inputs as linear_fp8's block scales take them on CUDA: x per 1 x 128 slice (token-major
    scales, ld m) and w per 128 x 128 block (scale rows padded to a multiple of 4)."""
    xq, sx = kernelkit.quantize_per_token_group(x, 128, column_major_scales=True, tma_aligned=False)
    wq, sw = kernelkit.quantize_blockwise(w)
    return xq, sx, wq, sw


def fp8_block_exact(xq, sx, wq, sw):
    """The float64 product of the dequantized block-scaled inputs."""
    k = xq.shape[1]
    xd = xq.double() * sx.double().repeat_interleave(128, 1)[:, :k]
    wd = wq.double() * sw.double().repeat_interleave(128, 0)[:wq.shape[0]].repeat_interleave(128, 1)[:, :k]
    return xd @ wd.T


def run_fp8_blockwise(dtype, runs, device):
    """linear_fp8 with block scales (cuBLASLt's 1 x 128 x 128 x 128 FP8 matmul, Hopper) vs torch._scaled_mm's
    DeepSeek-style mode on the same codes and scales (an error row where torch refuses it) and vs kernelkit's
    per-token x per-channel linear_fp8 of the same x and w; rate in TFLOP/s (2 m n k)."""
    rows = []
    shapes = [(1, 4096, 4096), (128, 14336, 4096)] if args.quick else FP8_BLOCK_SHAPES
    for m, n, k in shapes:
        w = torch.randn(n, k, device=device, dtype=dtype) * 0.02
        x = torch.randn(m, k, device=device, dtype=dtype)
        xq, sx, wq, sw = fp8_block_quantized(x, w)
        xr, sxr = kernelkit.quantize_per_token(x, dtype=torch.float8_e4m3fn)
        wr, swr = kernelkit.quantize_per_token(w, dtype=torch.float8_e4m3fn)
        sets, cold = cold_sets((xq, sx, wq, sw, xr, sxr, wr, swr), wq.numel() + xq.numel() + m * n * 2)
        row = {"op": "linear_fp8 blockwise", "shape": f"m{m} n{n} k{k}", "l2": "cold" if cold else "warm",
               "buffer_sets": len(sets),
               "max_err": check("fp8 blockwise", kernelkit.linear_fp8(xq, sx, wq, sw, out_dtype=dtype),
                                fp8_block_exact(xq, sx, wq, sw), 1e-2)}
        def scaled_mm(st):  # torch's block scales: a [m, k / 128] token-major, b's [k / 128, n / 128] transposed
            return torch._scaled_mm(st[0], st[2].t(), scale_a=st[1], scale_b=st[3].t(), out_dtype=dtype)
        impls = {"kernelkit fp8 blockwise": [lambda st=st: kernelkit.linear_fp8(*st[:4], out_dtype=dtype)
                                             for st in sets],
                 "torch._scaled_mm blockwise": [lambda st=st: scaled_mm(st) for st in sets],
                 "kernelkit fp8 rowwise": [lambda st=st: kernelkit.linear_fp8(*st[4:], out_dtype=dtype)
                                           for st in sets]}
        row.update(time_all(impls, runs, lambda us, m=m, n=n, k=k: 2 * m * n * k / us / 1e6, "TFLOP/s"))
        rows.append(row)
    return rows


def torch_quantize_per_token(y, qdtype):
    """Per-token quantization as kernelkit's: s = max|y| / qmax, q = y / s rounded (e4m3: saturating; int8: half to
    even)."""
    qmax = 448.0 if qdtype == torch.float8_e4m3fn else 127.0
    s = y.abs().amax(-1, keepdim=True).float() / qmax
    quotient = y.float() / s.clamp_min(1e-30)
    q = quotient.clamp(-qmax, qmax).to(qdtype) if qdtype == torch.float8_e4m3fn else \
        quotient.round().clamp(-qmax, qmax).to(qdtype)
    return q, s.squeeze(-1)


def torch_norm_quant(x, res, w, eps, qdtype):
    """HF Llama RMSNorm (fp32 math, w * y.to(dtype)), after res = x + res when res is given, then per-token
    quantization. With res, the sum is returned too: the next layer's residual, which the fused op stores (without it
    torch.compile would skip that write and move 2 of the 7 bytes an element fewer)."""
    if res is not None:
        x = x + res
    v = x.float()
    q = torch_quantize_per_token(w * (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype), qdtype)
    return q if res is None else (*q, x)


def torch_silu_quant(x, qdtype):
    """SwiGLU as HF Llama's MLP computes it (F.silu(gate) * up), then per-token quantization."""
    gate, up = x.chunk(2, dim=-1)
    return torch_quantize_per_token(F.silu(gate) * up, qdtype)


def kk_norm_then_quantize(x, res, w, eps, qdtype):
    """kernelkit's unfused pair: the norm (fused_add_rms_norm writes x and res in place), then quantize_per_token."""
    y = kernelkit.rms_norm(x, w, eps) if res is None else kernelkit.fused_add_rms_norm(x, res, w, eps)[0]
    return kernelkit.quantize_per_token(y, dtype=qdtype)


def kk_norm_quant(x, res, w, eps, qdtype):
    if res is None:
        return kernelkit.rms_norm_quant(x, w, eps, dtype=qdtype)
    return kernelkit.fused_add_rms_norm_quant(x, res, w, eps, dtype=qdtype)


NORM_QUANT_SHAPES = [(16, 4096), (2048, 4096), (16384, 4096), (65536, 4096), (16384, 8192)]


def run_norm_quant(dtype, runs, device, peak_gbps):
    """The norm ahead of an FP8 (or INT8) projection: the fused op against kernelkit's two ops and the PyTorch
    formula, eager and torch.compile (inductor). Checked first: the fused codes and scales equal the two ops' bit for
    bit, and q * s is the float64 norm within half an e4m3 step (1/16 of |y|) or an int8 step of s."""
    rows = []
    eps = 1e-6
    shapes = [(2048, 4096), (65536, 4096)] if args.quick else NORM_QUANT_SHAPES
    compiled = torch.compile(torch_norm_quant)
    for m, h in shapes:
        for fused in (False, True):
            for qdtype in (torch.float8_e4m3fn, torch.int8):
                if qdtype == torch.int8 and (m, h) != (16384, 4096):
                    continue
                x = torch.randn(m, h, device=device, dtype=dtype)
                res = torch.randn(m, h, device=device, dtype=dtype) if fused else None
                w = torch.rand(h, device=device, dtype=dtype) + 0.5
                # Check on copies (the fused add updates the residual in place).
                r1, r2 = (res.clone(), res.clone()) if fused else (None, None)
                q, sc = kk_norm_quant(x, r1, w, eps, qdtype)
                q2, sc2 = kk_norm_then_quantize(x.clone(), r2, w, eps, qdtype)
                bits = (lambda t: t.view(torch.uint8)) if qdtype == torch.float8_e4m3fn else (lambda t: t)
                if not (torch.equal(bits(q), bits(q2)) and torch.equal(sc, sc2)):
                    raise AssertionError(f"norm_quant m{m} h{h}: fused differs from rms_norm + quantize_per_token")
                base = (x.double() + res.double()) if fused else x.double()
                y_ref = w.double() * base * torch.rsqrt(base.pow(2).mean(-1, keepdim=True) + eps)
                tol = 1 / 16 + 2.0 ** -7 if qdtype == torch.float8_e4m3fn else 1 / 127 + 2.0 ** -7
                err = check("norm_quant", q.double() * sc.double()[:, None], y_ref, tol)
                e = x.element_size()
                moved = m * h * e * (3 if fused else 1) + m * h + 4 * m  # x (res read, written), q, scales
                tensors = (x, res) if fused else (x,)
                sets, cold = cold_sets(tensors, moved)
                unpack = (lambda st: (st[0], st[1])) if fused else (lambda st: (st[0], None))
                what = ("fused_add_rms_norm_quant " if fused else "rms_norm_quant ") + \
                    ("fp8" if qdtype == torch.float8_e4m3fn else "int8")
                row = {"op": what, "shape": f"m{m} h{h}", "l2": "cold" if cold else "warm",
                       "buffer_sets": len(sets), "max_err": err}
                impls = {"kernelkit fused": [lambda st=st: kk_norm_quant(*unpack(st), w, eps, qdtype) for st in sets],
                         "kernelkit norm + quantize_per_token": [
                             lambda st=st: kk_norm_then_quantize(*unpack(st), w, eps, qdtype) for st in sets],
                         "PyTorch eager": [lambda st=st: torch_norm_quant(*unpack(st), w, eps, qdtype) for st in sets],
                         "torch.compile": [lambda st=st: compiled(*unpack(st), w, eps, qdtype) for st in sets]}
                for setting, calls in tuned("normquant", impls["kernelkit fused"]):
                    # (on a copy of the residual, which the fused add updates in place)
                    qt, sct = with_tune(setting, lambda: kk_norm_quant(x, res.clone() if fused else None, w, eps,
                                                                       qdtype))()
                    if setting == "rows_onepass=1":  # (x w) rstd: rounded in another order than rms_norm's
                        check("norm_quant " + setting, qt.double() * sct.double()[:, None], y_ref, tol)
                    elif not (torch.equal(bits(qt), bits(q2)) and torch.equal(sct, sc2)):
                        raise AssertionError(f"norm_quant m{m} h{h} {setting}: differs from the default plan")
                    impls["kernelkit fused " + setting] = calls
                rows.append(timed_bandwidth(row, impls, runs, moved, peak_gbps))
    return rows


# SwiGLU's [tokens, 2 x intermediate]: LLaMA-3-8B / Mistral-7B (14336), LLaMA-3-70B (28672).
ACT_QUANT_SHAPES = [(16, 14336), (2048, 14336), (16384, 14336), (8192, 28672)]


def run_act_quant(dtype, runs, device, peak_gbps):
    """The MLP's SwiGLU ahead of an FP8 (or INT8) down projection: silu_and_mul_quant against kernelkit's
    silu_and_mul then quantize_per_token and the PyTorch formula, eager and torch.compile (inductor). Checked first:
    the fused codes and scales equal the two ops' bit for bit, and q * s is the float64 silu(a) b within half an e4m3
    step (1/16 of |y|) or an int8 step of s."""
    rows = []
    shapes = [(2048, 14336), (16384, 14336)] if args.quick else ACT_QUANT_SHAPES
    compiled = torch.compile(torch_silu_quant)
    for m, d in shapes:
        for qdtype in (torch.float8_e4m3fn, torch.int8):
            if qdtype == torch.int8 and (m, d) != (16384, 14336):
                continue
            x = torch.randn(m, 2 * d, device=device, dtype=dtype)
            q, sc = kernelkit.silu_and_mul_quant(x, dtype=qdtype)
            q2, sc2 = kernelkit.quantize_per_token(kernelkit.silu_and_mul(x), dtype=qdtype)
            bits = (lambda t: t.view(torch.uint8)) if qdtype == torch.float8_e4m3fn else (lambda t: t)
            if not (torch.equal(bits(q), bits(q2)) and torch.equal(sc, sc2)):
                raise AssertionError(f"silu_and_mul_quant m{m} d{d}: fused differs from silu_and_mul + quantize")
            xd = x.double()
            y_ref = F.silu(xd[:, :d]) * xd[:, d:]
            tol = 1 / 16 + 2.0 ** -7 if qdtype == torch.float8_e4m3fn else 1 / 127 + 2.0 ** -7
            err = check("silu_and_mul_quant", q.double() * sc.double()[:, None], y_ref, tol)
            del xd, y_ref
            moved = m * 2 * d * x.element_size() + m * d + 4 * m  # x, q, scales
            sets, cold = cold_sets((x,), moved)
            row = {"op": "silu_and_mul_quant " + ("fp8" if qdtype == torch.float8_e4m3fn else "int8"),
                   "shape": f"m{m} d{d}", "l2": "cold" if cold else "warm", "buffer_sets": len(sets), "max_err": err}
            impls = {"kernelkit fused": [lambda st=st: kernelkit.silu_and_mul_quant(st[0], dtype=qdtype)
                                         for st in sets],
                     "kernelkit silu_and_mul + quantize_per_token": [
                         lambda st=st: kernelkit.quantize_per_token(kernelkit.silu_and_mul(st[0]), dtype=qdtype)
                         for st in sets],
                     "PyTorch eager": [lambda st=st: torch_silu_quant(st[0], qdtype) for st in sets],
                     "torch.compile": [lambda st=st: compiled(st[0], qdtype) for st in sets]}
            rows.append(timed_bandwidth(row, impls, runs, moved, peak_gbps))
    return rows


def timed_bandwidth(row, impls, runs, moved, peak_gbps):
    """row with its implementations timed: GB/s of the `moved` bytes and % of the copy ceiling."""
    row.update(time_all(impls, runs, lambda us: moved / us / 1e3, "GB/s"))
    for r in row["impls"].values():
        if "GB/s" in r:
            r["% of copy"] = 100.0 * r["GB/s"] / peak_gbps
    return row


def time_all(impls, runs, rate, unit):
    """GPU time of each implementation (CUDA graph), its rate and its ratio to kernelkit's (>1: kernelkit faster)."""
    out = {}
    for name, fn in impls.items():
        try:
            r = tb.time_calls(fn if isinstance(fn, list) else [fn], runs, host=False)
            if rate:
                r[unit] = rate(r["gpu_us"])
        except Exception as err:  # e.g. a backend that does not support the shape
            r = {"error": f"{type(err).__name__}: {err}"[:300]}
        out[name] = r
    base = next((v["gpu_us"] for k, v in out.items() if k.startswith("kernelkit") and "gpu_us" in v), None)
    for name, r in out.items():
        if base and "gpu_us" in r:
            r["time_over_kernelkit"] = r["gpu_us"] / base
    return {"impls": out, "unit": unit}


def markdown(results):
    lines = [f"# kernelkit op baselines: {results['meta']['gpu']}, {results['meta']['date']}, commit "
             f"{results['meta']['commit']}", "",
             f"Copy ceiling in the same run: {results['meta']['copy_gbps']:.0f} GB/s. GPU time = median of CUDA-graph "
             "replays; every kernelkit output checked first. ratio = time / kernelkit's (> 1: kernelkit faster). "
             "Decode and linear rows cycle through copies of their inputs that together exceed 2x L2 (cold L2, "
             "every implementation alike) unless marked L2-warm.", "",
             "| op | shape | implementation | µs | rate | ratio |", "|---|---|---|---:|---:|---:|"]
    for row in results["rows"]:
        unit = row.get("unit")
        shape = row["shape"] + (" (L2-warm)" if row.get("l2") == "warm" else "")
        for name, r in row["impls"].items():
            if "gpu_us" not in r:
                lines.append(f"| {row['op']} | {shape} | {name} | {r.get('error', '?')} | | |")
                continue
            rate = f"{r[unit]:.1f} {unit}" if unit else f"{r['weight_GBps']:.0f} GB/s ({r['pct_copy']:.0f}% copy)"
            if unit and "% of copy" in r:
                rate += f" ({r['% of copy']:.0f}% copy)"
            lines.append(f"| {row['op']} | {shape} | {name} | {r['gpu_us']:.1f} | {rate} | "
                         f"{r.get('time_over_kernelkit', float('nan')):.2f} |")
    e4m3 = [r for r in results["rows"] if "max_diff_vs_16bit_cache" in r]
    if e4m3:
        lines += ["", "e4m3 KV cache accuracy (max |difference| of the outputs; q, k, v standard normal): against "
                  "float32 attention over the dequantized cache / against kernelkit over the 16-bit cache it was "
                  "quantized from:", ""]
        lines += [f"- {r['shape']}: {r['max_err']:.2g} / {r['max_diff_vs_16bit_cache']:.2g}" for r in e4m3]
    acc = results.get("accuracy") or []
    if acc:
        lines += ["", "Quantized Llama logits vs the unquantized model (random init):", "",
                  "| model | weights | cosine | rel. L2 error | max abs diff | max abs logit | bytes before -> after |",
                  "|---|---|---:|---:|---:|---:|---|"]
        lines += [f"| {a['model']} | {a['weights']} | {a['cosine']:.5f} | {a.get('rel_err', float('nan')):.4f} | "
                  f"{a['max_abs_diff']:.4f} | "
                  f"{a['max_abs_logit']:.3f} | {a['bytes_before'] / 1e6:.1f} MB -> {a['bytes_after'] / 1e6:.1f} MB |"
                  for a in acc]
    return "\n".join(lines) + "\n"


def check_cpu():
    """No GPU: the reference formulas and the kernelkit CPU ops agree on small shapes (the script's own wiring)."""
    torch.manual_seed(0)
    for causal in (False, True):
        q, k, v = (torch.randn(1, 9, 4, 64, dtype=torch.float16) for _ in range(3))
        check("attention", kernelkit.attention(q, k, v, causal=causal), sdpa(q.float(), k.float(), v.float(), causal),
              2e-2)
        attention_checked("attention rows", kernelkit.attention(q, k, v, causal=causal), q, k, v, causal)
    cu = torch.tensor([0, 3, 9], dtype=torch.int32)
    q, k, v = (torch.randn(9, 4, 64, dtype=torch.float16) for _ in range(3))
    want = torch.cat([sdpa(q[None, a:b].float(), k[None, a:b].float(), v[None, a:b].float(), True)[0]
                      for a, b in ((0, 3), (3, 9))])
    check("attention varlen", kernelkit.attention(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                                  max_seqlen_q=6, max_seqlen_k=6), want, 2e-2)
    q, k, v = (torch.randn(1, 40, 4, 64, dtype=torch.float16) for _ in range(3))
    q40, k40, v40 = (t[..., :40].contiguous() for t in (q, k, v))
    check("attention head_dim 40", kernelkit.attention(q40, k40, v40, causal=True)[:, 30:],
          masked_ref(q40, k40, v40, slice(30, 40), True), 2e-2)
    for window, softcap in ((5, 0.0), (-1, 2.0), (7, 3.0)):
        got = kernelkit.attention(q, k, v, causal=True, window_left=window, softcap=softcap)
        check("attention masked", got[:, 30:], masked_ref(q, k, v, slice(30, 40), True, window, softcap), 2e-2)
    layers, deq = checkpoint_layers(16, 256, "cpu", seed=0)
    x = torch.randn(3, 256, dtype=torch.float16)
    for name, layer in layers.items():
        check(name, layer(x), x.float() @ deq[name].T, 1e-2)
    k_cache, v_cache = (torch.randn(4, 16, 2, 64, dtype=torch.float16) for _ in range(2))
    k, v, q = torch.randn(9, 2, 64, dtype=torch.float16), torch.randn(9, 2, 64, dtype=torch.float16), torch.randn(
        9, 8, 64, dtype=torch.float16)
    slots, positions = torch.randperm(64)[:9], torch.randint(0, 32, (9,))
    angles = torch.arange(32, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, 64, 2) / 64)
    cos_sin = torch.cat([angles.cos(), angles.sin()], dim=-1).float()
    q_out = kernelkit.write_kv_cache(k_cache, v_cache, k, v, slots, q=q.clone(), positions=positions,
                                     cos_sin_cache=cos_sin)
    check("write_kv_cache k", k_cache.view(-1, 2, 64)[slots], rope_torch(k, positions, cos_sin), 2e-2)
    check("write_kv_cache q", q_out, rope_torch(q, positions, cos_sin), 2e-2)
    q, kc = torch.randn(2, 1, 8, 64, dtype=torch.float16), torch.randn(2, 33, 2, 64, dtype=torch.float16)
    check("decode", kernelkit.decode_attention(q, kc, kc), sdpa(q.float(), kc.float(), kc.float(), False), 2e-2)
    assert visible_pairs(4, 4, True) == 10 and visible_pairs(2, 4, True) == 7 and visible_pairs(3, 5, False) == 15
    w = torch.randn(48, 256) * 0.02
    x = torch.randn(3, 256, dtype=torch.float16)
    q8, s8 = kernelkit.quantize_weight(w, 8)
    check("w8a16", kernelkit.linear_weight_only(x, q8, s8, 8), x.float() @ (q8.float() * s8[:, None]).T, 1e-2)
    xq, sx = kernelkit.quantize_per_token(x)
    check("w8a8", kernelkit.linear_w8a8(xq, sx, q8, s8), (xq.double() @ q8.double().T) * sx.double()[:, None] *
          s8.double(), 1e-2)
    xq, sx, wq, sw = fp8_block_quantized(torch.randn(3, 384, dtype=torch.bfloat16), torch.randn(136, 384) * 0.02)
    check("fp8 blockwise", kernelkit.linear_fp8(xq, sx, wq, sw), fp8_block_exact(xq, sx, wq, sw), 1e-2)
    x, res, w = torch.randn(5, 256, dtype=torch.bfloat16), torch.randn(5, 256, dtype=torch.bfloat16), torch.rand(
        256, dtype=torch.bfloat16) + 0.5
    for qdtype in (torch.float8_e4m3fn, torch.int8):
        for r in (None, res):
            q, sc = kk_norm_quant(x.clone(), None if r is None else r.clone(), w, 1e-6, qdtype)
            qt, st = torch_norm_quant(x, r, w, 1e-6, qdtype)[:2]
            check("norm_quant vs torch", q.float() * sc[:, None], qt.float() * st[:, None], 1 / 8)
    gate_up = torch.randn(5, 512, dtype=torch.bfloat16)
    for qdtype in (torch.float8_e4m3fn, torch.int8):
        q, sc = kernelkit.silu_and_mul_quant(gate_up, dtype=qdtype)
        qt, st = torch_silu_quant(gate_up, qdtype)
        check("silu_and_mul_quant vs torch", q.float() * sc[:, None], qt.float() * st[:, None], 1 / 8)
    before = os.environ.get("KERNELKIT_TUNE")  # the alternatives' wrapper sets the variable for the call only
    args.tuned = True
    per_set = tuned("decode", [lambda: os.environ.get("KERNELKIT_TUNE")] * 2)
    assert [[c() for c in calls] for _, calls in per_set] == [[s, s] for s in TUNED["decode"]]
    assert os.environ.get("KERNELKIT_TUNE") == before
    print("op_baselines: CPU check ok")
    return 0


def main(argv=None):
    global args
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only",
                   default="attention,varlen,masks,headdims,decode,decodefp8,pages,kvwrite,linear,checkpoints,w8a8,fp8,normquant,"
                           "actquant,accuracy,fp8model,host")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tuned", action="store_true",
                   help="also time the planner's alternatives (KERNELKIT_TUNE): " + ", ".join(sum(TUNED.values(), [])))
    p.add_argument("--tunes", default="",
                   help="';'-separated KERNELKIT_TUNE settings timed instead of every op's TUNED list (implies --tuned)")
    p.add_argument("--shapes", default="",
                   help="attention, decode, decodefp8: only the shapes this regular expression finds in their label")
    p.add_argument("--out")
    p.add_argument("--commit", default="")
    p.add_argument("--check-cpu", action="store_true")
    args = p.parse_args(argv)
    args.tuned = args.tuned or bool(args.tunes)
    if args.check_cpu:
        return check_cpu()
    if not torch.cuda.is_available():
        print("op_baselines: needs a CUDA device (or --check-cpu)", file=sys.stderr)
        return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    torch.manual_seed(0)
    peak = tb.copy_peak()["gbps"]
    rows = []
    only = args.only.split(",")
    if "attention" in only:
        rows += run_attention(dtype, args.runs, "cuda")
    if "varlen" in only:
        rows += run_varlen(dtype, args.runs, "cuda")
    if "masks" in only:
        rows += run_masks(dtype, args.runs, "cuda")
    if "headdims" in only:
        rows += run_head_dims(dtype, args.runs, "cuda")
    if "decode" in only:
        rows += run_decode(dtype, args.runs, "cuda")
    if "decodefp8" in only:
        rows += run_decode_fp8(dtype, args.runs, "cuda")
    if "pages" in only:
        rows += run_decode_pages(dtype, args.runs, "cuda")
    if "kvwrite" in only:
        rows += run_kv_write(dtype, args.runs, "cuda", peak)
    if "linear" in only:
        rows += run_linear(dtype, args.runs, "cuda", peak)
    if "checkpoints" in only:
        rows += run_checkpoints(dtype, args.runs, "cuda", peak)
    if "w8a8" in only:
        rows += run_w8a8(dtype, args.runs, "cuda")
    if "fp8" in only:
        rows += run_fp8(dtype, args.runs, "cuda")
        rows += run_fp8_blockwise(dtype, args.runs, "cuda")
    if "normquant" in only:
        rows += run_norm_quant(dtype, args.runs, "cuda", peak)
    if "actquant" in only:
        rows += run_act_quant(dtype, args.runs, "cuda", peak)
    if "host" in only:
        rows += run_host_latency(dtype, args.runs, "cuda")
    accuracy = run_quant_accuracy("cuda") if "accuracy" in only else []
    if "fp8model" in only:
        try:  # needs transformers: the other sections' results stand without it
            model_rows, model_acc = run_fp8_model("cuda")
            rows += model_rows
            accuracy += model_acc
        except ImportError as err:
            print(f"op_baselines: fp8model skipped: {err}", file=sys.stderr)
    results = {"meta": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "commit": args.commit,
                        "dtype": args.dtype, "copy_gbps": peak,
                        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
               "rows": rows, "accuracy": accuracy}
    md = markdown(results)
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "op_baselines.json").write_text(json.dumps(results, indent=2))
        (out / "op_baselines.md").write_text(md)
        from compare_chart import write_chart  # ratio bars per op and shape (kernelkit vs each baseline)
        write_chart([results], out / "op_baselines.svg")
    for failure in CHECK_FAILURES:
        print("CHECK FAILED:", failure, file=sys.stderr)
    return 1 if CHECK_FAILURES else 0


args = None
CHECK_FAILURES = []  # tuned alternatives whose output failed its check (the rows say so; the exit status too)
if __name__ == "__main__":
    sys.exit(main())
