"""Activation ops (src/ops/activation/): gelu, gelu_tanh, silu, the gated forms (x: [..., 2d]), the two-tensor
forms (act(a) * b) and SwiGLU fused with FP8 / INT8 quantization."""
from __future__ import annotations

from typing import Optional

import torch

from ._common import _dims, _eager_ops, _fast_for, _inference_only, _out_for, _quant_outputs, _rows
from ._ops import ops

__all__ = ["gelu", "gelu_tanh", "silu", "silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul", "geglu", "swiglu",
           "gelu_tanh_mul", "silu_and_mul_quant"]
# The torch.ops.kernelkit ops these functions call (fake implementations are registered for them).
_OPS = ("activation", "act_and_mul", "act_mul", "silu_and_mul_quant")


def _activation(name: str):
    def fn(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        _inference_only(name, x)
        if fast := _fast_for(x):
            return fast.activation(x, name, out)
        x = _rows(x)
        out = _out_for(x, out)
        ops.activation(out, x, name)
        return out

    return fn


gelu = _activation("gelu")
gelu.__doc__ = "y = x * Phi(x) (exact, erf)."
gelu_tanh = _activation("gelu_tanh")
gelu_tanh.__doc__ = "y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."
silu = _activation("silu")
silu.__doc__ = "y = x * sigmoid(x)."


def _act_and_mul(name: str):
    def fn(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        _inference_only(name + "_and_mul", x)
        _dims(name + "_and_mul", "x", x, 1, "[..., 2d]")
        if fast := _fast_for(x):
            return fast.act_and_mul(x, name, out)
        x = _rows(x)
        if out is None:
            out = x.new_empty(x.shape[:-1] + (x.shape[-1] // 2,))
        ops.act_and_mul(out, x, name)
        return out

    return fn


silu_and_mul = _act_and_mul("silu")
silu_and_mul.__doc__ = "x: [..., 2d] -> silu(x[..., :d]) * x[..., d:] (SwiGLU; vLLM / HF activation convention)."
gelu_and_mul = _act_and_mul("gelu")
gelu_and_mul.__doc__ = "x: [..., 2d] -> gelu(x[..., :d]) * x[..., d:]."
gelu_tanh_and_mul = _act_and_mul("gelu_tanh")
gelu_tanh_and_mul.__doc__ = "x: [..., 2d] -> gelu_tanh(x[..., :d]) * x[..., d:]."


def _act_mul(name: str):
    def fn(a: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        _inference_only(name + "_mul", a, b)
        a, b = _rows(a), _rows(b)
        out = _out_for(a, out)
        ops.act_mul(out, a, b, name)
        return out

    return fn


geglu = _act_mul("gelu")
geglu.__doc__ = "y = gelu(a) * b with separate tensors (GEGLU)."
swiglu = _act_mul("silu")
swiglu.__doc__ = "y = silu(a) * b with separate tensors (a Llama MLP's silu(gate) * up)."
gelu_tanh_mul = _act_mul("gelu_tanh")
gelu_tanh_mul.__doc__ = "y = gelu_tanh(a) * b with separate tensors (a Gemma MLP's gelu_tanh(gate) * up)."


def silu_and_mul_quant(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn,
                       scale: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """SwiGLU fused with the quantization of its output for an FP8 or INT8 linear layer (the down projection's
    input); returns (q, scales).

    x: [..., 2d] float16 or bfloat16. y = silu(x[..., :d]) * x[..., d:] rounded to x's dtype, then q = y / s rounded
    to `dtype` (torch.float8_e4m3fn: nearest even, saturating at 448; torch.int8: half to even, clamped to 127), q
    [..., d]. scale None: dynamic per token, scales float32 [...] (x's leading dims), s = max|y| / 448 (or 127): q and
    scales equal quantize_per_token(silu_and_mul(x)) bit for bit. scale: a float32 [1] static scale (calibrated,
    > 0; vLLM's silu_and_mul_quant), returned as the scales. FP8 needs an FP8 GPU (sm_89+).
    """
    _inference_only("silu_and_mul_quant", x)
    _dims("silu_and_mul_quant", "x", x, 1, "[..., 2d]")
    x = _rows(x)
    q, s = _quant_outputs("silu_and_mul_quant", x, dtype, scale, x.shape[-1] // 2)
    _eager_ops().silu_and_mul_quant(q, s, x, scale is not None)
    return q, s
