#!/usr/bin/env python3
"""kernelkit vs PyTorch on the same inputs, in one process and one run (DESIGN.md "Benchmark protocol").

kernelkit is called through its C ABI (include/kernelkit/c_api.h, libkernelkit_c.so) with ctypes on torch's device
pointers and torch's current stream; the baselines are PyTorch eager and torch.compile of the same formula. For each op,
shape and dtype:

  1. correctness: kernelkit's output (buffers poisoned with NaN first) against a float64 torch reference of the same
     formula, every element, |got - ref| <= atol + rtol * |ref| (rtol 2^-7 bf16, 2^-10 fp16); a failing case is reported
     and not timed;
  2. GPU time: each implementation's calls, one per buffer set over all sets (sets rotate so that their total exceeds
     2x L2: cold L2; capped at 64 sets, labelled 'L2-warm' when the cap wins), each writing its set's own outputs
     (--reuse-outputs: outputs allocated at each call), captured in one CUDA graph; the median of >= 50 replays (CUDA
     events) divided by the calls per replay;
  3. host-inclusive latency: plain calls back to back, time.perf_counter() around them with a final synchronize,
     divided by the count (includes Python, ctypes and torch dispatch overhead);
  4. GB/s from the op's minimal bytes (each input read once, each output written once) and % of the device-to-device
     copy ceiling measured in the same run.

Usage (on a CUDA machine with PyTorch; build the library first, e.g. scripts/gpu-check builds build/gc-native):
  python3 bench/torch_baselines.py [--lib build/gc-native/libkernelkit_c.so] [--out DIR] [--quick] [--ops a,b]
                                   [--dtype bf16,fp16] [--shapes llm,diffusion] [--runs 100] [--commit SHA]
                                   [--tune KERNELKIT_TUNE-setting]...
  python3 bench/torch_baselines.py --self-test    # no GPU, no torch: doctests + the ctypes binding on host memory
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

try:  # optional so that the pure-Python parts (tables, formulas, the ctypes binding) run without torch
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIB = ROOT / "build" / "gc-native" / "libkernelkit_c.so"
SEED = 1234
DEVICE = "cuda"                 # where the buffers live (the timing itself needs CUDA)
MAX_SETS = 64                   # buffer sets per case, at most
COPY_BYTES = 4 << 30            # the copy ceiling copies 4 GiB (read 4 GiB + write 4 GiB)
CHECK_CHUNK = 1 << 24           # elements per float64 reference chunk (bounds the check's memory)
WARM_S = 0.05                   # seconds of graph replays before any timing (time_calls)
TOLERANCE = {"bf16": (2.0**-7, 1e-5), "fp16": (2.0**-10, 1e-5)}  # (rtol, atol)
# [batch, seq, ...] tensors (sliced by rows for the reference); "w", "b": [hidden]; "scale", "shift": [batch, hidden];
# RoPE's "pos" [batch, seq] and per-token "cos", "sin" [batch, seq, head_dim]; "cache" [max_position, head_dim]
ROW_TENSORS = ("x", "res", "out", "pos", "cos", "sin")

# Shapes as (batch, seq, hidden); LLM tokens are batch 1, rows = batch * seq.
LLM_ROWS, LLM_HIDDEN = (1, 16, 128, 333, 2048, 16384, 65536), (2048, 4096, 5120, 8192, 14336)
LLM_SHAPES = [(1, t, h) for t in LLM_ROWS for h in LLM_HIDDEN]
DIFFUSION_SHAPES = [(1, 1024, 2048), (2, 1024, 2048), (4, 1024, 2048), (2, 4096, 3072), (4, 4096, 3072)]
# The `kernelkit verify` grid (odd hidden sizes included): the target is no shape slower than F.rms_norm.
VERIFY_SHAPES = [(1, r, h) for r in (1, 7, 83, 4096) for h in (64, 111, 500, 769, 2048, 4096, 5125, 8192)]
QUICK_SHAPES = [(1, 16, 4096), (1, 2048, 4096), (1, 16384, 8192), (1, 65536, 4096), (2, 1024, 2048), (2, 4096, 3072)]


# ---- kernelkit through ctypes ----------------------------------------------------------------------------------------
class KernelkitError(RuntimeError):
    pass


class Kernelkit:
    """libkernelkit_c.so. `call(name, *args)` passes tensors as their data pointers and raises on a non-zero status."""

    _P, _I64, _I, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
    # The argument lists of include/kernelkit/c_api.h, in order.
    SIGNATURES = {
        "kk_rms_norm": [_P, _P, _P, _I64, _I64, _I64, _I64, _I, _F, _F, _I, _P],
        "kk_fused_add_rms_norm": [_P, _P, _P, _I64, _I64, _I64, _I64, _I, _F, _F, _I, _P],
        "kk_layer_norm": [_P, _P, _P, _P, _I64, _I64, _I64, _I64, _I, _F, _I, _P],
        "kk_ada_layer_norm": [_P, _P, _P, _P, _P, _P, _I64, _I64, _I64, _I64, _I64, _I, _F, _I, _P],
        "kk_rms_norm_gelu": [_P, _P, _P, _I64, _I64, _I64, _I64, _I, _F, _I, _P],
        "kk_activation": [_P, _P, _I64, _I64, _I64, _I64, _I, _I, _I, _I, _P],
        "kk_softmax": [_P, _P, _I64, _I64, _I64, _I64, _F, _I, _I64, _I, _I, _P],
        "kk_rotary_embedding": [_P, _P, _I64, _I64, _I64, _I64, _I64, _I64, _P, _P, _I64, _I64, _I, _I, _I, _P],
    }
    DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}  # KK_F32, KK_F16, KK_BF16
    STATUS = {1: "invalid_argument", 2: "unsupported", 3: "cuda_error", 4: "no_device", 5: "internal"}

    def __init__(self, path):
        self.path = str(path)
        self.lib = ctypes.CDLL(self.path)
        self.fn = {}
        for name, argtypes in self.SIGNATURES.items():
            f = getattr(self.lib, name)
            f.argtypes, f.restype = argtypes, ctypes.c_int
            self.fn[name] = f
        self.lib.kk_version.argtypes, self.lib.kk_version.restype = [], ctypes.c_int
        self.lib.kk_last_error.argtypes, self.lib.kk_last_error.restype = [], ctypes.c_char_p
        self.lib.kk_op_bytes.argtypes = [ctypes.c_char_p] + [ctypes.c_int64] * 3 + [ctypes.c_int]
        self.lib.kk_op_bytes.restype = ctypes.c_uint64
        self.version = self.lib.kk_version()

    def op_bytes(self, op, rows, hidden, batch, dtype_code):
        """Minimal bytes from kernelkit's op table (the one description of each op)."""
        return int(self.lib.kk_op_bytes(op.encode(), rows, hidden, batch, dtype_code))

    def call(self, name, *args):
        rc = self.fn[name](*(a.data_ptr() if hasattr(a, "data_ptr") else a for a in args))
        if rc:
            msg = self.lib.kk_last_error().decode(errors="replace")
            raise KernelkitError(f"{name}: {self.STATUS.get(rc, rc)}: {msg}")

    @classmethod
    def dtype(cls, t):
        return cls.DTYPE_CODES[str(t.dtype).removeprefix("torch.")]

    @staticmethod
    def where(t):
        """(device, stream) arguments for tensor t: its CUDA device and torch's current stream, looked up at every
        call (inside a CUDA graph capture it is the capture stream); (-1, NULL) for CPU tensors (the C++ reference)."""
        if t.device.type != "cuda":
            return -1, None
        return t.device.index, torch.cuda.current_stream(t.device).cuda_stream


