"""Property tests of the activation ops (Hypothesis): random shapes and strided rows, against the float64 formulas."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, close

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from fuzz import DTYPE, HIDDEN, PAD, ROWS, rows_view  # noqa: E402

ACTS = {"gelu": lambda v: torch.nn.functional.gelu(v), "silu": torch.nn.functional.silu,
        "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh")}


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=150)
@given(rows=ROWS, d=HIDDEN, pad=PAD, dtype=DTYPE, act=st.sampled_from(sorted(ACTS)),
       scale=st.sampled_from([0.1, 3.0, 30.0]))
def test_activations_match_float64(device, rows, d, pad, dtype, act, scale):
    x = rows_view(rows, 2 * d, pad, dtype, device, -scale, scale, seed=rows * 131 + d)
    a, b = x[:, :d], x[:, d:]
    f = ACTS[act]
    close(getattr(kernelkit, act)(a), f(a.double()).to(dtype), dtype)
    close(getattr(kernelkit, act + "_and_mul")(x), (f(a.double()) * b.double()).to(dtype), dtype)
    two = {"gelu": kernelkit.geglu, "silu": kernelkit.swiglu, "gelu_tanh": kernelkit.gelu_tanh_mul}[act]
    close(two(a, b), (f(a.double()) * b.double()).to(dtype), dtype)
