"""Property tests of attention and decode_attention (Hypothesis): random sequence lengths (s_q < s_k and s_q > s_k),
GQA ratios, causal or not, head dims (multiples of 8 up to 256), sliding windows, soft-caps and page sizes, against
float64 attention with the bottom-right causal mask; the bound is attention's derived one (docs/tolerances.md: P
rounded to the dtype for the P V product). write_kv_cache against index assignment."""
import pytest
import torch

import kernelkit
from torch_testing import ATOL, DEVICES, RTOL

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402


def attention_ref(q, k, v, causal, window=-1, softcap=0.0):
    """float64 [b, s, h, d] attention with GQA, the bottom-right causal mask, a sliding window (keys from position -
    window) and a soft-cap; rows that see no key are 0."""
    q, k, v = q.double(), k.double(), v.double()
    s_q, h, d = q.shape[1], q.shape[2], q.shape[3]
    s_k, hk = k.shape[1], k.shape[2]
    k, v = k.repeat_interleave(h // hk, dim=2), v.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * d ** -0.5
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    pos = torch.arange(s_q, device=q.device)[:, None] + (s_k - s_q)
    key = torch.arange(s_k, device=q.device)[None, :]
    if causal:
        s = s.masked_fill(key > pos, float("-inf"))
    if window >= 0:
        s = s.masked_fill(key < pos - window, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return torch.einsum("bhqk,bkhd->bqhd", p, v), torch.einsum("bhqk,bkhd->bqhd", p, v.abs())


def check(got, want, m, dtype):
    bad = (got.double() - want).abs() > ATOL[dtype] + RTOL[dtype] * (want.abs() + m / 2)
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} off; worst {float((got.double() - want).abs().max())}"


def rand(shape, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1).to(dtype).to(device)


HEAD_DIMS = [8, 32, 40, 64, 72, 80, 96, 128, 160, 192, 256]
WINDOWS = st.one_of(st.just(-1), st.integers(0, 60))
SOFTCAPS = st.sampled_from([0.0, 0.0, 1.5, 20.0])


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=150)
@given(b=st.integers(1, 2), s_q=st.integers(1, 40), s_k=st.integers(1, 70), kv=st.integers(1, 2),
       group=st.sampled_from([1, 2, 4]), d=st.sampled_from(HEAD_DIMS), causal=st.booleans(),
       dtype=st.sampled_from([torch.float16, torch.bfloat16]), window=WINDOWS, softcap=SOFTCAPS)
def test_attention_matches_float64(device, b, s_q, s_k, kv, group, d, causal, dtype, window, softcap):
    h = kv * group
    q, k, v = (rand(shape, dtype, device, s_q * 1000 + s_k + i)
               for i, shape in enumerate([(b, s_q, h, d), (b, s_k, kv, d), (b, s_k, kv, d)]))
    want, m = attention_ref(q, k, v, causal, window, softcap)
    check(kernelkit.attention(q, k, v, causal=causal, window_left=window, softcap=softcap), want, m, dtype)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=150)
@given(b=st.integers(1, 3), s_q=st.integers(1, 4), cap=st.integers(1, 90), kv=st.integers(1, 2),
       group=st.sampled_from([1, 4]), causal=st.booleans(), paged=st.booleans(), data=st.data(),
       d=st.sampled_from(HEAD_DIMS), page=st.sampled_from([1, 2, 8, 16, 32]), window=WINDOWS, softcap=SOFTCAPS)