# ---- the ops: kernelkit call, float64 reference, baselines, bytes ----------------------------------------------------
def rows_hidden(x):
    return x.shape[0] * x.shape[1], x.shape[2]


def kk_rms_norm(kk, t, eps):
    n, h = rows_hidden(t["x"])
    kk.call("kk_rms_norm", t["out"], t["x"], t["w"], n, h, h, h, kk.dtype(t["x"]), eps, 0.0, *kk.where(t["x"]))


def kk_fused_add_rms_norm(kk, t, eps):
    n, h = rows_hidden(t["x"])
    kk.call("kk_fused_add_rms_norm", t["x"], t["res"], t["w"], n, h, h, h, kk.dtype(t["x"]), eps, 0.0,
            *kk.where(t["x"]))


def kk_layer_norm(kk, t, eps):
    n, h = rows_hidden(t["x"])
    kk.call("kk_layer_norm", t["out"], t["x"], t["w"], t["b"], n, h, h, h, kk.dtype(t["x"]), eps, *kk.where(t["x"]))


def kk_ada_layer_norm(kk, t, eps):
    b, s, h = t["x"].shape
    kk.call("kk_ada_layer_norm", t["out"], t["x"], t["scale"], t["shift"], None, None, b, s, h, h, h,
            kk.dtype(t["x"]), eps, *kk.where(t["x"]))


def kk_rms_norm_gelu(kk, t, eps):
    n, h = rows_hidden(t["x"])
    kk.call("kk_rms_norm_gelu", t["out"], t["x"], t["w"], n, h, h, h, kk.dtype(t["x"]), eps, *kk.where(t["x"]))


ACT_CODES = {"gelu": 0, "gelu_tanh": 1, "silu": 2}  # KK_GELU, KK_GELU_TANH, KK_SILU
ACTS = {"gelu": lambda v: F.gelu(v), "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "silu": lambda v: F.silu(v)}


def kk_activation(name, gated):
    """kernelkit's act(x) or, gated, act(x[..., :d]) * x[..., d:] (x is [b, s, 2d] then)."""
    def call(kk, t, eps):
        n, d = rows_hidden(t["out"])
        kk.call("kk_activation", t["out"], t["x"], n, d, t["x"].shape[2], d, ACT_CODES[name], int(gated),
                kk.dtype(t["x"]), *kk.where(t["x"]))
    return call


def act_formula(name, gated):
    """The PyTorch formula (baselines, in the input dtype) and, on float64 inputs, the reference."""
    f = ACTS[name]

    def formula(x, eps):
        if not gated:
            return f(x)
        d = x.shape[-1] // 2
        return f(x[..., :d]) * x[..., d:]
    return formula


# Baseline formulas, in the activation dtype (what models run).
def hf_rms_norm(x, w, eps):  # transformers' LlamaRMSNorm
    dtype = x.dtype
    h = x.float()
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(dtype)


def torch_rms_norm(x, w, eps):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def add_rms_norm(x, res, w, eps):
    res = x + res
    return hf_rms_norm(res, w, eps), res


def torch_layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def ada_modulate(x, scale, shift, eps):
    return F.layer_norm(x, (x.shape[-1],), eps=eps) * (1 + scale[:, None]) + shift[:, None]


def rms_norm_gelu(x, w, eps):
    return F.gelu(hf_rms_norm(x, w, eps), approximate="tanh")


# float64 references of kernelkit's formulas (inputs already float64; `dtype` for the rounding points the kernel has).
def _rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _ln(x, eps):
    d = x - x.mean(-1, keepdim=True)
    return d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + eps)


def ref_rms_norm(i, eps, dtype):
    return (_rms(i["x"], eps) * i["w"],)


def ref_fused_add_rms_norm(i, eps, dtype):
    r = (i["x"] + i["res"]).to(dtype).double()  # the kernel rounds the new residual to the dtype, then normalizes it
    return _rms(r, eps) * i["w"], r


def ref_layer_norm(i, eps, dtype):
    return (_ln(i["x"], eps) * i["w"] + i["b"],)


def ref_ada_layer_norm(i, eps, dtype):
    return (_ln(i["x"], eps) * (1 + i["scale"][:, None]) + i["shift"][:, None],)


def ref_rms_norm_gelu(i, eps, dtype):
    return (F.gelu(_rms(i["x"], eps) * i["w"], approximate="tanh"),)


@dataclass(frozen=True)
class Baseline:
    name: str
    formula: Callable  # formula(*tensors, eps)
    args: tuple        # names of the set's tensors passed to it
    compiled: bool = False


@dataclass(frozen=True)
class Op:
    name: str
    eps: float
    tensors: tuple      # one buffer set
    inputs: tuple       # read by the op (saved for the reference)
    outputs: tuple      # written by kernelkit, in the reference's order (poisoned first unless also inputs)
    kernelkit: Callable  # kernelkit(kk, set, eps)
    reference: Callable  # reference(float64 inputs, eps, dtype) -> outputs
    baselines: tuple
    baseline_formula: str  # what "eager" and "compile" run, for the report
    x_width: float = 1     # the input "x" is [b, s, x_width * h] (2 for gated activations, 1.5 for RoPE's fused qkv)
    op_shape: Callable = lambda b, s, h: (b * s, h, b)  # (rows, hidden, batch) of the op's bytes in kernelkit's table
    row_block: Callable = None  # row_block(b, s, h): the reference needs whole blocks of that many rows (causal)


