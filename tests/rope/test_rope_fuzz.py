"""Property tests of rotary_embedding (Hypothesis): random token and head counts, head dims and partial rotary, both
styles, q / k as strided slices of one fused projection, against the HF formulas in float64."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, close, rope_ref

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from fuzz import DTYPE, rows_view  # noqa: E402


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=150)
@given(tokens=st.integers(1, 70), heads=st.integers(1, 6), kv=st.integers(1, 3), half=st.integers(1, 64),
       rot_frac=st.sampled_from([1.0, 0.5, 0.25]), style=st.sampled_from(["neox", "gptj"]), dtype=DTYPE)
def test_rope_matches_float64(device, tokens, heads, kv, half, rot_frac, style, dtype):
    head_dim = 2 * half
    rot = max(2, int(head_dim * rot_frac) // 2 * 2)
    qkv = rows_view(tokens, (heads + 2 * kv) * head_dim, 0, dtype, device, -2, 2, seed=tokens * 97 + head_dim)
    q = qkv[:, : heads * head_dim].view(tokens, heads, head_dim)
    k = qkv[:, heads * head_dim: (heads + kv) * head_dim].view(tokens, kv, head_dim)
    max_pos = 4 * tokens + 1
    g = torch.Generator().manual_seed(tokens)
    pos = torch.randint(0, max_pos, (tokens,), generator=g).to(device)
    inv = 10000.0 ** (-torch.arange(0, rot, 2, dtype=torch.float64, device=device) / rot)
    ang = torch.arange(max_pos, dtype=torch.float64, device=device)[:, None] * inv[None]
    cache = torch.cat([ang.cos(), ang.sin()], -1).float()
    qo, ko = kernelkit.rotary_embedding(q, k, pos, cache, style=style, inplace=False)
    cos, sin = ang.cos()[pos], ang.sin()[pos]
    close(qo, rope_ref(q.double(), cos, sin, style).to(dtype), dtype, scale=2.0)
    close(ko, rope_ref(k.double(), cos, sin, style).to(dtype), dtype, scale=2.0)
