"""The norm ops from PyTorch against a float64 formula, CPU and CUDA."""
import pytest
import torch

import kernelkit
from torch_testing import (DEVICES, DTYPES, assert_dequantized_near, close, code_bits, fp8_runs, ln_ref, rand,
                           rms_ref, static_codes)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", [64, 111, 769, 4096])
def test_norms_match_float64(device, dtype, hidden):
    torch.manual_seed(hidden)
    x = rand(7, hidden, dtype=dtype, device=device) + 0.3
    w = rand(hidden, dtype=dtype, device=device, lo=0.5, hi=1.5)
    b = rand(hidden, dtype=dtype, device=device, lo=-0.5, hi=0.5)
    close(kernelkit.rms_norm(x, w, 1e-6), rms_ref(x, w).to(dtype), dtype)
    close(kernelkit.rms_norm(x, None, 1e-6), rms_ref(x).to(dtype), dtype)
    close(kernelkit.rms_norm(x, w, 1e-6, weight_offset=1.0), rms_ref(x, w, offset=1.0).to(dtype), dtype)
    close(kernelkit.layer_norm(x, w, b, 1e-5), ln_ref(x, w, b).to(dtype), dtype, scale=2.0)
    gelu = torch.nn.functional.gelu(rms_ref(x, w), approximate="tanh")
    close(kernelkit.rms_norm_gelu(x, w, 1e-6), gelu.to(dtype), dtype, scale=2.0)
    # fused add: residual = round(x + residual); x = rms_norm(residual)
    r = rand(7, hidden, dtype=dtype, device=device)
    r_want = (x.double() + r.double()).to(dtype)
    xo, ro = kernelkit.fused_add_rms_norm(x.clone(), r.clone(), w, 1e-6)
    assert torch.equal(ro, r_want)
    close(xo, rms_ref(r_want, w).to(dtype), dtype)
    # ada: layer_norm(x) * (1 + scale[b]) + shift[b]
    xa = rand(2, 5, hidden, dtype=dtype, device=device)
    sc, sh = rand(2, hidden, dtype=dtype, device=device), rand(2, hidden, dtype=dtype, device=device)
    want = ln_ref(xa, eps=1e-6) * (1 + sc.double()[:, None]) + sh.double()[:, None]
    close(kernelkit.ada_layer_norm(xa, sc, sh, eps=1e-6), want.to(dtype), dtype, scale=3.0)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    x = torch.randn(6, 96, device=device)
    w = torch.rand(96, device=device) + 0.5
    b = torch.randn(96, device=device)
    xa = torch.randn(2, 3, 96, device=device)
    sc, sh = torch.randn(2, 96, device=device), torch.randn(2, 96, device=device)
    for op, args in [
        (kernelkit.ops.rms_norm.default, (torch.empty_like(x), x, w, 1e-6, 0.0)),
        (kernelkit.ops.rms_norm.default, (torch.empty_like(x), x, None, 1e-6, 1.0)),
        (kernelkit.ops.fused_add_rms_norm.default, (x.clone(), torch.randn_like(x), w, 1e-6, 0.0)),
        (kernelkit.ops.layer_norm.default, (torch.empty_like(x), x, w, b, 1e-5)),
        (kernelkit.ops.ada_layer_norm.default, (torch.empty_like(xa), xa, sc, sh, None, None, 1e-6)),
        (kernelkit.ops.rms_norm_gelu.default, (torch.empty_like(x), x, w, 1e-6)),
    ]:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("qdtype", [torch.int8, torch.float8_e4m3fn])
