"""`kernelkit.patch(model)`: run a transformers or diffusers model's normalization layers on kernelkit.

Modules are matched by class name and their forward is replaced by the matching layer of `kernelkit.layers`; their
parameters, buffers and state dict are untouched, and `unpatch` restores the original forwards. Only what kernelkit
implements today is patched: RMSNorm variants (transformers' *RMSNorm, Gemma's 1 + w, diffusers' RMSNorm with or
without weight), transformers' gated MLPs (act(gate) * up fused), and diffusers' GELU / GEGLU and AdaLayerNormZero /
AdaLayerNormContinuous (LayerNorm + modulation as one op).

The same layers serve `kernels.kernelize`: `mark_for_kernelize(model)` declares their hub names on the model's classes
and `kernel_mapping(repo)` maps those names to a local hub build of kernelkit; `kernel_config(repo)` is the same for
transformers' `model.set_use_kernels(True, kernel_config)`.
"""
from __future__ import annotations

import types
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch import nn

from . import layers


@dataclass
class PatchReport:
    patched: Counter = field(default_factory=Counter)  # class name -> modules patched
    dtype: torch.dtype | None = None

    def __str__(self) -> str:
        lines = [f"kernelkit.patch: {sum(self.patched.values())} modules"]
        lines += [f"  {name}: {count}" for name, count in sorted(self.patched.items())]
        if self.dtype is not None:
            lines.append(f"  model cast to {self.dtype}")
        return "\n".join(lines)


def _layer_for(module: nn.Module):
    name = type(module).__name__
    if all(hasattr(module, a) for a in ("gate_proj", "up_proj", "down_proj", "act_fn")):
        return layers.GatedMLP if layers.gated_mlp_op(module.act_fn) is not None else None
    if name == "GELU" and hasattr(module, "proj") and getattr(module, "approximate", None) in ("none", "tanh"):
        return layers.DiffusersGELU
    if name == "GEGLU" and hasattr(module, "proj"):
        return layers.DiffusersGEGLU
    if name in ("AdaLayerNormZero", "AdaLayerNormContinuous") and all(
            hasattr(module, a) for a in ("linear", "silu", "norm")):
        return getattr(layers, name)
    if not name.endswith("RMSNorm"):
        return None
    if not any(isinstance(getattr(module, a, None), (int, float)) for a in ("variance_epsilon", "eps", "epsilon")):
        return None
    if getattr(module, "bias", None) is not None:  # diffusers' RMSNorm(bias=True): no kernel with a bias yet
        return None
    return layers.GemmaRMSNorm if name.startswith("Gemma") else layers.RMSNorm


def _auto_dtype(model: nn.Module) -> torch.dtype:
    """fp16 on GPUs without bf16 (T4, sm_75), bf16 on newer ones, fp32 on the CPU (a pipeline: by the device of its
    model components)."""
    try:
        device = next(p for m in _modules(model) for p in m.parameters(recurse=False)).device
    except StopIteration:
        return torch.float32
    if device.type != "cuda":
        return torch.float32
    major, _ = torch.cuda.get_device_capability(device)
    return torch.bfloat16 if major >= 8 else torch.float16


def _modules(model) -> list:
    """The modules of a model, or of a diffusers pipeline's model components."""
    from . import diffusers_attention
    if isinstance(model, nn.Module):
        return list(model.modules())
    return [m for d in diffusers_attention.diffusers_models(model) for m in d.modules()]


def patch(model: nn.Module, dtype: torch.dtype | str | None = None, attention: bool = False) -> PatchReport:
    """Replace the forward of every supported module of `model` (a model, or a diffusers pipeline) with kernelkit's;
    returns what was patched.

    dtype: None keeps the model's dtype; "auto" casts it to fp16 on a T4 (no bf16), bf16 on sm_80+, fp32 on the CPU;
    a torch.dtype casts it to that.
    attention: also run the model's attention on kernelkit.attention: a transformers model through
    kernelkit.hf_attention, a diffusers model's (or pipeline's) attention processors wrapped in
    kernelkit.diffusers_attention.AttnProcessor; the calls the kernel does not handle (e.g. a mask) stay on PyTorch.
    """
    report = PatchReport()
    if dtype is not None:
        report.dtype = _auto_dtype(model) if dtype == "auto" else dtype
        model.to(report.dtype)
    from . import diffusers_attention
    diffusers = diffusers_attention.diffusers_models(model)  # a diffusers model, or a pipeline's models
    if attention and diffusers:
        report.patched["attention processors (kernelkit)"] += sum(diffusers_attention.wrap(d) for d in diffusers)
    elif attention:
        from . import hf_attention

        model.set_attn_implementation(hf_attention.register())
        report.patched["attention (kernelkit)"] += 1
    for module in _modules(model):
        layer = _layer_for(module)
        if layer is None or hasattr(module, "_kernelkit_original_forward"):
            continue
        module._kernelkit_original_forward = module.forward
        module.forward = types.MethodType(layer.forward, module)
        report.patched[type(module).__name__] += 1
    return report


