"""The activation ops from PyTorch against a float64 formula, CPU and CUDA."""
import pytest
import torch

import kernelkit
from torch_testing import (DEVICES, DTYPES, assert_dequantized_near, close, code_bits, fp8_runs, rand,
                           static_codes)


ACTS = {"gelu": lambda v: torch.nn.functional.gelu(v), "silu": torch.nn.functional.silu,
        "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh")}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 111, 4096])
def test_activations_match_float64(device, dtype, d):
    torch.manual_seed(d)
    x = rand(7, 2 * d, dtype=dtype, device=device, lo=-4, hi=4)
    a, b = x[:, :d], x[:, d:]  # strided views: rows 2d apart
    for name, f in ACTS.items():
        close(getattr(kernelkit, name)(a), f(a.double()).to(dtype), dtype)
        close(getattr(kernelkit, name + "_and_mul")(x), (f(a.double()) * b.double()).to(dtype), dtype)
    close(kernelkit.geglu(a, b), (ACTS["gelu"](a.double()) * b.double()).to(dtype), dtype)
    close(kernelkit.swiglu(a, b), (ACTS["silu"](a.double()) * b.double()).to(dtype), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    x = torch.randn(6, 96, device=device)
    for op, args in [
        (kernelkit.ops.activation.default, (torch.empty_like(x), x, "gelu_tanh")),
        (kernelkit.ops.act_and_mul.default, (torch.empty(6, 48, device=device), x, "silu")),
        (kernelkit.ops.act_mul.default, (torch.empty_like(x), x, torch.randn_like(x), "gelu")),
    ]:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("qdtype", [torch.int8, torch.float8_e4m3fn])
@pytest.mark.parametrize("d", [64, 769, 14336])
def test_silu_and_mul_quant_equals_silu_and_mul_then_quantize(device, dtype, qdtype, d):
    """SwiGLU + quantization equals kernelkit's silu_and_mul then quantize_per_token bit for bit (codes and scales),
    and q * s is the float64 silu(a) b (rounded to the dtype) within half a code step; strided rows are taken."""
    if qdtype == torch.float8_e4m3fn and not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    torch.manual_seed(d)
    x = rand(2, 5, 2 * d, dtype=dtype, device=device, lo=-4.0, hi=4.0)
    wide = rand(10, 2 * d + 16, dtype=dtype, device=device, lo=-4.0, hi=4.0)
    for inp in (x, wide[:, : 2 * d]):
        q, s = kernelkit.silu_and_mul_quant(inp, dtype=qdtype)
        assert q.shape == inp.shape[:-1] + (d,) and q.dtype == qdtype
        assert s.shape == inp.shape[:-1] and s.dtype == torch.float32
        y = kernelkit.silu_and_mul(inp)
        q_want, s_want = kernelkit.quantize_per_token(y.reshape(-1, d), dtype=qdtype)
        assert torch.equal(code_bits(q).reshape(-1, d), code_bits(q_want)) and torch.equal(s.reshape(-1), s_want)
        assert_dequantized_near(q, s, y, qdtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qdtype", [torch.int8, torch.float8_e4m3fn])
def test_silu_and_mul_quant_static_scale(device, qdtype):
    """A static (calibrated) scale is read and returned unchanged: q = y / s to the nearest code, saturating."""
    if qdtype == torch.float8_e4m3fn and not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    x = rand(33, 2000, dtype=torch.bfloat16, device=device, lo=-3.0, hi=3.0)
    qmax = 127.0 if qdtype == torch.int8 else 448.0
    scale = torch.tensor([2.5 / qmax], device=device)  # |y| past 2.5 saturates
    q, s = kernelkit.silu_and_mul_quant(x, dtype=qdtype, scale=scale)
    assert s is scale and s.item() == pytest.approx(2.5 / qmax)
    assert torch.equal(code_bits(q), code_bits(static_codes(kernelkit.silu_and_mul(x), scale, qdtype)))
    assert (q.float().abs() == qmax).any()  # the saturation was exercised


@pytest.mark.parametrize("device", DEVICES)
def test_silu_and_mul_quant_bad_input(device):
    x = torch.randn(4, 64, device=device)
    with pytest.raises(ValueError, match=r"x dtype f32 is not supported \(expected f16 or bf16\)"):
        kernelkit.silu_and_mul_quant(x, dtype=torch.int8)
    with pytest.raises(ValueError, match="dtype must be torch.int8 or torch.float8_e4m3fn"):
        kernelkit.silu_and_mul_quant(x.half(), dtype=torch.float16)
    with pytest.raises(ValueError, match="multiple of 2"):
        kernelkit.silu_and_mul_quant(x.half()[:, :63], dtype=torch.int8)
    with pytest.raises(ValueError, match=r"scales must be contiguous with 1 element \(the static scale\)"):
        kernelkit.silu_and_mul_quant(x.half(), dtype=torch.int8, scale=torch.ones(2, device=device))
    with pytest.raises(ValueError, match=r"x must be \[\.\.\., 2d\]"):
        kernelkit.silu_and_mul_quant(torch.tensor(1.0, device=device).half(), dtype=torch.int8)


@pytest.mark.parametrize("device", DEVICES)
def test_silu_and_mul_quant_opcheck_and_compile(device):
    x = torch.randn(6, 192, device=device, dtype=torch.float16)
    q, s = torch.empty(6, 96, dtype=torch.int8, device=device), torch.empty(6, device=device)
    for args in [(q, s, x, False), (q, torch.full((1,), 0.02, device=device), x, True)]:
        torch.library.opcheck(kernelkit.ops.silu_and_mul_quant.default, args)
    torch._dynamo.reset()
    qdtype = torch.float8_e4m3fn if fp8_runs(device) else torch.int8

    def mlp_tail(gate_up):  # SwiGLU ahead of an FP8 down projection
        return kernelkit.silu_and_mul_quant(gate_up * 2.0, dtype=qdtype)

    eager = mlp_tail(x)
    compiled = torch.compile(mlp_tail, fullgraph=True, backend="aot_eager")(x)
    for a, b in zip(eager, compiled):
        assert torch.equal(code_bits(a), code_bits(b))
