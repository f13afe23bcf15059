"""Tensors of more than 2^31 elements on CUDA: the kernels index with int64, so the elements past 2^31 are computed
and written like the first ones. Every element is checked against a float64 reference, computed in row chunks on the
GPU to bound its memory; the outputs are poisoned with NaN first. Needs about 16 GB of free GPU memory."""
import pytest
import torch

import kernelkit
from torch_testing import close, rms_ref, rope_ref

BIG = 2**31
GPU_BYTES = 16 << 30
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.mem_get_info()[0] < GPU_BYTES,
                                reason="needs a CUDA device with 16 GB free")
CHUNK = 1 << 15  # rows per reference chunk


def uniform(*shape, lo=-1.0, hi=1.0, dtype=torch.bfloat16):
    return torch.empty(*shape, dtype=dtype, device="cuda").uniform_(lo, hi)


def poisoned(*shape, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def check_rows(got, want_of, dtype, scale=1.0):
    """Every row of `got` against want_of(row slice), chunk by chunk."""
    for r in range(0, got.shape[0], CHUNK):
        rows = slice(r, min(r + CHUNK, got.shape[0]))
        close(got[rows], want_of(rows).to(dtype), dtype, scale)


@pytest.fixture(autouse=True)
def free_memory():
    yield
    torch.cuda.empty_cache()


def test_silu_and_mul_past_2_31_outputs():
    rows, d = BIG // 4096 + 3, 4096  # out: 2^31 + 3 * 4096 elements
    x = uniform(rows, 2 * d, lo=-4, hi=4)
    out = poisoned(rows, d)
    kernelkit.silu_and_mul(x, out=out)
    assert out.numel() > BIG
    check_rows(out, lambda r: torch.nn.functional.silu(x[r, :d].double()) * x[r, d:].double(), torch.bfloat16)


def test_rms_norm_and_softmax_past_2_31_elements():
    rows, hidden = BIG // 8192 + 1, 8192  # 2^31 + 8192 elements
    x = uniform(rows, hidden)
    w = uniform(hidden, lo=0.5, hi=1.5)
    out = poisoned(rows, hidden)
    kernelkit.rms_norm(x, w, 1e-6, out=out)
    check_rows(out, lambda r: rms_ref(x[r], w), torch.bfloat16)
    out.fill_(float("nan"))
    kernelkit.softmax(x, 0.5, out=out)
    check_rows(out, lambda r: torch.softmax(x[r].double() * 0.5, -1), torch.bfloat16, scale=2.0)


def test_rotary_embedding_past_2_31_query_elements():
    tokens, heads, head_dim, max_pos = BIG // (16 * 128) + 5, 16, 128, 4096  # q: 2^31 + 5 * 2048 elements
    q = uniform(tokens, heads, head_dim, lo=-2, hi=2)
    k = uniform(tokens, 1, head_dim, lo=-2, hi=2)
    q0, k0 = q.clone(), k.clone()
    pos = torch.randint(0, max_pos, (tokens,), device="cuda")
    inv = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device="cuda") / head_dim)
    ang = torch.arange(max_pos, dtype=torch.float64, device="cuda")[:, None] * inv[None]
    cache = torch.cat([ang.cos(), ang.sin()], -1).float()
    kernelkit.rotary_embedding(q, k, pos, cache, style="neox")  # in place
    assert q.numel() > BIG
    cos, sin = ang.cos(), ang.sin()
    for got, x0 in ((q, q0), (k, k0)):
        check_rows(got, lambda r: rope_ref(x0[r].double(), cos[pos[r]], sin[pos[r]], "neox"), torch.bfloat16,
                   scale=2.0)
