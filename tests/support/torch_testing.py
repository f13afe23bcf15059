"""Helpers of the PyTorch tests (tests/<family>/test_<family>_torch.py, tests/integration/): the devices and dtypes to
run on, the accuracy contract as kernelkit states it (kernelkit.tolerance, docs/tolerances.md), float64 references."""
import os
import shlex

import torch

import kernelkit

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# The one tolerance table (kernelkit/tolerance.hpp), read from the library.
RTOL = {dt: kernelkit.tolerance(dt)[0] for dt in DTYPES}
ATOL = {dt: kernelkit.tolerance(dt)[1] for dt in DTYPES}


def sanitized(cmd):
    """cmd (a list) behind KERNELKIT_CHILD_SANITIZER, for a child process that runs kernelkit's kernels (a fresh
    interpreter, the AOTI runner): scripts/gpu-check's PYTEST_SANITIZER sets it, so that the children the tests pick
    are checked by a compute-sanitizer of their own while the builds the tests start (CMake, the compilers) run
    unchecked. Unset: cmd as it is."""
    return shlex.split(os.environ.get("KERNELKIT_CHILD_SANITIZER", "")) + [str(c) for c in cmd]


def close(got, want, dtype, scale=1.0):
    """Every element within atol + rtol |want| (scale widens it for composed references that round twice)."""
    got, want = got.double(), want.double()
    bad = (got - want).abs() > scale * (ATOL[dtype] + RTOL[dtype] * want.abs())
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} elements off; worst {float((got - want).abs().max())}"


def close_attention(got, q, k, v, dtype):
    """Attention's derived bound (src/ops/attention/attention_cases.cpp): the tensor-core kernels round P to the dtype for
    the P V product, so each element may be off by rtol (|want| + m / 2) with m = sum_j p_j |v_j| / l, the float64
    attention over |v|. q [b, s, h, d], k / v [b, s_k, h_kv, d]."""
    def sdpa(vv):
        g = q.shape[2] // k.shape[2]
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).double(), k.transpose(1, 2).double().repeat_interleave(g, 1),
            vv.transpose(1, 2).double().repeat_interleave(g, 1)).transpose(1, 2)
    want, m = sdpa(v), sdpa(v.abs())
    bad = (got.double() - want).abs() > ATOL[dtype] + RTOL[dtype] * (want.abs() + m / 2)
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} elements off; worst {float((got - want).abs().max())}"


def rms_ref(x, w=None, eps=1e-6, offset=0.0):
    x = x.double()
    y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * (offset + w.double())


def ln_ref(x, w=None, b=None, eps=1e-5):
    x = x.double()
    m = x.mean(-1, keepdim=True)
    y = (x - m) / torch.sqrt((x - m).pow(2).mean(-1, keepdim=True) + eps)
    y = y if w is None else y * w.double()
    return y if b is None else y + b.double()


def rope_ref(x, cos, sin, style):
    """x [tokens, heads, d] float64; cos/sin [tokens, rot/2]: the HF formulas (rotate_half for neox)."""
    rot = 2 * cos.shape[-1]
    y = x.clone()
    c, s = cos[:, None, :], sin[:, None, :]
    if style == "neox":
        a, b = x[..., : rot // 2], x[..., rot // 2: rot]
        y[..., : rot // 2], y[..., rot // 2: rot] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        y[..., 0:rot:2], y[..., 1:rot:2] = a * c - b * s, b * c + a * s
    return y


def rand(*shape, dtype, device, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, dtype=torch.float32, device=device) * (hi - lo) + lo).to(dtype)


def fp8_runs(device):
    """FP8 ops run on the CPU backend and on CUDA GPUs with FP8 conversions (sm_89+)."""
    return device == "cpu" or torch.cuda.get_device_capability(device) >= (8, 9)


def code_bits(q):
    """A 1-byte code tensor comparable with torch.equal (e4m3 as its bytes: -0 and NaN codes compare exactly)."""
    return q.view(torch.uint8) if q.dtype == torch.float8_e4m3fn else q


def assert_dequantized_near(q, s, y, qdtype):
    """q * s against the float64 y: half a code step (int8: s / 2; e4m3: 3 mantissa bits, subnormal steps 2^-9 s),
    and the fp32 roundings of s and of y / s (2^-24 of |y| each)."""
    yd, got = y.cpu().double(), (q.cpu().double() * s.cpu().double().unsqueeze(-1))
    sd = s.cpu().double().unsqueeze(-1)
    half_step = sd / 2 if qdtype == torch.int8 else yd.abs() / 16 + sd * 2.0 ** -10
    assert ((got - yd).abs() <= half_step + yd.abs() * 2.0 ** -22).all()


def static_codes(y, scale, qdtype):
    """The codes of y at one static scale: the fp32 quotient rounded (int8: half to even) and saturated."""
    quotient = y.float() / scale
    if qdtype == torch.int8:
        return quotient.round().clamp(-127, 127).to(torch.int8)
    return quotient.clamp(-448, 448).to(torch.float8_e4m3fn)
