"""Property tests of the quantizers and the weight-only linear layer (Hypothesis): random shapes and value ranges; every
weight within half a step (and the fp32 quotient's rounding) of its dequantized value, and y = x dequant(q)^T within the tolerance table plus the fp32
accumulation bound of k products (docs/tolerances.md)."""
import pytest
import torch

import kernelkit
from torch_testing import ATOL, DEVICES, RTOL

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import example, given, settings, strategies as st  # noqa: E402


def unpack_int4(q, k):
    """The kernel layout (include/kernelkit/ops/quant.hpp) read by its offset formula: row r's word i (values 8i ..
    8i + 7) at byte ((r // 16 (k / 64) + i // 8) 32 + 4 (r % 8) + (i % 8) // 2) 16 + 8 ((r % 16) // 8) + 4 (i % 2),
    value j of the word at nibble j / 2 + 4 (j % 2)."""
    n = q.shape[0]
    r = torch.arange(n)[:, None]
    i = torch.arange(k // 8)[None, :]
    off = ((r // 16 * (k // 64) + i // 8) * 32 + 4 * (r % 8) + (i % 8) // 2) * 16 + 8 * ((r % 16) // 8) + 4 * (i % 2)
    flat = q.cpu().to(torch.int64).flatten()
    word = flat[off] | flat[off + 1] << 8 | flat[off + 2] << 16 | flat[off + 3] << 24  # [n, k / 8]
    out = torch.empty(n, k // 8, 8, dtype=torch.int64)
    for j in range(8):
        v = (word >> (4 * (j // 2 + 4 * (j % 2)))) & 0xF
        out[..., j] = torch.where(v >= 8, v - 16, v)
    return out.reshape(n, k)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=200)
# Found by the property test: a quotient w / s rounded in fp32 just past a half step (the bound's 2^-24 qmax term).
@example(n=37, kblocks=6, bits=8, group=64, m=1, scale=0.001, dtype=torch.float16)
@given(n=st.integers(1, 70), kblocks=st.integers(1, 12), bits=st.sampled_from([8, 4]), group=st.sampled_from([64, 128]),
       m=st.integers(1, 20), scale=st.sampled_from([1e-3, 0.1, 10.0]), dtype=st.sampled_from([torch.float16,
                                                                                            torch.bfloat16]))
def test_weight_only_matches_dequantized_float64(device, n, kblocks, bits, group, m, scale, dtype):
    k = kblocks * 128
    if bits == 4:
        n = -(-n // 16) * 16  # the INT4 layout's whole 16-row tiles
    g = torch.Generator().manual_seed(n * 131 + k + m)
    w = ((torch.rand(n, k, generator=g, dtype=torch.float64) * 2 - 1) * scale).float().to(device)
    q, s = kernelkit.quantize_weight(w, bits=bits, group=group)
    if bits == 8:
        deq = q.cpu().double() * s.cpu().double()[:, None]
        step = s.cpu().double()[:, None]
    else:
        step = s.cpu().double().repeat_interleave(group, 1)
        deq = unpack_int4(q, k).double() * step
    # q = round(fp32(w / s)): half a step, plus the fp32 quotient's rounding (2^-24 of |w / s| <= qmax steps).
    qmax = 127 if bits == 8 else 7
    assert ((deq - w.cpu().double()).abs() <= step * (0.5 + qmax * 2.0**-24)).all()
    x = (torch.rand(m, k, generator=g, dtype=torch.float64) * 2 - 1).to(dtype).to(device)
    y = kernelkit.linear_weight_only(x, q, s, bits, group if bits == 4 else 0)
    want = x.cpu().double() @ deq.T
    l1 = x.cpu().double().abs() @ deq.abs().T
    bound = ATOL[dtype] + RTOL[dtype] * want.abs() + 1e-6 * l1
    assert ((y.cpu().double() - want).abs() <= bound).all()
