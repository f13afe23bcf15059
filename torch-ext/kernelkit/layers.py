"""Forward-only layers for `kernels.kernelize` and `kernelkit.patch`: each reads the attributes of the module it
replaces (transformers' LlamaRMSNorm has `weight` and `variance_epsilon`; diffusers' RMSNorm has `weight`, possibly
None, and `eps`; diffusers' AdaLayerNorm* have `linear`, `silu`, `norm`), so swapping its forward in keeps the module's
parameters and state dict untouched."""
from __future__ import annotations

import torch
from torch import nn

from . import (ada_layer_norm, geglu, gelu, gelu_and_mul, gelu_tanh, gelu_tanh_and_mul, gelu_tanh_mul, rms_norm, silu,
               silu_and_mul, swiglu)


def _eps(module: nn.Module) -> float:
    for name in ("variance_epsilon", "eps", "epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    raise AttributeError(f"{type(module).__name__} has no variance_epsilon / eps attribute")


def _rms_norm(module: nn.Module, hidden_states: torch.Tensor, weight_offset: float) -> torch.Tensor:
    """The module's RMSNorm (its `weight`, possibly None, and eps) as kernelkit.rms_norm; the weight is cast to the
    input's dtype when they differ (kernelkit's ops take one dtype)."""
    weight = getattr(module, "weight", None)
    if weight is not None and weight.dtype != hidden_states.dtype:
        weight = weight.to(hidden_states.dtype)
    return rms_norm(hidden_states, weight, _eps(module), weight_offset=weight_offset)


class _ForwardOnly(nn.Module):
    """The layers' base: no state of their own (no constructor, no members beyond these two flags), as
    `kernels.kernelize` requires, which also keeps the replaced module's parameters and state dict untouched; forward
    only (inference), and traceable by torch.compile."""

    can_torch_compile = True
    has_backward = False


class RMSNorm(_ForwardOnly):
    """y = x / sqrt(mean(x^2) + eps) * weight, for transformers' *RMSNorm classes and diffusers' RMSNorm."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return _rms_norm(self, hidden_states, 0.0)


class GemmaRMSNorm(_ForwardOnly):
    """Gemma's RMSNorm, weight stored as w: y = x / sqrt(mean(x^2) + eps) * (1 + w)."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return _rms_norm(self, hidden_states, 1.0)


def _modulated_norm(norm: nn.Module, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """norm(x) * (1 + scale[:, None]) + shift[:, None] as one kernelkit op when `norm` is a LayerNorm over the last dim
    of a [batch, seq, hidden] input; otherwise the module's own arithmetic."""
    if isinstance(norm, nn.LayerNorm) and x.dim() == 3 and tuple(norm.normalized_shape) == (x.shape[-1],):
        cast = lambda t: None if t is None else t.to(x.dtype)  # noqa: E731
        return ada_layer_norm(x, scale.to(x.dtype), shift.to(x.dtype), cast(norm.weight), cast(norm.bias), norm.eps)
    return norm(x) * (1 + scale[:, None]) + shift[:, None]


class AdaLayerNormZero(_ForwardOnly):
    """diffusers' AdaLayerNormZero (DiT, SD3): the LayerNorm + modulation of `x` runs as kernelkit.ada_layer_norm."""

    def forward(self, x, timestep=None, class_labels=None, hidden_dtype=None, emb=None):
        if self.emb is not None:
            emb = self.emb(timestep, class_labels, hidden_dtype=hidden_dtype)
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
        return _modulated_norm(self.norm, x, scale_msa, shift_msa), gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNormContinuous(_ForwardOnly):
    """diffusers' AdaLayerNormContinuous (SD3/Flux output norm): norm(x) * (1 + scale) + shift as one op."""

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return _modulated_norm(self.norm, x, scale, shift)


# ---- Activations ------------------------------------------------------------------------------------------------------

# transformers' activation modules (SiLUActivation, GELUActivation, GELUTanh, NewGELUActivation, FastGELUActivation:
# hub names SiLU, GeLU, GeluTanh, NewGELU, FastGELU) take `input`, as these do (kernels checks the signatures match).
class SiLU(_ForwardOnly):
    """x * sigmoid(x)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return silu(input)


class GELU(_ForwardOnly):
    """The exact GELU, 0.5 x (1 + erf(x / sqrt 2))."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return gelu(input)


class GELUTanh(_ForwardOnly):
    """GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return gelu_tanh(input)


class SiluAndMul(_ForwardOnly):
    """x: [..., 2d] -> silu(x[..., :d]) * x[..., d:] (the vLLM / HF `activation` kernel layer)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul(x)


class GeluAndMul(_ForwardOnly):
    """x: [..., 2d] -> gelu(x[..., :d]) * x[..., d:]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_and_mul(x)


class GeluTanhAndMul(_ForwardOnly):
    """x: [..., 2d] -> gelu_tanh(x[..., :d]) * x[..., d:]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_tanh_and_mul(x)


# transformers' ACT2FN activation modules a gated MLP may hold -> kernelkit's fused act(gate) * up.
_GATED_MLP_OPS = {
    "SiLUActivation": swiglu,
    "SiLU": swiglu,
    "GELUActivation": geglu,
    "GELU": geglu,
    "GELUTanh": gelu_tanh_mul,
    "PytorchGELUTanh": gelu_tanh_mul,
}


def gated_mlp_op(act_fn: nn.Module):
    """kernelkit's fused act(gate) * up for a transformers activation module, or None when kernelkit has none."""
    if type(act_fn).__name__ == "GELU" and getattr(act_fn, "approximate", "none") != "none":
        return gelu_tanh_mul
    return _GATED_MLP_OPS.get(type(act_fn).__name__)


class GatedMLP(_ForwardOnly):
    """transformers' Llama/Mistral/Qwen2/Gemma MLP: down_proj(act(gate_proj(x)) * up_proj(x)), the activation and
    the product fused into one kernelkit op."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(gated_mlp_op(self.act_fn)(self.gate_proj(x), self.up_proj(x)))


class DiffusersGELU(_ForwardOnly):
    """diffusers' GELU(approximate="none" | "tanh"): proj, then kernelkit's gelu / gelu_tanh."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        h = self.proj(hidden_states)
        return gelu_tanh(h) if self.approximate == "tanh" else gelu(h)


class DiffusersGEGLU(_ForwardOnly):
    """diffusers' GEGLU: proj, then hidden * gelu(gate) for (hidden, gate) = the two halves: the *second* half is
    activated here (the opposite of the vLLM convention), so it runs as geglu(a=gate, b=hidden) on strided views."""

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        hidden, gate = self.proj(hidden_states).chunk(2, dim=-1)
        return geglu(gate, hidden)
