"""kernelkit.attention as a transformers attention implementation, named "kernelkit".

`register()` adds it to transformers' AttentionInterface, and a mask function to its AttentionMaskInterface under the
same name: transformers' SDPA one, except that a padding-free sliding-window causal mask (Mistral, Gemma 2, Qwen2's
window layers), checked element by element against that pattern, becomes None. A batch without padding therefore
reaches the kernel with `attention_mask=None`, causal through `is_causal` and its window through the layer's
`sliding_window` argument, which the kernel applies by skipping the tiles outside it. A model uses it through
`model.set_attn_implementation("kernelkit")` or `kernelkit.patch(model, attention=True)`.

The kernel takes the calls it handles: float16 / bfloat16, head_dim a multiple of 8 up to 256, no mask tensor, no
dropout, no position bias, GQA with num_heads % num_kv_heads == 0; a sliding window and Gemma 2's soft-cap
(`softcap`) are its own. Every other call goes to transformers' SDPA implementation (or, with a soft-cap SDPA lacks,
to the model's eager one), with the window's mask made explicit where the mask function dropped it, so a model's
results never silently depend on what the kernel does not support.
"""
from __future__ import annotations

import torch

NAME = "kernelkit"


def _kernel_handles(query, key, value, attention_mask, dropout, kwargs) -> bool:
    d = query.shape[-1]
    return (attention_mask is None and dropout == 0.0
            and kwargs.get("position_bias") is None and not kwargs.get("output_attentions", False)
            and query.dtype in (torch.float16, torch.bfloat16) and key.dtype == query.dtype == value.dtype
            and d % 8 == 0 and d <= 256 and key.shape[-1] == d and value.shape[-1] == d
            and query.shape[1] % key.shape[1] == 0)


def _window_left(window) -> int:
    """transformers' sliding_window w (a query sees keys q - w < k <= q) as kernelkit's window_left (keys from
    position - window_left); -1 for none."""
    return int(window) - 1 if window else -1


def _explicit_mask(query, key, causal, window):
    """The causal / sliding-window mask of a call whose mask function returned None, as SDPA's boolean [s_q, s_k]
    (True: attend), bottom-right aligned as kernelkit's."""
    s_q, s_k = query.shape[2], key.shape[2]
    pos = torch.arange(s_q, device=query.device)[:, None] + (s_k - s_q)
    kv = torch.arange(s_k, device=query.device)[None, :]
    visible = kv <= pos if causal else torch.ones(s_q, s_k, dtype=torch.bool, device=query.device)
    return visible & (kv > pos - window) if window else visible


def _sliding_window(module, kwargs):
    """The layer's window: the `sliding_window` argument of the call, else the attention module's (models that
    do not pass it, e.g. Qwen2-MoE)."""
    window = kwargs.get("sliding_window")
    return window if window is not None else getattr(module, "sliding_window", None)


def _causal(module, query, is_causal) -> bool:
    """As SDPA: one query needs no mask; several see keys up to their own position (bottom-right aligned when a
    cache holds earlier keys: kernelkit.attention's convention; the mask function keeps a mask otherwise)."""
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    return bool(causal) and query.shape[2] > 1


