"""Forward-only layers for `kernels.kernelize` and `kernelkit.patch`: each reads the attributes of the module it
replaces (transformers' LlamaRMSNorm has `weight` and `variance_epsilon`; diffusers' RMSNorm has `weight`, possibly
None, and `eps`), so swapping its forward in keeps the module's parameters and state dict untouched."""
from __future__ import annotations

import torch
from torch import nn

from . import rms_norm


def _eps(module: nn.Module) -> float:
    for name in ("variance_epsilon", "eps", "epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    raise AttributeError(f"{type(module).__name__} has no variance_epsilon / eps attribute")


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight, for transformers' *RMSNorm classes and diffusers' RMSNorm.

    Gemma-style norms (weight stored as w with y * (1 + w)) set `weight_offset = 1.0`. The weight is cast to the
    input's dtype when they differ (kernelkit's ops take one dtype).
    """

    can_torch_compile = True
    has_backward = False
    weight_offset = 0.0

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        weight = getattr(self, "weight", None)
        if weight is not None and weight.dtype != hidden_states.dtype:
            weight = weight.to(hidden_states.dtype)
        return rms_norm(hidden_states, weight, _eps(self), weight_offset=self.weight_offset)


class GemmaRMSNorm(RMSNorm):
    """Gemma's RMSNorm: y = x / sqrt(mean(x^2) + eps) * (1 + weight)."""

    weight_offset = 1.0
