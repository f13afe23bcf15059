"""Quantization (src/ops/quant/): weight quantizers, per-token INT8 / FP8 activations, FP8 / INT8 quantizers per tensor,
per token group and per 128 x 128 block, the weight-only (W8A16 / W4A16) W8A8 and FP8 linear layers."""
from __future__ import annotations

from typing import Optional

import torch

from ._common import _dims, _eager_ops, _inference_only, _rows
from ._ops import ops

__all__ = ["quantize_weight", "linear_weight_only", "quantize_per_token", "quantize_per_tensor",
           "quantize_per_token_group", "quantize_blockwise", "linear_w8a8", "linear_fp8"]
# The torch.ops.kernelkit ops these functions call (fake implementations are registered for them).
_OPS = ("quantize_weight", "linear_weight_only", "quantize_per_token", "quantize_per_token_fp8",
        "quantize_per_tensor", "quantize_per_token_group", "quantize_blockwise", "linear_w8a8", "linear_fp8")

# The 128 x 128 weight blocks of quantize_blockwise (kQuantBlockSize in include/kernelkit/ops/quant.hpp).
_BLOCK = 128


def _block_scales_ld(k: int) -> int:
    """The row stride of 128 x 128 weight scales as cuBLASLt reads them (fp8_block_scales_ld in
    include/kernelkit/ops/quant.hpp): ceil(k / 128) rounded up to a multiple of 4."""
    return (-(-k // _BLOCK) + 3) // 4 * 4


def _code_dtype(name: str, dtype: torch.dtype) -> None:
    if dtype not in (torch.int8, torch.float8_e4m3fn):
        raise ValueError(f"{name}: dtype must be torch.float8_e4m3fn or torch.int8, got {dtype}")


def quantize_weight(w: torch.Tensor, bits: int = 8, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric weight quantization of w [n, k] (an nn.Linear weight) for `linear_weight_only`.

    bits=8: per output channel, returns (int8 [n, k], float32 scales [n]). bits=4: group-wise (group 64 or 128),
    returns (uint8 [n, k / 2] in kernelkit's INT4 layout, float32 scales [n, k / group]); n % 16 == 0 and k % 64 == 0
    (the layout's 16-row x 64-input tiles, described in kernelkit.formats and include/kernelkit/ops/quant.hpp).
    w = q * s.
    """
    _inference_only("quantize_weight", w)
    _dims("quantize_weight", "w", w, (2,), "[n, k] (an nn.Linear weight)")
    n, k = w.shape
    if bits == 4 and group <= 0:
        raise ValueError(f"quantize_weight: group must be 64 or 128 for bits=4, got {group}")
    if bits == 8:
        q = torch.empty((n, k), dtype=torch.int8, device=w.device)
        s = torch.empty((n,), dtype=torch.float32, device=w.device)
    elif bits == 4:
        q = torch.empty((n, k // 2), dtype=torch.uint8, device=w.device)
        s = torch.empty((n, k // group if group > 0 else 0), dtype=torch.float32, device=w.device)
    else:
        raise ValueError(f"quantize_weight: bits must be 8 or 4, got {bits}")
    ops.quantize_weight(q, s, w, bits, group if bits == 4 else 0)
    return q, s


def linear_weight_only(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, bits: int, group: int = 0,
                       bias: Optional[torch.Tensor] = None, zeros: Optional[torch.Tensor] = None,
                       perm: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = x @ dequant(qweight)^T (+ bias) with fp32 accumulation: W8A16 (bits=8) or W4A16 (bits=4).

    x [..., k] float16 / bfloat16. bits=8: qweight int8 [n, k] with scales float32 [n] (per output channel; group is
    then not used) or [n, k / group] (group 32, 64 or 128). bits=4: qweight uint8 [n, k / 2] in kernelkit's INT4
    layout (n % 16 == 0, k % 64 == 0; kernelkit.formats) with scales [n, k / group] (group 32, 64 or 128):
    `quantize_weight`'s output, `kernelkit.formats.pack_int4`'s, or a checkpoint's repacked (`kernelkit.nn`).
    zeros: optional int8 [n, k / group] zero points of asymmetric weights, w = scales * (q - zeros) with q the signed
    stored value (a checkpoint's unsigned zero z is z - 8 for 4 bits, z - 128 for 8 bits); subtracted exactly in the
    kernels. perm: optional int32 / int64 [k], the weights' k order as inputs of x (act-order checkpoints): the
    layer computes x[..., perm] @ dequant(qweight)^T, the gather inside the op (on sm_90 overlapped with the GEMV's
    first weight loads); entries outside [0, k) are an error (raised on the CPU, recorded on CUDA for
    `kernelkit.check_errors`). On CUDA: a GEMV for 1-2 tokens, tensor cores from 3 on (any count).
    """
    _inference_only("linear_weight_only", x, bias)
    _dims("linear_weight_only", "x", x, 1, "[..., k]")
    _dims("linear_weight_only", "qweight", qweight, (2,), "[n, k] (int8) or [n, k / 2] (packed int4)")
    lead = x.shape[:-1]
    x2 = _rows(x.reshape(-1, x.shape[-1]))
    out = torch.empty((x2.shape[0], qweight.shape[0]), dtype=x.dtype, device=x.device)
    if bits == 8 and scales.dim() == 1:
        group = 0  # one scale per output channel: the group (a quantize_weight default) does not apply
    _eager_ops().linear_weight_only(out, x2, qweight, scales, bits, group, bias, zeros, perm)
    return out.reshape(*lead, qweight.shape[0])


def quantize_per_token(x: torch.Tensor, dtype: torch.dtype = torch.int8) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token activations for x [m, k]; returns (q [m, k] of `dtype`, float32 scales [m]), x = q * s[:, None]
    up to half a step.

    dtype=torch.int8: s[t] = max|x[t, :]| / 127, q = round(x / s) (half to even); the activation side of `linear_w8a8`.
    dtype=torch.float8_e4m3fn: s[t] = max|x[t, :]| / 448, q = x / s rounded to e4m3 (nearest even, saturating), as
    vLLM's dynamic per-token FP8 quantization; CUDA needs an FP8 GPU (sm_89+). An all-zero row gives s = 0 and q = 0.
    """
    _inference_only("quantize_per_token", x)
    _dims("quantize_per_token", "x", x, (2,), "[m, k]")
    if dtype not in (torch.int8, torch.float8_e4m3fn):
        raise ValueError(f"quantize_per_token: dtype must be torch.int8 or torch.float8_e4m3fn, got {dtype}")
    x2 = _rows(x)
    q = torch.empty(x2.shape, dtype=dtype, device=x.device)
    s = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
    (ops.quantize_per_token if dtype == torch.int8 else ops.quantize_per_token_fp8)(q, s, x2)
    return q, s


def quantize_per_tensor(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn,
                        scale: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One scale for the whole of x [..., k]; returns (q in x's shape, float32 scale [1]), x ~ q * s.

    dtype=torch.float8_e4m3fn: q = x / s rounded to e4m3 (nearest even, saturating at 448); torch.int8: rounded half
    to even, clamped to 127. scale None: dynamic, s = max|x| / 448 (or 127) over every element (vLLM's
    dynamic_scaled_fp8_quant; an all-zero or empty x gives s = 0 and q = 0); on CUDA without a host synchronization, so
    it can be captured in a CUDA graph. scale: a float32 [1] static scale (calibrated, finite and > 0; vLLM's
    static_scaled_fp8_quant / static_scaled_int8_quant), returned as it is. FP8 on CUDA needs an FP8 GPU (sm_89+).
    """
    _inference_only("quantize_per_tensor", x)
    _dims("quantize_per_tensor", "x", x, 1, "[..., k]")
    _code_dtype("quantize_per_tensor", dtype)
    q = torch.empty(x.shape, dtype=dtype, device=x.device)
    s = torch.empty(1, dtype=torch.float32, device=x.device) if scale is None else scale
    ops.quantize_per_tensor(q.view(-1, x.shape[-1]), s, _rows(x.reshape(-1, x.shape[-1])), scale is not None)
    return q, s


def quantize_per_token_group(x: torch.Tensor, group: int = 128, dtype: torch.dtype = torch.float8_e4m3fn,
                             column_major_scales: bool = False,
                             tma_aligned: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """One scale per 1 x group slice of each row of x [..., k] (DeepSeek-V3's activations, vLLM's
    per_token_group_quant_fp8); returns (q in x's shape, float32 scales [..., k / group]), s = max|x| / 448 (or 127)
    over the slice. group 64 or 128, k % group == 0; dtype torch.float8_e4m3fn or torch.int8 (rounded as
    quantize_per_tensor).

    column_major_scales=True (x [m, k]): the scales are stored M-major, a float32 [k / group, m'] buffer returned as its
    [m, k / group] transposed view (strides (1, m')): m' = m rounded up to a multiple of 4 (tma_aligned: 16-byte rows
    for TMA, as DeepGEMM reads them) or m' = m (tma_aligned=False: cuBLASLt's layout, which `linear_fp8` needs for
    block scales on CUDA; the two agree when m % 4 == 0). On CUDA, x's rows must be 16-byte aligned.
    """
    _inference_only("quantize_per_token_group", x)
    _dims("quantize_per_token_group", "x", x, (2,) if column_major_scales else 1,
          "[m, k] (column-major scales)" if column_major_scales else "[..., k]")
    _code_dtype("quantize_per_token_group", dtype)
    k = x.shape[-1]
    groups = k // group if group > 0 else 0
    x2 = _rows(x.reshape(-1, k))
    q = torch.empty(x.shape, dtype=dtype, device=x.device)
    if column_major_scales:
        m = x2.shape[0]
        st = torch.empty(groups, (m + 3) // 4 * 4 if tma_aligned else m, dtype=torch.float32, device=x.device)[:, :m]
        ops.quantize_per_token_group(q.view(-1, k), st, x2, group, True)
        return q, st.T
    s = torch.empty(x.shape[:-1] + (groups,), dtype=torch.float32, device=x.device)
    ops.quantize_per_token_group(q.view(-1, k), s.view(-1, groups), x2, group, False)
    return q, s


def quantize_blockwise(w: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """128 x 128 block quantization of a weight w [n, k] (DeepSeek-V3's FP8 weight format); returns (q [n, k], float32
    scales [ceil(n / 128), ceil(k / 128)]), s = max|w| / 448 (or 127) over each block (the edge blocks partial), w ~ q
    * s[r // 128, j // 128]. The scales are a view of a buffer whose rows are ceil(k / 128) rounded up to a multiple of
    4 floats: the layout `linear_fp8` needs for block scales on CUDA. dtype torch.float8_e4m3fn or torch.int8 (rounded
    as quantize_per_tensor). On CUDA the call waits and raises for an inf or NaN in w, as the other weight quantizers
    do.
    """
    _inference_only("quantize_blockwise", w)
    _dims("quantize_blockwise", "w", w, (2,), "[n, k] (an nn.Linear weight)")
    _code_dtype("quantize_blockwise", dtype)
    n, k = w.shape
    q = torch.empty((n, k), dtype=dtype, device=w.device)
    s = torch.empty(((n + _BLOCK - 1) // _BLOCK, _block_scales_ld(k)), dtype=torch.float32,
                    device=w.device)[:, :(k + _BLOCK - 1) // _BLOCK]
    ops.quantize_blockwise(q, s, _rows(w))
    return q, s


def linear_w8a8(xq: torch.Tensor, x_scales: torch.Tensor, qweight: torch.Tensor, w_scales: torch.Tensor,
                bias: Optional[torch.Tensor] = None, out_dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """y = (xq @ qweight^T, exact int32) * x_scales[:, None] * w_scales (+ bias), rounded once to out_dtype.

    xq int8 [m, k] and x_scales from `quantize_per_token`; qweight int8 [n, k] and w_scales from
    `quantize_weight(w, 8)`; k % 16 == 0. CUDA: INT8 tensor cores (sm_75 and later); CPU: the reference.
    """
    _dims("linear_w8a8", "xq", xq, (2,), "[m, k] (int8)")
    _dims("linear_w8a8", "qweight", qweight, (2,), "[n, k] (int8)")
    out = torch.empty((xq.shape[0], qweight.shape[0]), dtype=out_dtype, device=xq.device)
    ops.linear_w8a8(out, _rows(xq), x_scales, qweight, w_scales, bias)
    return out


def _block_scaled(m: int, n: int, x_scales: torch.Tensor, w_scales: torch.Tensor) -> bool:
    """Whether linear_fp8's scales are block scales: both 2-D, but for the row-wise [m, 1] and [1, n] and a single
    element each (per tensor; with m = 1, k = 128 and n <= 128 the block form would compute the same)."""
    if x_scales.dim() != 2 or w_scales.dim() != 2:
        return False
    rowwise = tuple(x_scales.shape) == (m, 1) and tuple(w_scales.shape) == (1, n)
    return not rowwise and not (x_scales.numel() == 1 and w_scales.numel() == 1)


def linear_fp8(xq: torch.Tensor, x_scales: torch.Tensor, qweight: torch.Tensor, w_scales: torch.Tensor,
               bias: Optional[torch.Tensor] = None, out_dtype: torch.dtype = torch.bfloat16,
               fast_accumulation: bool = False) -> torch.Tensor:
    """y = (xq @ qweight^T, fp32 sums) * x_scales * w_scales (+ bias), rounded once to out_dtype (FP8 tensor cores).

    xq float8_e4m3fn [m, k] and qweight float8_e4m3fn [n, k] (e.g. both from `quantize_per_token(..., torch.float8_e4m3fn)`,
    which on a weight gives per-output-channel scales); k % 16 == 0, rows 16-byte aligned (n % 8 == 0 for a fresh
    output). Scales float32, told apart by their shapes: both per tensor (one element each, any shape: a 0-dim tensor as
    torch._scaled_mm takes), x_scales [m] and w_scales [n] ([m, 1] and [1, n] too), or block scales (DeepSeek-V3,
    k % 128 == 0): x_scales [m, k / 128], one per 1 x 128 slice of a row (from the `quantize_per_token_group(x, 128)`
    that gave xq), and w_scales [ceil(n / 128), k / 128], one per 128 x 128 block (`quantize_blockwise`);
    y[t, r] = sum_b (xq[t, b] . qweight[r, b]) * x_scales[t, b] * w_scales[r // 128, b] (+ bias) over the 128-wide
    blocks b of k. On CUDA block scales need an sm_90 GPU and cuBLASLt's layouts, refused otherwise: x_scales
    token-major with strides (1, m) (`quantize_per_token_group(..., column_major_scales=True, tma_aligned=False)`) and
    w_scales' rows ceil(k / 128) rounded up to 4 apart (as `quantize_blockwise` returns them). fast_accumulation:
    Hopper's FP8 sums without fp32 promotion (torch._scaled_mm's use_fast_accum; not with block scales). CUDA: cuBLASLt
    on an FP8 GPU (sm_89+); CPU: the reference.
    """
    _dims("linear_fp8", "xq", xq, (2,), "[m, k] (float8_e4m3fn)")
    _dims("linear_fp8", "qweight", qweight, (2,), "[n, k] (float8_e4m3fn)")
    m, n = xq.shape[0], qweight.shape[0]
    if not _block_scaled(m, n, x_scales, w_scales):  # the core takes per-tensor and row-wise scales as vectors
        x_scales, w_scales = x_scales.reshape(-1), w_scales.reshape(-1)
    out = torch.empty((m, n), dtype=out_dtype, device=xq.device)
    ops.linear_fp8(out, _rows(xq), x_scales, qweight, w_scales, bias, fast_accumulation)
    return out