def _fallback(module, query, key, value, attention_mask, dropout, scaling, is_causal, kwargs):
    window, softcap = _sliding_window(module, kwargs), kwargs.get("softcap")
    # No mask: causal / the window the mask function left to the kernel, made explicit where the fallback would not
    # apply it (SDPA has no window; the eager attention of soft-capped models ignores is_causal).
    causal = _causal(module, query, is_causal)
    if attention_mask is None and (window or (softcap is not None and causal)):
        attention_mask = _explicit_mask(query, key, causal, window)
        is_causal = False
    if softcap is not None:  # SDPA has no soft-cap: the model's own eager attention (Gemma 2's), given a float mask
        import sys
        eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
        if eager is not None:
            if attention_mask is not None and attention_mask.dtype == torch.bool:
                attention_mask = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device).masked_fill(
                    ~attention_mask, torch.finfo(query.dtype).min)
            return eager(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  is_causal=is_causal, **kwargs)


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function interface: query [b, h, s_q, d], key / value [b, h_kv, s_k, d]; returns
    ([b, s_q, h, d], None), like its SDPA implementation."""
    if not _kernel_handles(query, key, value, attention_mask, dropout, kwargs):
        return _fallback(module, query, key, value, attention_mask, dropout, scaling, is_causal, kwargs)
    from . import attention  # this package's op (a hub variant loads the package under another name)

    softcap = kwargs.get("softcap")
    out = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                    causal=_causal(module, query, is_causal), scale=scaling,
                    window_left=_window_left(_sliding_window(module, kwargs)), softcap=float(softcap or 0.0))
    return out, None


def mask(batch_size: int, q_length: int, kv_length: int, q_offset=0, kv_offset=0, mask_function=None,
         attention_mask: torch.Tensor | None = None, local_size: int | None = None, allow_is_causal_skip: bool = True,
         **kwargs):
    """transformers' mask interface: sdpa_mask's mask, or None for a sliding-window causal one without padding (see
    the module docstring) where attention_forward applies the window itself. A causal mask sdpa_mask skips for
    queries that are not the last positions of the keys (a static cache's prefill: SDPA's is_causal is top-left
    aligned, kernelkit's bottom-right) is kept."""
    from transformers.masking_utils import causal_mask_function, sdpa_mask
    mask_function = mask_function or causal_mask_function
    if local_size is not None and allow_is_causal_skip and _is_sliding_causal(
            mask_function, q_length, kv_length, q_offset, kv_offset, local_size, attention_mask, kwargs.get("device")):
        return None
    args = dict(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset, kv_offset=kv_offset,
                mask_function=mask_function, attention_mask=attention_mask, local_size=local_size, **kwargs)
    out = sdpa_mask(allow_is_causal_skip=allow_is_causal_skip, **args)
    if out is None and q_length > 1 and not _end_aligned(q_length, kv_length, q_offset, kv_offset):
        out = sdpa_mask(allow_is_causal_skip=False, **args)
    return out


def _end_aligned(q_length, kv_length, q_offset, kv_offset) -> bool:
    """The queries are the last q_length of the keys' positions (offsets read only when plain ints: a static
    cache's tensor offsets count as not aligned)."""
    if isinstance(q_offset, torch.Tensor) or isinstance(kv_offset, torch.Tensor):
        return False
    return q_offset + q_length == kv_offset + kv_length


def _is_sliding_causal(mask_function, q_length, kv_length, q_offset, kv_offset, window, padding, device) -> bool:
    """Whether mask_function over these positions is exactly kv <= q and kv > q - window, the queries the last
    q_length positions (kernelkit's bottom-right alignment), with no padding. Evaluated on every (q, kv) pair once a
    mask (what sdpa_mask would build anyway), 1024 query rows at a time (bounded memory) and one read-back at the
    end; never while tracing, where it would read values."""
    if torch.compiler.is_compiling() or not _end_aligned(q_length, kv_length, q_offset, kv_offset):
        return False
    if padding is not None and not bool(padding.all()):
        return False
    kv = torch.arange(kv_length, device=device)[None, :] + kv_offset
    zero = torch.zeros((), dtype=torch.long, device=device)
    same = torch.ones((), dtype=torch.bool, device=device)
    for r0 in range(0, q_length, 1024):
        q = torch.arange(r0, min(q_length, r0 + 1024), device=device)[:, None] + q_offset
        try:
            got = mask_function(zero, zero, q, kv)
        except Exception:  # a mask function that needs vmap (per-element indexing): leave it to sdpa_mask
            return False
        want = (kv <= q) & (kv > q - window)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return False
        same &= (got == want).all()
    return bool(same)


def register() -> str:
    """Registers "kernelkit" with transformers (idempotent); returns the name to pass to set_attn_implementation."""
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, mask)
    return NAME
