"""Quantized linear layers on kernelkit's kernels (weight-only W8A16 / W4A16, and W8A8 with dynamic per-token INT8
activations), and `quantize(model)` for transformers."""
from __future__ import annotations

from collections import Counter

import torch
from torch import nn

from . import linear_w8a8, linear_weight_only, quantize_per_token, quantize_weight


class _QuantLinear(nn.Module):
    """y = x @ dequant(q)^T + b for float16 / bfloat16 activations; built from an nn.Linear with `from_linear`."""

    bits = 0

    def __init__(self, in_features: int, out_features: int, group: int = 0):
        super().__init__()
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.register_buffer("qweight", torch.empty(0, dtype=torch.int8))
        self.register_buffer("scales", torch.empty(0, dtype=torch.float32))
        self.bias = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, group: int = 128) -> "_QuantLinear":
        layer = cls(linear.in_features, linear.out_features, group if cls.bits == 4 else 0)
        with torch.no_grad():
            layer.qweight, layer.scales = quantize_weight(linear.weight.detach(), cls.bits, group)
            if linear.bias is not None:
                layer.bias = nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return linear_weight_only(x, self.qweight, self.scales, self.bits, self.group, bias)

    def extra_repr(self) -> str:
        g = f", group={self.group}" if self.bits == 4 else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}{g}"


class Int8Linear(_QuantLinear):
    """W8A16: int8 weights with one float32 scale per output channel."""

    bits = 8


class Int4Linear(_QuantLinear):
    """W4A16: int4 weights (kernelkit's interleaved layout) with a float32 scale per group of 64 or 128 inputs."""

    bits = 4


class W8A8Linear(_QuantLinear):
    """W8A8: int8 weights (one scale per output channel) times int8 activations quantized per token on the fly, on
    INT8 tensor cores; the output keeps the activations' dtype. For prefill-sized inputs (the INT8 GEMM's regime)."""

    bits = 8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        xq, sx = quantize_per_token(x.reshape(-1, x.shape[-1]))
        y = linear_w8a8(xq, sx, self.qweight, self.scales, bias, out_dtype=x.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, weights int8, activations int8"


def _bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))


def quantize(model: nn.Module, bits: int = 8, group: int = 128, skip: tuple = ("lm_head",),
             activations: bool = False) -> dict:
    """Replaces every nn.Linear of `model` (except modules whose name ends with an entry of `skip`) in place by
    Int8Linear or Int4Linear (weight-only), or with activations=True (bits 8 only) by W8A8Linear. Returns a report:
    layers replaced and the model's parameter + buffer bytes before and after."""
    if bits not in (8, 4):
        raise ValueError(f"quantize: bits must be 8 or 4, got {bits}")
    if activations and bits != 8:
        raise ValueError(f"quantize: activations=True needs bits=8 (W8A8), got bits={bits}")
    cls = W8A8Linear if activations else Int8Linear if bits == 8 else Int4Linear
    before = _bytes(model)
    replaced = Counter()
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if type(child) is nn.Linear and not any(full.endswith(s) for s in skip):
                setattr(module, child_name, cls.from_linear(child, group))
                replaced[cls.__name__] += 1
    return {"replaced": dict(replaced), "bytes_before": before, "bytes_after": _bytes(model)}