# ---- Liger-Kernel (optional: a pure-Python wheel over Triton; docs/benchmarking.md says how to bring it) -------------
try:
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction
    LIGER_MISSING = None
except Exception as _err:  # ImportError, or triton failing to load without a GPU
    LIGER_MISSING = f"{type(_err).__name__}: {_err}"


def liger_rms_norm(x, w, eps):  # casting_mode "llama": fp32 math, w * y.to(dtype), as HF Llama
    return LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)


def liger_fused_add_rms_norm(x, res, w, eps):
    return LigerFusedAddRMSNormFunction.apply(x, res, w, eps, 0.0, "llama", False)


def liger_layer_norm(x, w, b, eps):
    return LigerLayerNormFunction.apply(x, w, b, eps)


def liger_softmax(x, eps):  # Liger's softmax takes no scale: the same bytes and exponentials, x unscaled
    return LigerSoftmaxFunction.apply(x)


def liger_silu_and_mul(x, eps):  # silu(x[..., :d]) * x[..., d:] from the one [.., 2d] tensor, no chunk copies
    return LigerFusedGateUpSiLUMulFunction.apply(x)


def liger_version():
    """The installed Liger-Kernel's version, or why it is not used."""
    if LIGER_MISSING:
        return f"not used: {LIGER_MISSING}"
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("liger-kernel")
    except PackageNotFoundError:
        return "unknown version"


def liger(formula, args):
    """The Liger-Kernel baseline of an op as a one-element tuple, or () when Liger cannot be imported (main says so)."""
    return () if LIGER_MISSING else (Baseline("Liger", formula, args),)


def eager_and_compiled(formula, args):
    return (Baseline("eager", formula, args), Baseline("compile", formula, args, True))


SOFTMAX_SCALE = 0.125  # attention scores at head_dim 64


def kk_softmax(kk, t, eps):
    n, d = rows_hidden(t["x"])
    kk.call("kk_softmax", t["out"], t["x"], n, d, d, d, SOFTMAX_SCALE, 0, 1, kk.dtype(t["x"]), *kk.where(t["x"]))


def torch_softmax(x, eps):
    return torch.softmax(x * SOFTMAX_SCALE, -1)


def causal_sq(b, s, h):
    """Queries per score block for a suite shape [b, s, h]: square [h, h] blocks when h divides the rows, else [s, h].

    >>> causal_sq(1, 65536, 4096), causal_sq(1, 2048, 4096), causal_sq(1, 1, 4096)
    (4096, 2048, 1)
    """
    return h if (b * s) % h == 0 else s


def kk_causal_softmax(kk, t, eps):
    n, d = rows_hidden(t["x"])
    kk.call("kk_softmax", t["out"], t["x"], n, d, d, d, SOFTMAX_SCALE, 1, causal_sq(*t["x"].shape), kk.dtype(t["x"]),
            *kk.where(t["x"]))


_MASKS = {}


def causal_mask(s_q, s_k, device):
    """True where query i may not see key j (j > i + s_k - s_q: bottom-right aligned), built once per shape."""
    key = (s_q, s_k, str(device))
    if key not in _MASKS:
        i = torch.arange(s_q, device=device)[:, None]
        _MASKS[key] = torch.arange(s_k, device=device)[None, :] > i + (s_k - s_q)
    return _MASKS[key]


def torch_causal_softmax(x, eps):
    """HF eager attention's scores path on [.., s_q, h] blocks: scale, masked_fill with -inf, softmax (fully masked
    rows, where s_q > h, are NaN in torch and 0 in kernelkit)."""
    b, s, h = x.shape
    sq = causal_sq(b, s, h)
    y = (x.reshape(-1, sq, h) * SOFTMAX_SCALE).masked_fill(causal_mask(sq, h, x.device), -math.inf)
    return torch.softmax(y, -1).reshape(b, s, h)


def ref_causal_softmax(i, eps, dtype):
    # check() passes whole score blocks (Op.row_block), so each query row keeps its index within its block.
    return (torch.nan_to_num(torch_causal_softmax(i["x"], eps), nan=0.0),)


ROPE_D, ROPE_GQA, ROPE_MAX_POS = 128, 4, 8192  # heads of 128, 4 q heads per kv head (Llama 3), positions < 8192


def rope_heads(h):
    """(q heads, kv heads) of a hidden size: h / 128 query heads, a quarter of them for k and v.

    >>> rope_heads(4096)
    (32, 8)
    """
    return h // ROPE_D, h // ROPE_D // ROPE_GQA


def rope_tables(b, s, gen):
    """Positions [b, s] (token 0 at 0), the fp32 cos/sin cache [max_pos, 128] (cos | sin halves, Llama's 10000 base)
    and the per-token HF tables cos, sin [b, s, 128] (halves repeated) that the positions select."""
    dev = gen.device
    pos = torch.randint(0, ROPE_MAX_POS, (b, s), generator=gen, device=dev)
    pos[:, 0] = 0
    inv = 10000.0 ** (-torch.arange(0, ROPE_D, 2, device=dev, dtype=torch.float64) / ROPE_D)
    ang = torch.arange(ROPE_MAX_POS, device=dev, dtype=torch.float64)[:, None] * inv[None, :]
    cache = torch.cat([ang.cos(), ang.sin()], -1).float()
    half = ROPE_D // 2
    cos, sin = cache[pos][..., :half], cache[pos][..., half:]
    return {"pos": pos, "cache": cache, "cos": torch.cat([cos, cos], -1), "sin": torch.cat([sin, sin], -1)}


