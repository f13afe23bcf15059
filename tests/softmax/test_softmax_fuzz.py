"""Property tests of softmax (Hypothesis): random shapes, scales and -inf rows, causal with any s_q <= s_k and s_q > s_k,
against the float64 formula; every row sums to 1 and masked entries are exactly 0."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, close

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from fuzz import DTYPE, HIDDEN, PAD, ROWS, rows_view  # noqa: E402


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=150)
@given(rows=ROWS, hidden=HIDDEN, pad=PAD, dtype=DTYPE, scale=st.sampled_from([1.0, 0.125, 4.0]),
       inf_row=st.booleans())
def test_softmax_matches_float64(device, rows, hidden, pad, dtype, scale, inf_row):
    x = rows_view(rows, hidden, pad, dtype, device, -8, 8, seed=rows * 17 + hidden)
    if inf_row:
        x[rows // 2] = float("-inf")
    want = torch.softmax(x.double() * scale, -1).nan_to_num(0.0)
    got = kernelkit.softmax(x, scale)
    close(got, want.to(dtype), dtype, scale=2.0)
    if inf_row:
        assert (got[rows // 2] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=100)
@given(heads=st.integers(1, 4), s_q=st.integers(1, 40), s_k=st.integers(1, 300), dtype=DTYPE)
def test_causal_softmax_matches_float64(device, heads, s_q, s_k, dtype):
    x = rows_view(heads * s_q, s_k, 0, dtype, device, -8, 8, seed=s_q * 1000 + s_k).reshape(heads, s_q, s_k)
    mask = torch.ones(s_q, s_k, dtype=torch.bool, device=device).tril(s_k - s_q)
    want = torch.softmax((x.double() * 0.5).masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
    got = kernelkit.softmax(x, 0.5, causal=True)
    close(got, want.to(dtype), dtype, scale=2.0)
    assert (got.masked_select(~mask.expand_as(got)) == 0).all()
