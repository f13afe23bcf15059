"""Helpers shared by the op families' Python wrappers."""
from __future__ import annotations

from typing import Optional

import torch


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x itself when its leading dims collapse to one row stride with a contiguous last dim (what the ops take),
    else a contiguous copy (e.g. the [batch, heads, seq, head_dim] transposed views attention code normalizes)."""
    expect = None
    for d in range(x.dim() - 2, -1, -1):
        if x.shape[d] == 1:
            continue
        if expect is not None and x.stride(d) != expect:
            return x.contiguous()
        expect = x.stride(d) * x.shape[d]
    return x if x.dim() == 0 or x.shape[-1] == 1 or x.stride(-1) == 1 else x.contiguous()


def _out_for(x: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else out