def test_decode_attention_matches_float64(device, b, s_q, cap, kv, group, causal, paged, data, d, page, window,
                                          softcap):
    dtype = torch.float16
    cap = (cap + page - 1) // page * page
    lens = [data.draw(st.integers(0, cap)) for _ in range(b)]
    h = kv * group
    q = rand((b, s_q, h, d), dtype, device, cap * 7 + s_q)
    kc, vc = rand((b, cap, kv, d), dtype, device, cap + 1), rand((b, cap, kv, d), dtype, device, cap + 2)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    if paged:
        pages = cap // page
        perm = torch.randperm(b * pages, generator=torch.Generator().manual_seed(cap))
        kp = kc.reshape(b * pages, page, kv, d)[perm.argsort().to(device)].contiguous()
        vp = vc.reshape(b * pages, page, kv, d)[perm.argsort().to(device)].contiguous()
        out = kernelkit.decode_attention(q, kp, vp, block_table=perm.reshape(b, pages).to(torch.int32).to(device),
                                         seqlens_k=seqlens, causal=causal, window_left=window, softcap=softcap)
    else:
        out = kernelkit.decode_attention(q, kc, vc, seqlens_k=seqlens, causal=causal, window_left=window,
                                         softcap=softcap)
    for i, n in enumerate(lens):
        if n == 0:
            assert (out[i] == 0).all()
            continue
        want, m = attention_ref(q[i:i + 1], kc[i:i + 1, :n], vc[i:i + 1, :n], causal, window, softcap)
        check(out[i:i + 1], want, m, dtype)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=100)
@given(tokens=st.integers(0, 60), kv=st.integers(1, 4), group=st.sampled_from([1, 2, 4]),
       d=st.sampled_from(HEAD_DIMS), blocks=st.integers(1, 8), block=st.sampled_from([1, 3, 16, 64]),
       paged_pad=st.integers(0, 2), rope=st.sampled_from([None, "neox", "gptj"]), rot_frac=st.sampled_from([1, 2, 4]),
       i64=st.booleans(), dtype=st.sampled_from([torch.float16, torch.bfloat16]), data=st.data())
def test_write_kv_cache_matches_scatter(device, tokens, kv, group, d, blocks, block, paged_pad, rope, rot_frac, i64,
                                        dtype, data):
    """write_kv_cache against index assignment into the flattened cache (bit for bit without RoPE; with it, the rows
    kernelkit.rotary_embedding gives, itself fuzzed against float64): distinct random slots, some -1, caches that are
    views (their block stride padded), partial rotary, i32 / i64 slots, zero tokens."""
    slots_total = blocks * block
    tokens = min(tokens, slots_total)
    seed = tokens * 1000 + d * 7 + blocks
    pool = rand((blocks, block + paged_pad, kv, d), dtype, device, seed)
    k_cache, v_cache = pool[:, :block], pool.clone()[:, :block]
    k, v = rand((tokens, kv, d), dtype, device, seed + 1), rand((tokens, kv, d), dtype, device, seed + 2)
    perm = torch.randperm(slots_total, generator=torch.Generator().manual_seed(seed))[:tokens]
    skip = torch.tensor(data.draw(st.lists(st.booleans(), min_size=tokens, max_size=tokens)), dtype=torch.bool)
    slots = torch.where(skip, -1, perm).to(torch.int64 if i64 else torch.int32).to(device)
    want_k, want_v = k_cache.clone().flatten(0, 1), v_cache.clone().flatten(0, 1)
    kw, rows_k = {}, k
    if rope:
        rot = max(2, d // rot_frac // 2 * 2)
        q = rand((tokens, kv * group, d), dtype, device, seed + 3)
        positions = torch.randint(0, 64, (tokens,), generator=torch.Generator().manual_seed(seed)).to(device)
        cs = rand((64, rot), torch.float32, device, seed + 4)
        q_want, rows_k = kernelkit.rotary_embedding(q.clone(), k.clone(), positions, cs, style=rope)
        kw = dict(q=q, positions=positions, cos_sin_cache=cs, style=rope)
    live = (slots >= 0).cpu()
    want_k[slots.cpu()[live].long()] = rows_k[live.to(device)]
    want_v[slots.cpu()[live].long()] = v[live.to(device)]
    got_q = kernelkit.write_kv_cache(k_cache, v_cache, k, v, slots, **kw)
    assert torch.equal(k_cache.flatten(0, 1), want_k) and torch.equal(v_cache.flatten(0, 1), want_v)
    if rope:
        assert torch.equal(got_q, q_want)
