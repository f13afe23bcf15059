"""The norm ops from PyTorch against a float64 formula, CPU and CUDA."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, DTYPES, close, ln_ref, rand, rms_ref


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