def kk_rope(kk, t, eps):
    x = t["x"]  # fused qkv [b, s, (heads + 2 kv) * 128], rotated in place
    b, s, w = x.shape
    heads, kv = rope_heads(w * 2 // 3)
    kk.call("kk_rotary_embedding", x, x[..., heads * ROPE_D:], b * s, heads, kv, ROPE_D, w, w, t["pos"], t["cache"],
            ROPE_MAX_POS, ROPE_D, 1, kk.dtype(x), *kk.where(x))


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat((-x2, x1), -1)


def hf_rope(x, cos, sin, eps):
    """transformers' apply_rotary_pos_emb on q and k sliced from the fused projection (returns new q, k)."""
    b, s, w = x.shape
    heads, kv = rope_heads(w * 2 // 3)
    q = x[..., :heads * ROPE_D].view(b, s, heads, ROPE_D)
    k = x[..., heads * ROPE_D:(heads + kv) * ROPE_D].view(b, s, kv, ROPE_D)
    c, sn = cos.unsqueeze(2).to(x.dtype), sin.unsqueeze(2).to(x.dtype)
    return q * c + rotate_half(q) * sn, k * c + rotate_half(k) * sn


def ref_rope(i, eps, dtype):
    x = i["x"]
    b, s, w = x.shape
    heads, kv = rope_heads(w * 2 // 3)
    q, k = hf_rope(x, i["cos"], i["sin"], eps)
    return (torch.cat([q.reshape(b, s, -1), k.reshape(b, s, -1), x[..., (heads + kv) * ROPE_D:]], -1),)


def act_op(name, gated, extra=()):
    formula = act_formula(name, gated)
    return Op(f"{name}_and_mul" if gated else name, 0.0, ("x", "out"), ("x",), ("out",), kk_activation(name, gated),
              lambda i, eps, dtype: (formula(i["x"], eps),), eager_and_compiled(formula, ("x",)) + extra,
              f"{name}(x[..., :d]) * x[..., d:]" if gated else f"{name}(x)", 2 if gated else 1)


OPS = [
    Op("rms_norm", 1e-6, ("x", "w", "out"), ("x", "w"), ("out",), kk_rms_norm, ref_rms_norm,
       eager_and_compiled(hf_rms_norm, ("x", "w")) + (Baseline("F.rms_norm", torch_rms_norm, ("x", "w")),) +
       liger(liger_rms_norm, ("x", "w")),
       "HF Llama RMSNorm (fp32 math, w * y.to(dtype)); F.rms_norm is eager"),
    Op("fused_add_rms_norm", 1e-6, ("x", "res", "w"), ("x", "res", "w"), ("x", "res"), kk_fused_add_rms_norm,
       ref_fused_add_rms_norm,
       eager_and_compiled(add_rms_norm, ("x", "res", "w")) + liger(liger_fused_add_rms_norm, ("x", "res", "w")),
       "res = x + res; HF Llama RMSNorm(res) (out of place)"),
    Op("layer_norm", 1e-5, ("x", "w", "b", "out"), ("x", "w", "b"), ("out",), kk_layer_norm, ref_layer_norm,
       eager_and_compiled(torch_layer_norm, ("x", "w", "b")) + liger(liger_layer_norm, ("x", "w", "b")),
       "F.layer_norm(x, w, b)"),
    Op("ada_layer_norm", 1e-6, ("x", "scale", "shift", "out"), ("x", "scale", "shift"), ("out",), kk_ada_layer_norm,
       ref_ada_layer_norm, eager_and_compiled(ada_modulate, ("x", "scale", "shift")),
       "F.layer_norm(x) * (1 + scale[:, None]) + shift[:, None] (no affine)"),
    Op("rms_norm_gelu", 1e-6, ("x", "w", "out"), ("x", "w"), ("out",), kk_rms_norm_gelu, ref_rms_norm_gelu,
       eager_and_compiled(rms_norm_gelu, ("x", "w")), "F.gelu(HF Llama RMSNorm(x) with w, approximate='tanh')"),
    act_op("silu", True, liger(liger_silu_and_mul, ("x",))),
    act_op("gelu", True),
    act_op("gelu_tanh", False),
    Op("softmax", 0.0, ("x", "out"), ("x",), ("out",), kk_softmax,
       lambda i, eps, dtype: (torch.softmax(i["x"] * SOFTMAX_SCALE, -1),),
       (Baseline("torch.softmax", torch_softmax, ("x",)), Baseline("compile", torch_softmax, ("x",), True)) +
       liger(liger_softmax, ("x",)),
       "torch.softmax(x * 0.125, -1); Liger: softmax(x) (it takes no scale)"),
    Op("causal_softmax", 0.0, ("x", "out"), ("x",), ("out",), kk_causal_softmax, ref_causal_softmax,
       eager_and_compiled(torch_causal_softmax, ("x",)),
       "torch.softmax((x * 0.125).masked_fill(causal mask, -inf), -1) over [b, s_q = s, s_k = h] scores",
       row_block=lambda b, s, h: s if causal_sq(b, s, h) == s else causal_sq(b, s, h)),
    Op("rotary_embedding", 0.0, ("x", "pos", "cache", "cos", "sin"), ("x", "pos", "cache", "cos", "sin"), ("x",),
       kk_rope, ref_rope, eager_and_compiled(hf_rope, ("x", "cos", "sin")),
       "HF apply_rotary_pos_emb (q * cos + rotate_half(q) * sin, and k) on views of a fused qkv [b, s, 1.5 h]; "
       "kernelkit rotates in place from the cos/sin cache and positions (h / 128 heads, GQA 4)", 1.5,
       lambda b, s, h: (b * s * sum(rope_heads(h)), ROPE_D, 1)),
]


# ---- pure helpers (no torch) -----------------------------------------------------------------------------------------
def shape_label(shape):
    """'2048x4096' for LLM tokens x hidden (batch 1), '2x4096x3072' for diffusion batch x seq x hidden.

    >>> shape_label((1, 2048, 4096)), shape_label((2, 4096, 3072))
    ('2048x4096', '2x4096x3072')
    """
    b, s, h = shape
    return f"{s}x{h}" if b == 1 and shape not in DIFFUSION_SHAPES else f"{b}x{s}x{h}"


def buffer_sets(set_bytes, l2_bytes, cap=MAX_SETS):
    """(sets, l2_cold): the fewest sets whose total exceeds 2x L2, at most `cap`; cold is False when the cap wins.

    >>> buffer_sets(1 << 30, 60 << 20)          # one 1 GiB set already exceeds 2 x 60 MiB
    (1, True)
    >>> buffer_sets(30 << 20, 60 << 20)         # 5 x 30 MiB > 120 MiB
    (5, True)
    >>> buffer_sets(4096, 60 << 20)             # tiny sets: the cap wins, L2 stays warm
    (64, False)
    """
    need = 2 * l2_bytes // set_bytes + 1
    return min(need, cap), need <= cap


def assessment(pct):
    """DESIGN.md's grades of % of the measured copy peak.

    >>> [assessment(p) for p in (85, 70, 40, 10)]
    ['excellent', 'good', 'fair', 'poor']
    """
    return "excellent" if pct > 78 else "good" if pct >= 62 else "fair" if pct >= 31 else "poor"


def fmt_us(v):
    """Microseconds with 3 significant digits (at least integer precision); '-' when missing.

    >>> [fmt_us(v) for v in (2.345, 13.27, 412.6, 12345.4, None)]
    ['2.35', '13.3', '413', '12345', '-']
    """
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def fmt_ratio(r):
    """
    >>> fmt_ratio(1.234), fmt_ratio(None)
    ('1.23x', '-')
    """
    return "-" if r is None else f"{r:.2f}x"


def md_table(headers, rows, align=""):
    """A markdown table with padded columns; `align` has one 'l' or 'r' per column (default: first left, rest right).

    >>> print(md_table(["op", "us"], [["rms_norm", "2.35"], ["ln", "13.3"]]))
    | op       |   us |
    |:---------|-----:|
    | rms_norm | 2.35 |
    | ln       | 13.3 |
    """
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    width = [max(3, *(len(r[i]) for r in cells)) for i in range(len(headers))]
    left = [(align or "l").ljust(len(headers), "r")[i] == "l" for i in range(len(headers))]

    def line(r):
        return "| " + " | ".join(c.ljust(w) if l else c.rjust(w) for c, w, l in zip(r, width, left)) + " |"

    rule = "|" + "|".join(":" + "-" * (w + 1) if l else "-" * (w + 1) + ":" for w, l in zip(width, left)) + "|"
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def best_baseline(row):
    """(name, result) of the baseline with the lowest GPU time in a result row, or (None, None).

    >>> best_baseline({"baselines": {"a": {"gpu_us": 3.0}, "b": {"gpu_us": 2.0}, "c": {"error": "x"}}})
    ('b', {'gpu_us': 2.0})
    """
    timed = [(k, v) for k, v in row.get("baselines", {}).items() if v.get("gpu_us") is not None]
    return min(timed, key=lambda kv: kv[1]["gpu_us"]) if timed else (None, None)


def op_table(op, rows):
    """The markdown table of one op's result rows, then one line per failed case."""
    names = [b.name for b in op.baselines]
    headers = ["shape", "dtype", "L2", "kernelkit us", "GB/s", "% copy peak"]
    for n in names:
        headers += [f"{n} us", f"{n} / kk"]
    headers += ["kk host us", "best baseline host us"]
    out, notes = [], []
    for r in rows:
        head = [r["label"], r["dtype"], r["l2"]]
        if r["status"] != "ok":
            out.append(head + [r["status"].upper()] + ["-"] * (len(headers) - 4))
            notes.append(f"- {r['label']} {r['dtype']}: {r['status'].upper()}: {r['error']}")
            continue
        kk = r["kernelkit"]
        pct = kk["pct_peak"]
        cells = head + [fmt_us(kk["gpu_us"]), f"{kk['gbps']:.0f}", f"{pct:.0f}% {assessment(pct)}"]
        for n in names:
            b = r["baselines"].get(n, {})
            cells += [fmt_us(b.get("gpu_us")) if "error" not in b else "error", fmt_ratio(b.get("ratio"))]
        best, res = best_baseline(r)
        cells += [fmt_us(kk["host_us"]), f"{fmt_us(res['host_us'])} ({best})" if best else "-"]
        out.append(cells)
    return "\n\n".join([md_table(headers, out, align="lll")] + (["\n".join(notes)] if notes else []))


def summary_table(rows):
    """Per op: the slowest ratio (fastest baseline / kernelkit; < 1 = kernelkit slower) over every shape and dtype.

    >>> r = {"op": "rms_norm", "label": "16x4096", "dtype": "bf16", "status": "ok", "kernelkit": {"gpu_us": 2.0,
    ...      "pct_peak": 50.0}, "baselines": {"eager": {"gpu_us": 6.0, "ratio": 3.0}}}
    >>> print(summary_table([r, dict(r, status="fail")]))
    | op       | cases ok | failed | slowest ratio | at                    | median ratio | median % copy peak |
    |:---------|---------:|-------:|--------------:|:----------------------|-------------:|-------------------:|
    | rms_norm |        1 |      1 |         3.00x | 16x4096 bf16 vs eager |        3.00x |                50% |
    """
    out = []
    for name in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == name]
        ok = [r for r in mine if r["status"] == "ok"]
        ratios = []
        for r in ok:
            best, res = best_baseline(r)
            if best:
                ratios.append((res["gpu_us"] / r["kernelkit"]["gpu_us"], f"{r['label']} {r['dtype']} vs {best}"))
        worst = min(ratios) if ratios else (None, "-")
        out.append([name, len(ok), len(mine) - len(ok), fmt_ratio(worst[0]), worst[1],
                    fmt_ratio(statistics.median(x for x, _ in ratios)) if ratios else "-",
                    f"{statistics.median(r['kernelkit']['pct_peak'] for r in ok):.0f}%" if ok else "-"])
    return md_table(["op", "cases ok", "failed", "slowest ratio", "at", "median ratio", "median % copy peak"], out,
                    align="lrrrlrr")


# ---- measurement (torch, CUDA) ---------------------------------------------------------------------------------------
def time_calls(calls, runs, host=True):
    """Per-call times of `calls` (one zero-argument callable per buffer set).

    GPU: all calls captured in one CUDA graph (after warm-up, which also compiles); the median over `runs` replays,
    each timed with CUDA events, divided by len(calls). Host: plain calls back to back, ceil(runs / len(calls)) passes,
    perf_counter around them and a final synchronize, divided by the number of calls.
    """
    stream = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(stream)
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch recommends before capture
        for _ in range(2):
            for c in calls:
                c()
    stream.wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # What the calls return stays referenced until the graph is gone: the graph's memory pool would otherwise hand the
    # block one call's output frees to the next call, whose output then overwrites lines still in L2 (their DRAM
    # writes never happen) where kernelkit writes each set's own outputs cold.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        kept = [c() for c in calls]
    # Replays for at least WARM_S before timing: right after setup the GPU's clocks and memory traffic have not
    # settled, and the first implementation timed in a shape measured up to 14% slow with a 3-replay warm-up.
    t0 = time.perf_counter()
    while True:
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= WARM_S:
            break
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    per_call = [s.elapsed_time(e) * 1e3 / len(calls) for s, e in events]  # ms -> us
    del graph, kept
    result = {"gpu_us": statistics.median(per_call), "gpu_min_us": min(per_call), "gpu_max_us": max(per_call),
              "replays": runs, "calls_per_replay": len(calls), "host_us": None}
    if host:
        passes = math.ceil(runs / len(calls))
        for c in calls:
            c()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(passes):
            for c in calls:
                c()
        torch.cuda.synchronize()
        result["host_us"] = (time.perf_counter() - t0) * 1e6 / (passes * len(calls))
        result["host_calls"] = passes * len(calls)
    return result


def copy_peak(runs=20):
    """Device-to-device copy ceiling in GB/s (bytes read + written) of a 4 GiB copy_, each run timed with CUDA events
    (as kernelkit bench does). Directions alternate so no run starts from data the previous one left in L2."""
    a = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=DEVICE).normal_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for i, (e0, e1) in enumerate(ev):
        dst, src = (b, a) if i % 2 == 0 else (a, b)
        e0.record()
        dst.copy_(src)
        e1.record()
    torch.cuda.synchronize()
    us = statistics.median(e0.elapsed_time(e1) * 1e3 for e0, e1 in ev)
    del a, b
    torch.cuda.empty_cache()
    return {"bytes": 2 * COPY_BYTES, "gpu_us": us, "gbps": 2 * COPY_BYTES / us / 1e3, "replays": runs}


INIT = {"x": (0.0, 1.0), "res": (0.0, 1.0), "w": (1.0, 0.1), "b": (0.0, 0.1), "scale": (0.0, 0.5), "shift": (0.0, 0.5)}


def make_set(op, shape, dtype, gen):
    """One independent buffer set on the generator's device: random inputs (never zeros), outputs uninitialized."""
    b, s, h = shape
    dims = {"x": (b, s, int(op.x_width * h)), "res": (b, s, h), "out": (b, s, h), "w": (h,), "b": (h,),
            "scale": (b, h), "shift": (b, h)}
    t = {}
    if "pos" in op.tensors:  # RoPE: random positions (token 0 at 0) and the cos/sin they select
        t.update(rope_tables(b, s, gen))
    for name in op.tensors:
        if name in t:
            continue
        if name in INIT:
            mean, std = INIT[name]
            t[name] = torch.randn(dims[name], generator=gen, device=gen.device).mul_(std).add_(mean).to(dtype)
        else:
            t[name] = torch.empty(dims[name], dtype=dtype, device=gen.device)
    return t


def check(op, kk, t, dtype_name):
    """Runs kernelkit once on set t and compares every output element with the float64 reference."""
    saved = {k: t[k].clone() for k in op.inputs}
    for k in op.outputs:
        if k not in op.inputs:
            t[k].fill_(float("nan"))
    op.kernelkit(kk, t, op.eps)
    if t["x"].is_cuda:
        torch.cuda.synchronize()
    rtol, atol = TOLERANCE[dtype_name]
    b, s, h = t["x"].shape
    step = max(1, CHECK_CHUNK // (b * h))
    if op.row_block:  # whole blocks of rows only
        blk = op.row_block(b, s, h)
        step = max(blk, step // blk * blk)
    bad, nonfinite, worst, first = 0, 0, 0.0, None
    for s0 in range(0, s, step):
        rows = slice(s0, s0 + step)
        inp = {k: (v[:, rows] if k in ROW_TENSORS else v).double() for k, v in saved.items()}
        for name, ref in zip(op.outputs, op.reference(inp, op.eps, t["x"].dtype)):
            got = t[name][:, rows].double()
            err, tol = (got - ref).abs(), atol + rtol * ref.abs()
            wrong = ~(err <= tol)  # NaN counts as wrong
            n = int(wrong.sum())
            if n and first is None:
                i, j, k = wrong.nonzero()[0].tolist()
                first = f"{name}[{i}, {s0 + j}, {k}] = {got[i, j, k].item():.6g}, expected {ref[i, j, k].item():.6g}"
            bad += n
            finite = torch.isfinite(got)
            nonfinite += int((~finite).sum())
            if finite.any():
                worst = max(worst, float((err / tol)[finite].max()))
    return {"ok": bad == 0, "mismatches": bad, "nonfinite": nonfinite,
            "elements": sum(t[k].numel() for k in op.outputs), "worst_err_over_tol": worst, "first_mismatch": first,
            "rtol": rtol, "atol": atol}


def bind(formula, eps):
    def fn(*tensors):
        return formula(*tensors, eps)
    return fn


def kk_calls(op, kk, sets, reuse=False):
    """One kernelkit call per buffer set, writing the set's own outputs or, with reuse, output tensors allocated at
    each call (as kernelkit's PyTorch ops do; see baseline_calls)."""
    fresh = [k for k in op.outputs if k not in op.inputs] if reuse else []

    def call(t):
        op.kernelkit(kk, dict(t, **{k: torch.empty_like(t[k]) for k in fresh}) if fresh else t, op.eps)
    return [lambda t=t: call(t) for t in sets]


def baseline_calls(fn, args, sets, reuse=False):
    """One call of a baseline per buffer set. Its outputs are returned (time_calls keeps them: each set's outputs
    have their own memory) or, with reuse, dropped: inside the capture the graph's pool then hands the block one call
    frees to the next, so every call writes the same addresses, whose lines are still in L2."""
    def call(t):
        out = fn(*(t[k] for k in args))
        return None if reuse else out
    return [lambda t=t: call(t) for t in sets]


def time_tuned(op, kk, sets, dtype_name, setting, runs, nbytes, peak_gbps, default, reuse=False):
    """kernelkit's check and GPU time with KERNELKIT_TUNE=setting (the planner reads it at every call, so the capture
    records the kernels it picks), against its default timing `default`."""
    before = os.environ.get("KERNELKIT_TUNE")
    os.environ["KERNELKIT_TUNE"] = setting
    try:
        c = check(op, kk, sets[0], dtype_name)
        if not c["ok"]:
            return {"error": f"CHECK FAILED: {c['mismatches']} of {c['elements']} elements; first: {c['first_mismatch']}"}
        r = time_calls(kk_calls(op, kk, sets, reuse), runs, host=False)
    except Exception as err:  # e.g. a setting the planner refuses for this shape
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    finally:
        if before is None:
            os.environ.pop("KERNELKIT_TUNE", None)
        else:
            os.environ["KERNELKIT_TUNE"] = before
    r["gbps"] = nbytes / r["gpu_us"] / 1e3
    r["pct_peak"] = 100 * r["gbps"] / peak_gbps
    r["speedup"] = default["gpu_us"] / r["gpu_us"]
    return r


def tuned_table(rows):
    """One line per (case, KERNELKIT_TUNE setting): its time, % of the copy ceiling and speed-up over the default."""
    out = []
    for r in rows:
        for setting, t in r.get("tuned", {}).items():
            head = [r["op"], r["label"], r["dtype"], setting, fmt_us(r["kernelkit"]["gpu_us"])]
            out.append(head + (["-", "-", t["error"]] if "error" in t else
                               [fmt_us(t["gpu_us"]), f"{t['pct_peak']:.0f}%", f"{t['speedup']:.3f}x"]))
    return md_table(["op", "shape", "dtype", "KERNELKIT_TUNE", "default us", "tuned us", "% copy peak", "speed-up"], out,
                    align="llll")


def run_case(op, shape, dtype_name, kk, runs, l2_bytes, peak_gbps, tune=(), reuse=False):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    b, s, h = shape
    row = {"op": op.name, "shape": list(shape), "label": shape_label(shape), "dtype": dtype_name, "rows": b * s,
           "hidden": h, "batch": b, "bytes": kk.op_bytes(op.name, *op.op_shape(b, s, h),
                                                         Kernelkit.DTYPE_CODES[str(dtype).removeprefix("torch.")]),
           "status": "ok",
           "error": ""}
    torch._dynamo.reset()  # one compile per case: no recompile limit across shapes, no stale graphs
    gen = torch.Generator(device=DEVICE).manual_seed(SEED)
    sets = [make_set(op, shape, dtype, gen)]
    set_bytes = sum(v.numel() * v.element_size() for v in sets[0].values())
    nsets, cold = buffer_sets(set_bytes, l2_bytes)
    row.update(set_bytes=set_bytes, sets=nsets, l2="cold" if cold else "L2-warm")
    try:
        row["check"] = check(op, kk, sets[0], dtype_name)
    except KernelkitError as err:
        return dict(row, status="error", error=str(err))
    if not row["check"]["ok"]:
        c = row["check"]
        return dict(row, status="fail", error=f"{c['mismatches']} of {c['elements']} elements outside tolerance "
                                              f"({c['nonfinite']} not finite), worst finite err/tol "
                                              f"{c['worst_err_over_tol']:.3g}; first: {c['first_mismatch']}")
    sets += [make_set(op, shape, dtype, gen) for _ in range(nsets - 1)]
    try:
        kkr = time_calls(kk_calls(op, kk, sets, reuse), runs)
    except Exception as err:  # e.g. a launch refused during capture
        return dict(row, status="error", error=f"kernelkit timing: {type(err).__name__}: {err}")
    kkr["gbps"] = row["bytes"] / kkr["gpu_us"] / 1e3
    kkr["pct_peak"] = 100 * kkr["gbps"] / peak_gbps
    row["kernelkit"] = kkr
    row["tuned"] = {setting: time_tuned(op, kk, sets, dtype_name, setting, runs, row["bytes"], peak_gbps, kkr, reuse)
                    for setting in tune}
    row["baselines"] = {}
    for base in op.baselines:
        fn = bind(base.formula, op.eps)
        if base.compiled:
            fn = torch.compile(fn, fullgraph=True, dynamic=False)
        try:
            r = time_calls(baseline_calls(fn, base.args, sets, reuse), runs)
            r["ratio"] = r["gpu_us"] / kkr["gpu_us"]
        except Exception as err:
            r = {"error": f"{type(err).__name__}: {err}"[:500]}
        row["baselines"][base.name] = r
    del sets
    torch.cuda.empty_cache()
    return row


# ---- driver ----------------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=str(DEFAULT_LIB), help="libkernelkit_c.so (default: %(default)s)")
    p.add_argument("--out", help="directory for torch_baselines.json and torch_baselines.md (default: print only)")
    p.add_argument("--commit", default="", help="commit of the kernelkit build, recorded in the results")
    p.add_argument("--runs", type=int, default=100, help="graph replays per timing, >= 50 (default: %(default)s)")
    p.add_argument("--dtype", default="bf16,fp16", help="comma list of bf16, fp16 (default: %(default)s)")
    p.add_argument("--ops", default="", help="comma list of ops (default: all: %s)" % ", ".join(o.name for o in OPS))
    p.add_argument("--shapes", default="llm,diffusion", help="comma list of llm, diffusion, verify (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="a handful of shapes: " +
                   ", ".join(shape_label(s) for s in QUICK_SHAPES))
    p.add_argument("--tune", action="append", default=[], metavar="SETTING",
                   help="also time kernelkit with KERNELKIT_TUNE=SETTING (e.g. rows_vpt=2,rows_waves=4; repeatable), "
                        "each checked first, reported beside the default")
    p.add_argument("--reuse-outputs", action="store_true",
                   help="every implementation writes outputs allocated at each call, which inside the graph's capture "
                        "reuse the block the previous call freed (L2-resident); default: each buffer set's own outputs")
    p.add_argument("--self-test", action="store_true", help="doctests and the ctypes binding on host memory (no GPU)")
    a = p.parse_args(argv)
    if a.runs < 50:
        p.error("--runs must be >= 50 (the benchmark protocol's median of >= 50 runs)")
    a.dtypes = [d.strip() for d in a.dtype.split(",") if d.strip()]
    if not a.dtypes or set(a.dtypes) - set(TOLERANCE):
        p.error(f"--dtype: expected a comma list of {', '.join(TOLERANCE)}, got {a.dtype!r}")
    names = [o.name for o in OPS]
    a.op_list = [o for o in OPS if not a.ops or o.name in a.ops.split(",")]
    if a.ops and set(a.ops.split(",")) - set(names):
        p.error(f"--ops: unknown {sorted(set(a.ops.split(',')) - set(names))}; expected some of {', '.join(names)}")
    kinds = {"llm": LLM_SHAPES, "diffusion": DIFFUSION_SHAPES, "verify": VERIFY_SHAPES}
    if set(a.shapes.split(",")) - set(kinds):
        p.error(f"--shapes: expected a comma list of llm, diffusion, verify, got {a.shapes!r}")
    a.shape_list = QUICK_SHAPES if a.quick else [s for k in a.shapes.split(",") for s in kinds[k]]
    return a


def self_test(lib_path):
    """Doctests, then every C ABI function through the ctypes binding on host buffers (device -1): no torch needed."""
    import doctest
    failed = doctest.testmod(sys.modules[__name__]).failed
    if not Path(lib_path).exists():
        print(f"self-test: {lib_path} not found: ctypes binding not tested")
        return failed == 0
    kk = Kernelkit(lib_path)

    def buf(*v):  # keep every buffer in a variable: ctypes.addressof does not keep its array alive
        return (ctypes.c_float * len(v))(*v)

    at = ctypes.addressof
    x, out, w = buf(1, 5, 5, 7), buf(0, 0, 0, 0), buf(1, 2, 0.5, -1)
    kk.call("kk_rms_norm", at(out), at(x), at(w), 1, 4, 4, 4, 0, 1e-6, 0.0, -1, None)  # rms of [1, 5, 5, 7] = 5
    ok = all(abs(o - e) < 1e-5 for o, e in zip(out, (0.2, 2, 0.5, -1.4)))
    ln_x, scale, shift = buf(4, 6, 4, 6), buf(1, 1, 1, 1), buf(2, 2, 2, 2)
    kk.call("kk_layer_norm", at(out), at(ln_x), None, None, 1, 4, 4, 4, 0, 1e-5, -1, None)  # mean 5, var 1
    ok &= all(abs(o - e) < 1e-4 for o, e in zip(out, (-1, 1, -1, 1)))
    xs, res = buf(0, 2, 4, 6), buf(1, 3, 1, 1)
    kk.call("kk_fused_add_rms_norm", at(xs), at(res), None, 1, 4, 4, 4, 0, 1e-6, 0.0, -1, None)
    ok &= list(res) == [1, 5, 5, 7] and abs(xs[3] - 1.4) < 1e-5
    kk.call("kk_ada_layer_norm", at(out), at(ln_x), at(scale), at(shift), None, None, 1, 1, 4, 4, 4, 0, 1e-5, -1,
            None)  # [-1, 1, -1, 1] * (1 + 1) + 2
    ok &= all(abs(o - e) < 1e-4 for o, e in zip(out, (0, 4, 0, 4)))
    kk.call("kk_rms_norm_gelu", at(out), at(x), None, 1, 4, 4, 4, 0, 1e-6, -1, None)
    ok &= abs(out[1] - 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * 1.044715))) < 1e-5  # gelu_tanh(1)
    try:
        kk.call("kk_rms_norm", at(out), at(x), None, 1, 4, 4, 4, 0, 0.0, 0.0, -1, None)
        ok = False
    except KernelkitError as err:
        ok &= "eps" in str(err) and "invalid_argument" in str(err)
    print(f"self-test: doctests {'ok' if not failed else f'{failed} FAILED'}; ctypes binding of {lib_path} "
          f"(kernelkit {kk.version}) {'ok' if ok else 'FAILED'}")
    return failed == 0 and ok


def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        return 0 if self_test(args.lib) else 1
    if torch is None or not torch.cuda.is_available():
        print("torch_baselines: needs PyTorch with a CUDA device", file=sys.stderr)
        return 2
    if not Path(args.lib).exists():
        print(f"torch_baselines: {args.lib} not found; build it, e.g. cmake -S . -B build/gc-native -G Ninja "
              "-DKERNELKIT_CUDA_ARCHS=native && ninja -C build/gc-native kernelkit_c", file=sys.stderr)
        return 2
    kk = Kernelkit(args.lib)  # after torch: the library then shares torch's already-loaded libcudart
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = props.L2_cache_size
    peak = copy_peak()
    meta = {"gpu": props.name, "sms": props.multi_processor_count, "l2_bytes": l2, "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": args.commit, "kernelkit_version": kk.version, "lib": kk.path, "copy_peak": peak,
            "protocol": {"runs": args.runs, "max_sets": MAX_SETS, "tolerance": TOLERANCE, "seed": SEED,
                         "gpu_time": "CUDA graph of one call per buffer set, median replay / calls",
                         "host_time": "perf_counter around plain calls + synchronize, / calls",
                         "outputs": "allocated at each call, reused" if args.reuse_outputs else "each set's own"}}
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass
    print(f"{props.name}, torch {torch.__version__}, L2 {l2 >> 20} MiB, copy peak {peak['gbps']:.0f} GB/s",
          file=sys.stderr)
    meta["liger"] = liger_version()
    if LIGER_MISSING:
        print(f"torch_baselines: Liger-Kernel not importable ({LIGER_MISSING}): its columns are left out "
              "(docs/benchmarking.md: bring its wheel)", file=sys.stderr)

    cases = [(op, s, d) for op in args.op_list for d in args.dtypes for s in args.shape_list]
    rows = []
    for n, (op, shape, dt) in enumerate(cases, 1):
        r = run_case(op, shape, dt, kk, args.runs, l2, peak["gbps"], args.tune, args.reuse_outputs)
        rows.append(r)
        if r["status"] == "ok":
            best, res = best_baseline(r)
            tail = f", best baseline {best} {fmt_us(res['gpu_us'])} us ({fmt_ratio(res['ratio'])})" if best else ""
            msg = f"kk {fmt_us(r['kernelkit']['gpu_us'])} us, {r['kernelkit']['pct_peak']:.0f}% of copy peak{tail}"
        else:
            msg = f"{r['status'].upper()}: {r['error']}"
        print(f"[{n}/{len(cases)}] {op.name} {r['label']} {dt}: {msg}", file=sys.stderr, flush=True)

    parts = [f"# kernelkit vs PyTorch: {props.name}",
             f"torch {torch.__version__}, kernelkit {kk.version}, commit {args.commit or '?'}, {meta['date']}; "
             f"copy peak {peak['gbps']:.0f} GB/s (4 GiB copy_); L2 {l2 >> 20} MiB; GPU us = median of {args.runs} "
             "CUDA-graph replays per call; ratio = baseline / kernelkit (> 1: kernelkit faster)."]
    for op in args.op_list:
        mine = [r for r in rows if r["op"] == op.name]
        if mine:
            parts += [f"## {op.name}", f"baselines: {op.baseline_formula}", op_table(op, mine)]
    if args.tune:
        parts += ["## kernelkit under KERNELKIT_TUNE (docs/benchmarking.md)", tuned_table(rows)]
    parts += ["## Summary: slowest ratio per op (fastest baseline / kernelkit)", summary_table(rows)]
    report = "\n\n".join(parts) + "\n"
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "torch_baselines.md").write_text(report)
        (out / "torch_baselines.json").write_text(json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from compare_chart import write_chart  # ratio bars per op and shape (kernelkit vs each baseline)
        write_chart([{"meta": meta, "results": rows}], out / "torch_baselines.svg")
        print(f"wrote {out / 'torch_baselines.md'}, .json and .svg", file=sys.stderr)
    sys.stderr.flush()
    print(report)  # the summary table is its last part
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
