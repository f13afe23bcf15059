"""Rotary position embedding (src/ops/rope/)."""
from __future__ import annotations

from typing import Optional

import torch

from ._common import _dims, _eager_ops, _inference_only
from ._ops import ops

__all__ = ["rotary_embedding"]
# The torch.ops.kernelkit ops these functions call (fake implementations are registered for them).
_OPS = ("rotary_embedding_", "rotary_embedding_cos_sin_")


def rotary_embedding(q: torch.Tensor, k: torch.Tensor, positions: Optional[torch.Tensor] = None,
                     cos_sin_cache: Optional[torch.Tensor] = None, cos: Optional[torch.Tensor] = None,
                     sin: Optional[torch.Tensor] = None, rot_dim: Optional[int] = None, style: str = "neox",
                     inplace: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position embedding of q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim] (strided views of a
    fused qkv projection are fine): each rotated pair (x_i, x_j) becomes (x_i cos - x_j sin, x_j cos + x_i sin).

    cos/sin come either from `cos_sin_cache` [max_position, rot_dim] (cos in the first half) indexed by `positions`
    [tokens] (vLLM / FlashInfer), or from per-token `cos`, `sin` [tokens, rot_dim/2 or rot_dim] (HF, and 3D video RoPE).
    style: "neox" pairs (i, i + rot_dim/2) (rotate_half), "gptj" pairs (2i, 2i + 1). Partial rotary when rot_dim <
    head_dim. In place by default; inplace=False rotates copies. Returns (q, k).
    """
    if style not in ("neox", "gptj"):
        raise ValueError(f"rotary_embedding: style must be 'neox' or 'gptj', got {style!r}")
    _inference_only("rotary_embedding", q, k)
    _dims("rotary_embedding", "q", q, (3,), "[tokens, heads, head_dim]")
    if not inplace:
        q, k = q.clone(), k.clone()
    neox = style == "neox"
    if cos_sin_cache is not None:
        if positions is None:
            raise ValueError("rotary_embedding: cos_sin_cache needs positions")
        _eager_ops().rotary_embedding_(positions, q, k, cos_sin_cache, neox)
    else:
        if cos is None or sin is None:
            raise ValueError("rotary_embedding: pass cos_sin_cache and positions, or cos and sin")
        ops.rotary_embedding_cos_sin_(q, k, cos, sin, rot_dim if rot_dim is not None else q.shape[-1], neox)
    return q, k
