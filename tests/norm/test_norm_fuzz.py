"""Property tests of the norm ops (Hypothesis): random shapes (1, odd, primes), strided rows, dtypes and magnitudes,
against the float64 formula, every element within the tolerance table (docs/tolerances.md)."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, close, ln_ref, rms_ref

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from fuzz import DTYPE, HIDDEN, PAD, ROWS, magnitude, rows_view  # noqa: E402


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=150)
@given(rows=ROWS, hidden=HIDDEN, pad=PAD, dtype=DTYPE, data=st.data(), weight=st.booleans(), offset=st.booleans())
def test_rms_norm_matches_float64(device, rows, hidden, pad, dtype, data, weight, offset):
    m = data.draw(magnitude(dtype))
    x = rows_view(rows, hidden, pad, dtype, device, -m, m, seed=rows * 7919 + hidden)
    w = rows_view(1, hidden, 0, dtype, device, 0.5, 1.5, seed=hidden)[0] if weight else None
    eps = 1e-6
    wo = 1.0 if offset else 0.0
    close(kernelkit.rms_norm(x, w, eps, weight_offset=wo), rms_ref(x, w, eps, wo).to(dtype), dtype)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=100)
@given(rows=ROWS, hidden=HIDDEN, pad=PAD, dtype=DTYPE, data=st.data())
def test_layer_norm_and_fused_add_match_float64(device, rows, hidden, pad, dtype, data):
    m = data.draw(magnitude(dtype))
    x = rows_view(rows, hidden, pad, dtype, device, -m, m, seed=rows + 31 * hidden)
    w = rows_view(1, hidden, 0, dtype, device, 0.5, 1.5, seed=hidden + 1)[0]
    b = rows_view(1, hidden, 0, dtype, device, -0.5, 0.5, seed=hidden + 2)[0]
    close(kernelkit.layer_norm(x, w, b, 1e-5), ln_ref(x, w, b, 1e-5).to(dtype), dtype, scale=2.0)
    # fused add: residual = round(x + residual) exactly; x = rms_norm(residual)
    r = rows_view(rows, hidden, 0, dtype, device, -m, m, seed=rows + 37 * hidden)
    r_want = (x.double() + r.double()).to(dtype)
    xo, ro = kernelkit.fused_add_rms_norm(x.clone(), r.clone(), w, 1e-6)
    if torch.isfinite(r_want).all():
        assert torch.equal(ro, r_want)
        close(xo, rms_ref(r_want, w).to(dtype), dtype)
