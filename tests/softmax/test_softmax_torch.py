"""softmax and causal softmax from PyTorch against a float64 formula, CPU and CUDA."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, DTYPES, close, rand


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_causal(device, dtype):
    torch.manual_seed(0)
    x = rand(2, 3, 5, 40, dtype=dtype, device=device, lo=-8, hi=8)
    close(kernelkit.softmax(x, 0.5), torch.softmax(x.double() * 0.5, -1).to(dtype), dtype, scale=2.0)
    sq, sk = 5, 40
    mask = torch.ones(sq, sk, dtype=torch.bool, device=device).tril(sk - sq)
    want = torch.softmax((x.double() * 0.5).masked_fill(~mask, float("-inf")), -1)
    close(kernelkit.softmax(x, 0.5, causal=True), want.to(dtype), dtype, scale=2.0)
    inf_row = torch.full((1, 16), float("-inf"), dtype=dtype, device=device)
    assert torch.equal(kernelkit.softmax(inf_row), torch.zeros_like(inf_row))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    xa = torch.randn(2, 3, 96, device=device)
    torch.library.opcheck(kernelkit.ops.softmax.default, (torch.empty_like(xa), xa, 0.5, True))
