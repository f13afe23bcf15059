"""kernelkit.attention inside diffusers' attention processors: `AttnProcessor(inner)` runs diffusers' own processor
`inner` (the UNet's AttnProcessor2_0, SD3's JointAttnProcessor2_0, Flux's FluxAttnProcessor, ... with their QK norms,
RoPE, joint text-image concatenation and residuals unchanged) and takes over the scaled-dot-product attention it
calls: `torch.nn.functional.scaled_dot_product_attention` as the processors in diffusers.models.attention_processor
call it, and the native backend of diffusers' attention dispatcher (the newer processors, Flux's). Only calls inside
an AttnProcessor are taken, and of those only what the kernel handles (float16 / bfloat16, no mask, no dropout,
head_dim a multiple of 8 up to 256, equal batches and heads or GQA asked for, the layout the kernel reads, causal
only when queries and keys are as many: SDPA aligns is_causal top-left, kernelkit bottom-right); every other call
runs PyTorch's SDPA as before, so the rest of the process and the calls the kernel lacks are unchanged.

`kernelkit.patch(model_or_pipeline, attention=True)` wraps every processor of a diffusers model (a pipeline: of each
of its model components) except those that are modules themselves (IP-Adapter's, whose weights live in the
processor); `unpatch` restores them, and the routing goes with the last wrapped model.
"""
from __future__ import annotations

import contextvars
import functools
import weakref

import torch
import torch.nn.functional as F

_inside = contextvars.ContextVar("kernelkit_diffusers_attention", default=False)
_originals = {}  # what _install replaced, for _uninstall
_wrapped = weakref.WeakSet()  # the models with wrapped processors


def _layout_ok(t: torch.Tensor) -> bool:
    """The strides the kernels read on CUDA: a contiguous last dim, 16-byte rows and address."""
    return (t.stride(-1) == 1 and all(s % 8 == 0 for s in t.stride()[:-1])
            and (not t.is_cuda or t.data_ptr() % 16 == 0))


def _handles(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa, heads_dim) -> bool:
    """Whether kernelkit.attention computes this SDPA call as SDPA would (heads_dim: 1 for [b, h, s, d], 2 for
    [b, s, h, d])."""
    if not (query.dim() == key.dim() == value.dim() == 4):
        return False
    d, seq_dim = query.shape[-1], 3 - heads_dim
    h, hk = query.shape[heads_dim], key.shape[heads_dim]
    return (attn_mask is None and dropout_p == 0.0 and query.dtype in (torch.float16, torch.bfloat16)
            and key.dtype == query.dtype == value.dtype and query.device == key.device == value.device
            and d % 8 == 0 and d <= 256 and key.shape[-1] == d and value.shape[-1] == d
            and query.shape[0] == key.shape[0] == value.shape[0] and key.shape == value.shape
            and (h == hk or (enable_gqa and h % hk == 0))
            and (not is_causal or query.shape[seq_dim] == key.shape[seq_dim])
            and all(_layout_ok(t) for t in (query, key, value))
            and not (torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)))


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **kwargs):
    """torch's SDPA signature, [b, h, s, d]: kernelkit.attention inside an AttnProcessor where it handles the call."""
    if kwargs or not _inside.get() or not _handles(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa, 1):
        return _torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, enable_gqa=enable_gqa, **kwargs)
    from . import attention
    return attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=is_causal,
                     scale=scale).transpose(1, 2)


_torch_sdpa = F.scaled_dot_product_attention


class _Functional:
    """torch.nn.functional with scaled_dot_product_attention routed through _sdpa (what diffusers'
    attention_processor module sees as `F`)."""
    scaled_dot_product_attention = staticmethod(_sdpa)

    def __getattr__(self, name):
        return getattr(F, name)


