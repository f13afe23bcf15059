"""Forward-only layers for `kernels.kernelize` and `kernelkit.patch`: each reads the attributes of the module it
replaces (transformers' LlamaRMSNorm has `weight` and `variance_epsilon`; diffusers' RMSNorm has `weight`, possibly
None, and `eps`; diffusers' AdaLayerNorm* have `linear`, `silu`, `norm`), so swapping its forward in keeps the module's
parameters and state dict untouched."""
from __future__ import annotations

import torch
from torch import nn

from . import ada_layer_norm, rms_norm


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


def _modulated_norm(norm: nn.Module, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """norm(x) * (1 + scale[:, None]) + shift[:, None] as one kernelkit op when `norm` is a LayerNorm over the last dim
    of a [batch, seq, hidden] input; otherwise the module's own arithmetic."""
    if isinstance(norm, nn.LayerNorm) and x.dim() == 3 and tuple(norm.normalized_shape) == (x.shape[-1],):
        cast = lambda t: None if t is None else t.to(x.dtype)  # noqa: E731
        return ada_layer_norm(x, scale.to(x.dtype), shift.to(x.dtype), cast(norm.weight), cast(norm.bias), norm.eps)
    return norm(x) * (1 + scale[:, None]) + shift[:, None]


class AdaLayerNormZero(nn.Module):
    """diffusers' AdaLayerNormZero (DiT, SD3): the LayerNorm + modulation of `x` runs as kernelkit.ada_layer_norm."""

    can_torch_compile = True
    has_backward = False

    def forward(self, x, timestep=None, class_labels=None, hidden_dtype=None, emb=None):
        if self.emb is not None:
            emb = self.emb(timestep, class_labels, hidden_dtype=hidden_dtype)
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
        return _modulated_norm(self.norm, x, scale_msa, shift_msa), gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNormContinuous(nn.Module):
    """diffusers' AdaLayerNormContinuous (SD3/Flux output norm): norm(x) * (1 + scale) + shift as one op."""

    can_torch_compile = True
    has_backward = False

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return _modulated_norm(self.norm, x, scale, shift)
