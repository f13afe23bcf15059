"""The activation ops from PyTorch against a float64 formula, CPU and CUDA."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, DTYPES, close, rand


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