def _route_native(native):
    """The dispatcher's native backend ([b, s, h, d] tensors) routed as _sdpa is."""
    def backend(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
                **kwargs):
        if (kwargs.get("return_lse") or kwargs.get("_parallel_config") is not None or not _inside.get()
                or not _handles(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa, 2)):
            return native(query=query, key=key, value=value, attn_mask=attn_mask, dropout_p=dropout_p,
                          is_causal=is_causal, scale=scale, enable_gqa=enable_gqa, **kwargs)
        from . import attention
        return attention(query, key, value, causal=is_causal, scale=scale)
    backend._kernelkit_native = native
    return backend


def _install() -> None:
    """Routes diffusers' two ways to SDPA through kernelkit while a model has wrapped processors (outside an
    AttnProcessor they stay PyTorch's)."""
    if _originals:
        return
    from diffusers.models import attention_processor
    _originals["F"] = attention_processor.F
    attention_processor.F = _Functional()
    try:
        from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
    except ImportError:  # a diffusers without the dispatcher
        return
    native = _AttentionBackendRegistry._backends.get(AttentionBackendName.NATIVE)
    if native is not None:
        _originals["native"] = native
        _AttentionBackendRegistry._backends[AttentionBackendName.NATIVE] = _route_native(native)


def _uninstall() -> None:
    from diffusers.models import attention_processor
    if "F" in _originals:
        attention_processor.F = _originals.pop("F")
    if "native" in _originals:
        from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
        _AttentionBackendRegistry._backends[AttentionBackendName.NATIVE] = _originals.pop("native")


class AttnProcessor:
    """A diffusers attention processor: `inner` (the one the model had) with its attention on kernelkit."""

    def __init__(self, inner):
        object.__setattr__(self, "inner", inner)
        # diffusers reads the processor's parameters off `processor.__call__` to pass it only the keyword arguments
        # it takes: the inner processor's (the call itself goes through the class's __call__).
        object.__setattr__(self, "__call__",
                           functools.wraps(inner.__call__)(lambda *args, **kwargs: self._call(*args, **kwargs)))

    def _call(self, attn, *args, **kwargs):
        token = _inside.set(True)
        try:
            return self.inner(attn, *args, **kwargs)
        finally:
            _inside.reset(token)

    def __call__(self, attn, *args, **kwargs):
        return self._call(attn, *args, **kwargs)

    # What callers read and write on a processor (Flux's _attention_backend, set_attention_backend, the parallel
    # config): the inner processor's.
    def __getattr__(self, name):
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __setattr__(self, name, value):
        setattr(self.inner, name, value)


def diffusers_models(obj) -> list:
    """The diffusers models of `obj`: itself, or a pipeline's model components (unet, transformer, ...)."""
    if hasattr(obj, "attn_processors") and hasattr(obj, "set_attn_processor"):
        return [obj]
    components = getattr(obj, "components", None)
    if isinstance(components, dict):
        return [m for m in components.values() if hasattr(m, "attn_processors") and hasattr(m, "set_attn_processor")]
    return []


def wrap(model) -> int:
    """Every attention processor of `model` wrapped in AttnProcessor (those already wrapped kept; modules, such as
    IP-Adapter's, left as they are); returns how many are wrapped."""
    _install()
    _wrapped.add(model)
    processors = {name: p if isinstance(p, (AttnProcessor, torch.nn.Module)) else AttnProcessor(p)
                  for name, p in model.attn_processors.items()}
    wrapped = sum(isinstance(p, AttnProcessor) for p in processors.values())
    model.set_attn_processor(processors)  # (which empties the dict)
    return wrapped


def unwrap(model) -> int:
    """The processors AttnProcessor wrapped, back; returns how many."""
    processors = model.attn_processors
    restored = sum(isinstance(p, AttnProcessor) for p in processors.values())
    if restored:
        model.set_attn_processor({name: p.inner if isinstance(p, AttnProcessor) else p
                                  for name, p in processors.items()})
    _wrapped.discard(model)
    if not _wrapped:
        _uninstall()
    return restored