@pytest.mark.parametrize("hidden", [64, 769, 4096])
def test_norm_quant_equals_norm_then_quantize(device, dtype, qdtype, hidden):
    """The fused norm + quantization equals kernelkit's rms_norm then quantize_per_token bit for bit (codes and
    scales), and q * s is the float64 norm within half a code step; the fused add updates the residual as
    fused_add_rms_norm does and only reads x."""
    if qdtype == torch.float8_e4m3fn and not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    torch.manual_seed(hidden)
    x = rand(2, 9, hidden, dtype=dtype, device=device, lo=-2.0, hi=2.0)
    w = rand(hidden, dtype=dtype, device=device, lo=0.5, hi=1.5)
    for weight, offset in [(w, 0.0), (None, 0.0), (w - 1, 1.0)]:
        q, s = kernelkit.rms_norm_quant(x, weight, 1e-6, dtype=qdtype, weight_offset=offset)
        assert q.shape == x.shape and q.dtype == qdtype and s.shape == (2, 9) and s.dtype == torch.float32
        y = kernelkit.rms_norm(x, weight, 1e-6, weight_offset=offset)
        q_want, s_want = kernelkit.quantize_per_token(y.reshape(-1, hidden), dtype=qdtype)
        assert torch.equal(code_bits(q).reshape(-1, hidden), code_bits(q_want)) and torch.equal(s.reshape(-1), s_want)
        assert_dequantized_near(q, s, y, qdtype)
    r = rand(2, 9, hidden, dtype=dtype, device=device)
    x_before, r_want = x.clone(), (x.double() + r.double()).to(dtype)
    q, s = kernelkit.fused_add_rms_norm_quant(x, r, w, 1e-6, dtype=qdtype)
    assert torch.equal(x, x_before) and torch.equal(r, r_want)
    q_want, s_want = kernelkit.quantize_per_token(kernelkit.rms_norm(r_want, w, 1e-6).reshape(-1, hidden), dtype=qdtype)
    assert torch.equal(code_bits(q).reshape(-1, hidden), code_bits(q_want)) and torch.equal(s.reshape(-1), s_want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qdtype", [torch.int8, torch.float8_e4m3fn])
def test_norm_quant_static_scale(device, qdtype):
    """A static (calibrated) scale is read and returned unchanged: q = y / s to the nearest code, saturating."""
    if qdtype == torch.float8_e4m3fn and not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    x = rand(33, 1000, dtype=torch.bfloat16, device=device, lo=-2.0, hi=2.0)
    w = rand(1000, dtype=torch.bfloat16, device=device, lo=0.5, hi=1.5)
    qmax = 127.0 if qdtype == torch.int8 else 448.0
    scale = torch.tensor([2.5 / qmax], device=device)  # |y| past 2.5 saturates
    q, s = kernelkit.rms_norm_quant(x, w, 1e-6, dtype=qdtype, scale=scale)
    assert s is scale and s.item() == pytest.approx(2.5 / qmax)
    assert torch.equal(code_bits(q), code_bits(static_codes(kernelkit.rms_norm(x, w, 1e-6), scale, qdtype)))
    assert (q.float().abs() == qmax).any()  # the saturation was exercised


@pytest.mark.parametrize("device", DEVICES)
def test_norm_quant_bad_input(device):
    x = torch.randn(4, 64, device=device)
    with pytest.raises(ValueError, match=r"x dtype f32 is not supported \(expected f16 or bf16\)"):
        kernelkit.rms_norm_quant(x, dtype=torch.int8)
    with pytest.raises(ValueError, match="dtype must be torch.int8 or torch.float8_e4m3fn"):
        kernelkit.rms_norm_quant(x.half(), dtype=torch.float16)
    with pytest.raises(ValueError, match=r"scales must be contiguous with 1 element \(the static scale\)"):
        kernelkit.rms_norm_quant(x.half(), dtype=torch.int8, scale=torch.ones(2, device=device))
    with pytest.raises(ValueError, match=r"residual"):
        kernelkit.fused_add_rms_norm_quant(x.half(), x.half()[:, :32], dtype=torch.int8)


@pytest.mark.parametrize("device", DEVICES)
def test_norm_quant_opcheck_and_compile(device):
    x, w = torch.randn(6, 96, device=device, dtype=torch.float16), torch.rand(96, device=device).half() + 0.5
    q, s = torch.empty(6, 96, dtype=torch.int8, device=device), torch.empty(6, device=device)
    for op, args in [
        (kernelkit.ops.rms_norm_quant.default, (q, s, x, w, 1e-6, False, 0.0)),
        (kernelkit.ops.rms_norm_quant.default, (q, torch.full((1,), 0.02, device=device), x, None, 1e-6, True, 1.0)),
        (kernelkit.ops.fused_add_rms_norm_quant.default, (q, s, x, torch.randn_like(x), w, 1e-6, False, 0.0)),
    ]:
        torch.library.opcheck(op, args)
    torch._dynamo.reset()
    qdtype = torch.float8_e4m3fn if fp8_runs(device) else torch.int8

    def layer(x, residual, w):  # a decoder layer's norm ahead of an FP8 projection
        return kernelkit.fused_add_rms_norm_quant(x * 2.0, residual, w, 1e-6, dtype=qdtype)

    r = torch.randn_like(x)
    r_eager, r_compiled = r.clone(), r.clone()
    eager = layer(x, r_eager, w)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")(x, r_compiled, w)
    assert torch.equal(r_eager, r_compiled)
    for a, b in zip(eager, compiled):
        assert torch.equal(code_bits(a), code_bits(b))
