"""Normalization ops (src/ops/norm/): fp32 accumulation, one rounding per output."""
from __future__ import annotations

from typing import Optional

import torch

from ._common import _eager_ops, _fast_for, _inference_only, _out_for, _quant_outputs, _rows
from ._ops import ops

__all__ = ["rms_norm", "fused_add_rms_norm", "layer_norm", "ada_layer_norm", "rms_norm_gelu", "rms_norm_quant",
           "fused_add_rms_norm_quant"]
# The torch.ops.kernelkit ops these functions call (fake implementations are registered for them).
_OPS = ("rms_norm", "fused_add_rms_norm", "layer_norm", "ada_layer_norm", "rms_norm_gelu", "rms_norm_quant",
        "fused_add_rms_norm_quant")


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6,
             out: Optional[torch.Tensor] = None, weight_offset: float = 0.0) -> torch.Tensor:
    """y = x / sqrt(mean(x^2, dim=-1) + eps) * (weight_offset + weight).

    `weight` may be None (diffusers' elementwise_affine=False); weight_offset=1 gives Gemma's (1 + weight).
    """
    _inference_only("rms_norm", x, weight)
    if fast := _fast_for(x):
        return fast.rms_norm(x, weight, eps, weight_offset, out)
    x = _rows(x)
    out = _out_for(x, out)
    ops.rms_norm(out, x, weight, eps, weight_offset)
    return out


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor] = None,
                       eps: float = 1e-6, weight_offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """In place, vLLM semantics: residual = x + residual (rounded to the dtype); x = rms_norm(residual, weight, eps).

    Returns (x, residual).
    """
    _inference_only("fused_add_rms_norm", x, residual, weight)
    _eager_ops().fused_add_rms_norm(x, residual, weight, eps, weight_offset)
    return x, residual


def layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased variance, as torch)."""
    _inference_only("layer_norm", x, weight, bias)
    if fast := _fast_for(x):
        return fast.layer_norm(x, weight, bias, eps, out)
    x = _rows(x)
    out = _out_for(x, out)
    ops.layer_norm(out, x, weight, bias, eps)
    return out


def ada_layer_norm(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, weight: Optional[torch.Tensor] = None,
                   bias: Optional[torch.Tensor] = None, eps: float = 1e-6,
                   out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """DiT / LTX-Video modulation: y = layer_norm(x) * (1 + scale[b]) + shift[b].

    x: [batch, seq, hidden]; scale, shift: [batch, hidden].
    """
    _inference_only("ada_layer_norm", x, scale, shift, weight, bias)
    x = _rows(x)
    out = _out_for(x, out)
    _eager_ops().ada_layer_norm(out, x, scale, shift, weight, bias, eps)
    return out


def rms_norm_gelu(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6,
                  out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = gelu_tanh(rms_norm(x) * weight), fused (no intermediate rounding)."""
    _inference_only("rms_norm_gelu", x, weight)
    x = _rows(x)
    out = _out_for(x, out)
    _eager_ops().rms_norm_gelu(out, x, weight, eps)
    return out


def rms_norm_quant(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6,
                   dtype: torch.dtype = torch.float8_e4m3fn, scale: Optional[torch.Tensor] = None,
                   weight_offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm fused with the quantization of its output for an FP8 or INT8 linear layer; returns (q, scales).

    y = rms_norm(x, weight, eps) rounded to x's dtype, then q = y / s rounded to `dtype` (torch.float8_e4m3fn: nearest
    even, saturating at 448; torch.int8: half to even, clamped to 127). scale None: dynamic per token, scales float32
    [...] (x's leading dims), s = max|y| / 448 (or 127): q and scales equal quantize_per_token(rms_norm(x)) bit for
    bit. scale: a float32 [1] static scale (calibrated, > 0), returned as the scales. x float16 or bfloat16; FP8 needs
    an FP8 GPU (sm_89+).
    """
    _inference_only("rms_norm_quant", x, weight)
    q, s = _quant_outputs("rms_norm_quant", x, dtype, scale)
    _eager_ops().rms_norm_quant(q, s, x, weight, eps, scale is not None, weight_offset)
    return q, s


def fused_add_rms_norm_quant(x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor] = None,
                             eps: float = 1e-6, dtype: torch.dtype = torch.float8_e4m3fn,
                             scale: Optional[torch.Tensor] = None,
                             weight_offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """residual = x + residual in place (rounded to the dtype), then (q, scales) = rms_norm_quant(residual, ...).

    vLLM's fused add + RMSNorm + FP8 / INT8 quantization of a decoder layer's residual stream: x is only read.
    """
    _inference_only("fused_add_rms_norm_quant", x, residual, weight)
    q, s = _quant_outputs("fused_add_rms_norm_quant", x, dtype, scale)
    _eager_ops().fused_add_rms_norm_quant(q, s, x, residual, weight, eps, scale is not None, weight_offset)
    return q, s
