"""Helpers shared by the op families' Python wrappers."""
from __future__ import annotations

import warnings
from typing import Optional

import torch

from ._ops import ops


try:  # the eager fast path of the most called ops (torch-ext/fast/fast.cpp)
    from . import _kernelkit_fast as _fast
except ImportError:  # built without Python's headers (or for another Python): torch.ops alone
    _fast = None
# True while Dynamo traces (it folds the call), where the wrappers keep to torch.ops: the fast path is for eager calls.
_compiling = torch.compiler.is_compiling


def _eager_ops():
    """Where a destination-passing op is called: the fast path's module (the same ops, the same arguments) for an eager
    call, torch.ops' namespace where Dynamo traces or the fast path is absent."""
    return _fast if _fast and not _compiling() else ops


def _fast_for(x: torch.Tensor):
    """The fast path's module for an eager call on a contiguous x, whose output it allocates like x (torch.empty_like's
    layout); else None, and the wrapper takes _rows and torch.ops."""
    return _fast if _fast and x.is_contiguous() and not _compiling() else None


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x itself when its leading dims collapse to one row stride with a contiguous last dim (what the ops take),
    else a contiguous copy (e.g. the [batch, heads, seq, head_dim] transposed views attention code normalizes)."""
    if x.is_contiguous():  # the common case, in one call: this runs on every eager op call
        return x
    expect = None
    for d in range(x.dim() - 2, -1, -1):
        if x.shape[d] == 1:
            continue
        if expect is not None and x.stride(d) != expect:
            return x.contiguous()
        expect = x.stride(d) * x.shape[d]
    return x if x.dim() == 0 or x.shape[-1] == 1 or x.stride(-1) == 1 else x.contiguous()


def _out_for(x: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    if out is not None:
        return out
    # empty_like keeps a contiguous x's layout; parsing memory_format costs about a microsecond a call.
    return torch.empty_like(x) if x.is_contiguous() else torch.empty_like(x, memory_format=torch.contiguous_format)


def _dims(op: str, arg: str, t: torch.Tensor, dims, what: str) -> None:
    """Refuses a tensor whose rank is not in `dims` (an int, a range or a tuple), naming the op, the argument and the
    expected shape, before any indexing of its shape can fail less clearly."""
    ok = t.dim() in dims if isinstance(dims, (range, tuple)) else t.dim() >= dims
    if not ok:
        raise ValueError(f"{op}: {arg} must be {what}, got a {t.dim()}-dim tensor of shape {tuple(t.shape)}")


_grad_warned = False


def _inference_only(op: str, *tensors: Optional[torch.Tensor]) -> None:
    """Warns once a process when an op is called with grad mode on and an input that requires grad: kernelkit's ops
    have no backward, so their outputs carry no grad_fn."""
    global _grad_warned
    if _grad_warned or not torch.is_grad_enabled():
        return
    for t in tensors:  # a plain loop: a generator costs more than the check on this per-call path
        if t is None or not t.requires_grad:
            continue
        _grad_warned = True
        warnings.warn(f"kernelkit.{op}: kernelkit ops are inference-only (no backward): the output carries no "
                      "grad_fn; call it under torch.no_grad() or torch.inference_mode()", stacklevel=3)
        return


def _quant_outputs(name: str, x: torch.Tensor, dtype: torch.dtype, scale: Optional[torch.Tensor],
                   width: Optional[int] = None):
    """The outputs of an op fused with quantization: q in x's leading dims and `width` (default: x's last dim)
    elements a row, and the scales: one a row written, or the given static scale (read)."""
    if dtype not in (torch.int8, torch.float8_e4m3fn):
        raise ValueError(f"{name}: dtype must be torch.int8 or torch.float8_e4m3fn, got {dtype}")
    q = torch.empty(x.shape[:-1] + (x.shape[-1] if width is None else width,), dtype=dtype, device=x.device)
    if scale is not None:
        return q, scale
    return q, torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
