"""Prefill and decode attention (src/ops/attention/)."""
from __future__ import annotations

from typing import Optional

import torch

from ._common import _dims, _eager_ops, _inference_only

__all__ = ["attention", "decode_attention", "write_kv_cache"]
# The torch.ops.kernelkit ops these functions call (fake implementations are registered for them).
_OPS = ("attention", "decode_attention", "write_kv_cache")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: Optional[float] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
              cu_seqlens_k: Optional[torch.Tensor] = None, return_lse: bool = False,
              max_seqlen_q: Optional[int] = None, max_seqlen_k: Optional[int] = None, window_left: int = -1,
              softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
              k_scale: Optional[torch.Tensor] = None, v_scale: Optional[torch.Tensor] = None):
    """out = softmax(scale q k^T [causal]) v, FlashAttention-style (float16 / bfloat16; head_dim a multiple of 8 up to
    256).

    q [b, s_q, h, d], k and v [b, s_k, h_kv, d] with h % h_kv == 0 (GQA / MQA); any strides with a contiguous last dim
    (so a [b, h, s, d] tensor passes as .transpose(1, 2)). causal: query i sees keys j <= i + s_k - s_q (bottom-right).
    Packed variable lengths: q [total_q, h, d], k, v [total_k, h_kv, d] with int32 cu_seqlens_q / cu_seqlens_k
    [batch + 1]; max_seqlen_q / max_seqlen_k (both or neither): the longest sequence's query / key tokens, or more.
    Without them a CUDA call reads cu_seqlens back (one synchronization) to check them and size the grid; with them it
    reads nothing back (CUDA-graph capturable) and the kernels check the entries on the device: a bad one skips its
    sequence and is raised by kernelkit.check_errors() (at the call in debug mode). scale defaults to 1 / sqrt(d).
    window_left >= 0: a sliding window, query at position p sees keys from p - window_left; softcap > 0: each scaled
    score s becomes softcap tanh(s / softcap) (Gemma 2); alibi_slopes (float32 [h] or [b, h], BLOOM / MPT): the
    score of the query at position p and key j gets -slope |p - j| (after the soft-cap); all compose with causal,
    GQA and varlen.
    FP8 K / V (an e4m3 KV cache read by the prefill): k and v torch.float8_e4m3fn with float32 k_scale and v_scale,
    [1] or [h_kv] (stored code * scale = value), as decode_attention takes them. On CUDA (sm_89+; head_dim a multiple
    of 16) they are dequantized into a temporary of q's dtype first (one extra pass over K / V, each value rounded
    once to q's dtype), then the prefill runs as usual.
    Returns out, or (out, lse) with lse float32 [b, h, s_q] ([h, total_q] when packed), the natural-log sum of exp
    of each query's scaled scores (-inf where it sees no key).
    """
    _inference_only("attention", q, k, v)
    if cu_seqlens_q is not None:
        _dims("attention", "q", q, (3,), "[total_q, heads, head_dim] with cu_seqlens_q")
    else:
        _dims("attention", "q", q, (4,), "[batch, s_q, heads, head_dim]")
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = None
    if return_lse:
        shape = (q.shape[1], q.shape[0]) if cu_seqlens_q is not None else (q.shape[0], q.shape[2], q.shape[1])
        lse = torch.empty(shape, dtype=torch.float32, device=q.device)
    _eager_ops().attention(out, lse, q, k, v, 0.0 if scale is None else scale, causal, cu_seqlens_q, cu_seqlens_k,
                           max_seqlen_q, max_seqlen_k, window_left, softcap, alibi_slopes, k_scale, v_scale)
    return (out, lse) if return_lse else out


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_table: Optional[torch.Tensor] = None, seqlens_k: Optional[torch.Tensor] = None,
                     causal: bool = False, scale: Optional[float] = None, return_lse: bool = False,
                     window_left: int = -1, softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
                     k_scale: Optional[torch.Tensor] = None, v_scale: Optional[torch.Tensor] = None):
    """Decode attention: q [b, s_q, h, d] (a few new tokens per sequence) against a KV cache, split across blocks.

    Contiguous cache: k_cache, v_cache [b, capacity, h_kv, d]. Paged: [num_pages, page_size, h_kv, d] (page_size a
    power of two up to 256) with an int32 block_table [b, max_pages]. seqlens_k int32 [b]: the valid keys of each
    sequence (required when paged; default: the whole capacity). causal: the s_q queries are the last s_q positions
    of their sequence. window_left / softcap / alibi_slopes as in `attention`. Returns out, or (out, lse) with lse
    float32 [b, h, s_q].
    FP8 cache (vLLM's / FlashInfer's kv_cache_dtype "fp8_e4m3"): k_cache and v_cache torch.float8_e4m3fn (q stays
    float16 / bfloat16) with float32 k_scale and v_scale, each [1] (per tensor) or [h_kv] (per KV head): stored code *
    scale = value. Half the bytes of a 16-bit cache; on CUDA it needs FP8 hardware (sm_89+: H100 / H200) and head_dim a
    multiple of 16. write_kv_cache fills such a cache.
    """
    _inference_only("decode_attention", q, k_cache, v_cache)
    _dims("decode_attention", "q", q, (4,), "[batch, s_q, heads, head_dim]")
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device) if return_lse else None
    _eager_ops().decode_attention(out, lse, q, k_cache, v_cache, block_table, seqlens_k,
                                  0.0 if scale is None else scale, causal, window_left, softcap, alibi_slopes, k_scale,
                                  v_scale)
    return (out, lse) if return_lse else out


