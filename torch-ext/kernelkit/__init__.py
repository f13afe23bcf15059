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
    "tolerance", "check_errors", "set_debug_checks", "debug_checks", "quantize", "info", "ops", "patch", "unpatch",
    "kernel_mapping", "kernel_config", "mark_for_kernelize", "layers", "nn", "formats", "tp"]


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """The accuracy contract (docs/tolerances.md) for float32, float16 or bfloat16 outputs: (rtol, atol), such that
    every element satisfies |got - want| <= atol + rtol |want| against the float64 reference rounded once to dtype."""
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"tolerance: dtype must be torch.float32, torch.float16 or torch.bfloat16, got {dtype}")
    return tuple(ops.tolerance(dtype))


def check_errors(device: int | str | torch.device | None = None) -> None:
    """Raises ValueError for the first out-of-range index a kernel met on the device since the last check (a paged
    cache's block_table or seqlens_k, RoPE positions, write_kv_cache's slots, linear_weight_only's perm: the kernels
    never follow one, they skip or clamp the work behind it and record it), naming the op, the argument, the index,
    its value and the bound, or for an inf / NaN that an activation quantizer (quantize_per_token,
    quantize_per_tensor, quantize_per_token_group) met, the row, or for a static scale that is not finite and > 0, its
    value; and clears the record. It waits for the device (not inside a CUDA-graph capture); nothing to do without
    CUDA. device: an index, "cuda:1", a torch.device, or None for the current device."""
    if not torch.cuda.is_available():
        return
    if device is None:
        index = torch.cuda.current_device()
    else:
        dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if dev.type != "cuda":
            raise ValueError(f"check_errors: device must be a CUDA device, got {dev}")
        index = torch.cuda.current_device() if dev.index is None else dev.index
    ops.check_errors(index)


def set_debug_checks(on: bool) -> None:
    """Debug mode: every CUDA op waits for its stream and runs check_errors, so a bad index raises at the call that
    passed it (while a stream is being captured into a CUDA graph the check is skipped). Also KERNELKIT_CHECK=1."""
    ops.set_debug_checks(bool(on))


def debug_checks() -> bool:
    """Whether debug mode (set_debug_checks, KERNELKIT_CHECK=1) is on."""
    return bool(ops.debug_checks())


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
from .patch import kernel_config, kernel_mapping, mark_for_kernelize, patch, unpatch  # noqa: E402
from . import formats  # noqa: E402  (the GPTQ / AWQ checkpoint formats)
from . import nn  # noqa: E402
from .nn import quantize  # noqa: E402
from . import tp  # noqa: E402  (tensor parallelism over torch.distributed)
