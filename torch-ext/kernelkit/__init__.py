"""kernelkit: fused inference kernels for T4, A100 and H100/H200, as PyTorch custom ops.

Every function takes tensors on the CPU (the fp64-accumulating reference, one rounding per output) or on a CUDA device
(the kernels, on the current stream), with fp32 accumulation for float32, float16 and bfloat16 inputs (no bfloat16 on a
T4). Each is a registered op (`torch.ops.kernelkit.*`) with a fake implementation, so torch.compile(fullgraph=True) and
CUDA graphs work. `out` (destination-passing) is allocated when not given. The functions live with their op family
(`_norm`, `_activation`, `_softmax`, `_rope`, `_attention`, `_quant`); the registry (include/kernelkit/ops.def) names
them, and a CPU test checks that it and these modules agree.
"""
from __future__ import annotations

import torch

from . import _activation, _attention, _norm, _quant, _rope, _softmax
from ._activation import *  # noqa: F401,F403
from ._attention import *  # noqa: F401,F403
from ._norm import *  # noqa: F401,F403
from ._ops import VERSION as __version__
from ._ops import add_op_namespace_prefix, ops
from ._quant import *  # noqa: F401,F403
from ._rope import *  # noqa: F401,F403
from ._softmax import *  # noqa: F401,F403

_FAMILIES = (_norm, _activation, _softmax, _rope, _attention, _quant)
_OPS = tuple(op for family in _FAMILIES for op in family._OPS)

__all__ = [name for family in _FAMILIES for name in family.__all__] + [
    "tolerance", "quantize", "info", "ops", "patch", "unpatch", "kernel_mapping", "mark_for_kernelize", "layers", "nn"]


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """The accuracy contract (docs/tolerances.md) for float32, float16 or bfloat16 outputs: (rtol, atol), such that
    every element satisfies |got - want| <= atol + rtol |want| against the float64 reference rounded once to dtype."""
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"tolerance: dtype must be torch.float32, torch.float16 or torch.bfloat16, got {dtype}")
    return tuple(ops.tolerance(dtype))


def info() -> dict:
    """What this build of kernelkit is and sees: its version, the op library, the CUDA architectures its kernels were
    compiled for (empty: no CUDA kernels), torch's view of CUDA, and the registered ops."""
    from ._ops import _LIB, CUDA_ARCHS

    return {
        "version": __version__,
        "library": str(_LIB),
        "cuda_kernels": bool(CUDA_ARCHS),
        "cuda_archs": CUDA_ARCHS.split(";") if CUDA_ARCHS else [],
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "ops": sorted(_OPS),
    }


# Fake (meta) implementations: every op writes into tensors it was given and returns nothing, so there is no output
# to describe; registering them lets torch.compile trace the ops without running them.
def _register_fakes() -> None:
    def nothing(*args, **kwargs):
        return None

    for name in _OPS:
        torch.library.register_fake(add_op_namespace_prefix(name))(nothing)


_register_fakes()

from . import layers  # noqa: E402  (layers use the functions above)
from .patch import kernel_mapping, mark_for_kernelize, patch, unpatch  # noqa: E402
from . import nn  # noqa: E402
from .nn import quantize  # noqa: E402
