"""kernelkit.attention as a transformers attention implementation, named "kernelkit".

`register()` adds it to transformers' AttentionInterface, and transformers' SDPA mask function to its
AttentionMaskInterface under the same name, so that a batch without padding reaches it with `attention_mask=None`
(causal through `is_causal`) exactly as it reaches SDPA. A model then uses it through
`model.set_attn_implementation("kernelkit")` or `kernelkit.patch(model, attention=True)`.

The kernel takes the calls it handles: float16 / bfloat16, head_dim a multiple of 8 up to 256, no mask tensor, no dropout, no
softcap or position bias, GQA with num_heads % num_kv_heads == 0. Every other call goes to transformers' own SDPA
implementation unchanged, so a model's results never silently depend on what the kernel does not support.
"""
from __future__ import annotations

import torch

NAME = "kernelkit"


def _kernel_handles(query, key, value, attention_mask, dropout, kwargs) -> bool:
    d = query.shape[-1]
    return (attention_mask is None and dropout == 0.0 and kwargs.get("softcap") is None
            and kwargs.get("position_bias") is None and not kwargs.get("output_attentions", False)
            and query.dtype in (torch.float16, torch.bfloat16) and key.dtype == query.dtype == value.dtype
            and d % 8 == 0 and d <= 256 and key.shape[-1] == d and value.shape[-1] == d
            and query.shape[1] % key.shape[1] == 0)


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function interface: query [b, h, s_q, d], key / value [b, h_kv, s_k, d]; returns
    ([b, s_q, h, d], None), like its SDPA implementation."""
    if not _kernel_handles(query, key, value, attention_mask, dropout, kwargs):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    from . import attention  # this package's op (a hub variant loads the package under another name)

    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # As SDPA: one query needs no mask; several see keys up to their own position (bottom-right aligned when a cache
    # holds earlier keys: kernelkit.attention's causal convention).
    causal = bool(causal) and query.shape[2] > 1
    out = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=causal, scale=scaling)
    return out, None


def register() -> str:
    """Registers "kernelkit" with transformers (idempotent); returns the name to pass to set_attn_implementation."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