def unpatch(model: nn.Module) -> int:
    """Restore the original forwards (and a diffusers model's attention processors); returns how many modules and
    processors were restored."""
    from . import diffusers_attention
    restored = sum(diffusers_attention.unwrap(d) for d in diffusers_attention.diffusers_models(model))
    for module in _modules(model):
        original = module.__dict__.pop("_kernelkit_original_forward", None)
        if original is not None:
            module.forward = original
            restored += 1
    return restored


# ---- kernels.kernelize ----------------------------------------------------------------------------------------------
# Hub layer name (what a module class declares as `kernel_layer_name`: transformers' `@use_kernel_forward_from_hub`
# names, or kernelkit's own from mark_for_kernelize) -> the kernelkit layer that serves it.
HUB_LAYERS = {
    "RMSNorm": "RMSNorm",
    "GemmaRMSNorm": "GemmaRMSNorm",
    "GatedMLP": "GatedMLP",
    "DiffusersGELU": "DiffusersGELU",
    "DiffusersGEGLU": "DiffusersGEGLU",
    "AdaLayerNormZero": "AdaLayerNormZero",
    "AdaLayerNormContinuous": "AdaLayerNormContinuous",
    "SiLU": "SiLU",
    "GeLU": "GELU",
    "GeluTanh": "GELUTanh",
    "NewGELU": "GELUTanh",
    "FastGELU": "GELUTanh",
}


def kernel_mapping(repo_path, devices=("cuda", "cpu")) -> dict:
    """A `kernels` layer mapping from every hub layer name kernelkit serves (HUB_LAYERS) to the `layers` module of a
    local hub build (a directory written by `torch-ext/build_variant.py`), for `kernels.use_kernel_mapping`. Without a
    mode the entries serve every mode (`Mode.INFERENCE`, with or without `Mode.TORCH_COMPILE`)."""
    from pathlib import Path

    from kernels import LocalLayerRepository

    return {name: {device: LocalLayerRepository(repo_path=Path(repo_path), layer_name=layer) for device in devices}
            for name, layer in HUB_LAYERS.items()}


def kernel_config(repo_path, names=("RMSNorm", "SiLU")):
    """transformers' `KernelConfig` for `model.set_use_kernels(True, kernel_config)` with a local hub build of
    kernelkit: `names` are the hub names the model's classes declare (transformers refuses a name no module
    of the model has; the default suits Llama, Mistral and Qwen2). transformers takes local kernels on accelerators
    only (CUDA here), not on the CPU."""
    from pathlib import Path

    from transformers import KernelConfig

    unknown = sorted(set(names) - set(HUB_LAYERS))
    if unknown:
        raise ValueError(f"kernelkit.kernel_config: no kernelkit layer for {unknown}; names must be among "
                         f"{sorted(HUB_LAYERS)}")
    repo = Path(repo_path).resolve()
    return KernelConfig({name: f"{repo}:{HUB_LAYERS[name]}" for name in names}, use_local_kernel=True)


def mark_for_kernelize(model: nn.Module) -> Counter:
    """Declares the hub layer name of every module class of `model` that kernelkit can replace (the class-level
    `kernel_layer_name` that `kernels.kernelize` looks for), through `kernels.replace_kernel_forward_from_hub`.

    Classes that already declare one (transformers' `@use_kernel_forward_from_hub` when its kernels integration is
    active) keep theirs. Returns class name -> modules now eligible. Like the decorator, this marks the class itself,
    for every instance; nothing changes until `kernels.kernelize` runs with a mapping (e.g. `kernel_mapping`).
    """
    from kernels import replace_kernel_forward_from_hub

    marked = Counter()
    for module in model.modules():
        layer = _layer_for(module)
        if layer is None:
            continue
        cls = type(module)
        if not hasattr(cls, "kernel_layer_name"):
            replace_kernel_forward_from_hub(cls, layer.__name__)
        marked[cls.__name__] += 1
    return marked
