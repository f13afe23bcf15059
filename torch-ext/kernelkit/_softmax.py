"""softmax and causal softmax over the last dim (src/ops/softmax/)."""
from __future__ import annotations

from typing import Optional

import torch

from ._common import _fast_for, _inference_only, _out_for, _rows
from ._ops import ops

__all__ = ["softmax"]
# The torch.ops.kernelkit ops these functions call (fake implementations are registered for them).
_OPS = ("softmax",)


def softmax(x: torch.Tensor, scale: float = 1.0, causal: bool = False,
            out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = softmax(scale * x) over the last dim, fp32 statistics; a row that is all -inf gives zeros (not NaN).

    causal=True: x is attention scores [..., s_q, s_k]; query i sees keys j <= i + s_k - s_q (bottom-right aligned),
    masked entries are 0.
    """
    _inference_only("softmax", x)
    if fast := _fast_for(x):
        return fast.softmax(x, scale, causal, out)
    x = _rows(x)
    out = _out_for(x, out)
    ops.softmax(out, x, scale, causal)
    return out
