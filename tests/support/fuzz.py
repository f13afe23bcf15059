"""Hypothesis strategies shared by the property tests: shapes that include 1, odd sizes and primes, strided rows (a
view into a wider buffer), every dtype, value ranges from tiny to near fp16's limit."""
import torch
from hypothesis import strategies as st

ROWS = st.one_of(st.sampled_from([1, 2, 3, 7, 13, 31, 83, 257]), st.integers(1, 300))
HIDDEN = st.one_of(st.sampled_from([1, 2, 3, 5, 8, 64, 111, 500, 769, 1024, 2053, 4099, 5125]), st.integers(1, 2100))
PAD = st.sampled_from([0, 0, 0, 1, 8, 13])
DTYPE = st.sampled_from([torch.float32, torch.float16, torch.bfloat16])


def rows_view(rows, hidden, pad, dtype, device, lo=-1.0, hi=1.0, seed=0):
    """A [rows, hidden] view whose rows are hidden + pad elements apart, uniform in [lo, hi)."""
    g = torch.Generator().manual_seed(seed)
    base = (torch.rand(rows, hidden + pad, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    return base.to(device)[:, :hidden]


def magnitude(dtype):
    """A value scale: small, ordinary, or (fp16) near the top of its range, where x^2 overflows fp16 but not fp32."""
    top = 2.0e4 if dtype == torch.float16 else 1.0e4
    return st.sampled_from([1e-3, 1.0, 1.0, 30.0, top])