def write_kv_cache(k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   slot_mapping: torch.Tensor, q: Optional[torch.Tensor] = None,
                   positions: Optional[torch.Tensor] = None, cos_sin_cache: Optional[torch.Tensor] = None,
                   style: str = "neox", q_out: Optional[torch.Tensor] = None, k_scale: Optional[torch.Tensor] = None,
                   v_scale: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
    """Writes the new tokens' keys and values into their KV cache slots (vLLM's reshape_and_cache), in place.

    k, v [tokens, h_kv, d] (strided views of a fused qkv projection are fine); k_cache, v_cache as decode_attention
    takes them: [b, capacity, h_kv, d] (slot = b * capacity + position) or paged [num_pages, page_size, h_kv, d]
    (slot = page * page_size + offset, the physical page). slot_mapping int32 / int64 [tokens]: each token's slot, -1
    to skip it (padding). Values are copied exactly. A slot outside the cache is never written: on the CPU the call
    raises ValueError; on CUDA it is raised by kernelkit.check_errors() (at the call in debug mode).
    With q, positions and cos_sin_cache (as rotary_embedding takes them; style "neox" or "gptj") RoPE is fused: one
    kernel rotates q (in place, or into q_out) and k (on its way into the cache; k itself is left as it is). Returns
    the rotated q, or None without RoPE.
    FP8 caches (torch.float8_e4m3fn, as decode_attention takes them): k and v are quantized on the way in, code =
    e4m3(value / scale) saturated to +-448, with float32 k_scale and v_scale ([1] or [h_kv], finite and > 0; on CUDA a
    bad one is raised by kernelkit.check_errors()).
    """
    if style not in ("neox", "gptj"):
        raise ValueError(f"write_kv_cache: style must be 'neox' or 'gptj', got {style!r}")
    _inference_only("write_kv_cache", k, v, k_cache, v_cache)
    _dims("write_kv_cache", "k", k, (3,), "[tokens, kv_heads, head_dim]")
    rope = (q, positions, cos_sin_cache)
    if any(t is not None for t in rope) and not all(t is not None for t in rope):
        raise ValueError("write_kv_cache: RoPE needs q, positions and cos_sin_cache together")
    if q is not None and q_out is None:
        q_out = q
    _eager_ops().write_kv_cache(k_cache, v_cache, k, v, slot_mapping, q_out, q, positions, cos_sin_cache,
                                style == "neox", k_scale, v_scale)
    return q_out
