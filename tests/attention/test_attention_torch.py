"""attention and decode_attention from PyTorch against float64 attention, CPU and CUDA."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, rand


def attention_ref(q, k, v, causal, scale=None, window_left=-1, softcap=0.0, alibi=None):
    """float64 attention over [b, s, h, d] with GQA, the bottom-right causal mask, a sliding window (keys from
    position - window_left), the soft-cap (softcap tanh(s / softcap)) and ALiBi (-slope |p - j|, slopes [h] or
    [b, h])."""
    q, k, v = q.double(), k.double(), v.double()
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // hk, dim=2)
    v = v.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale if scale else d ** -0.5)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    pos = torch.arange(sq)[:, None] + (sk - sq)
    if alibi is not None:
        slopes = alibi.double().reshape(-1 if alibi.dim() == 2 else 1, h)[:, :, None, None]
        s = s - slopes * (pos - torch.arange(sk)[None, :]).abs().double()
    if causal:
        s = s.masked_fill(torch.arange(sk)[None, :] > pos, float("-inf"))
    if window_left >= 0:
        s = s.masked_fill(torch.arange(sk)[None, :] < pos - window_left, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return torch.einsum("bhqk,bkhd->bqhd", p, v)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_float64(device, dtype, causal):
    q = rand(2, 7, 8, 64, dtype=dtype, device=device)
    k, v = rand(2, 19, 2, 64, dtype=dtype, device=device), rand(2, 19, 2, 64, dtype=dtype, device=device)
    out, lse = kernelkit.attention(q, k, v, causal=causal, return_lse=True)
    want = attention_ref(q.cpu(), k.cpu(), v.cpu(), causal)
    assert (out.cpu().double() - want).abs().max().item() < (2e-2 if dtype == torch.bfloat16 else 3e-3)
    assert lse.shape == (2, 8, 7) and torch.isfinite(lse).all()
    # [b, h, s, d] storage through strides gives the same result
    out2 = kernelkit.attention(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, causal=causal)
    torch.testing.assert_close(out2, out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("max_seqlen", [None, (9, 13)])
def test_varlen_matches_float64_per_sequence(device, max_seqlen):
    """3 packed sequences of (9, 13), (0, 4), (6, 6) query / key tokens, causal GQA; with max_seqlen_q / k given (on
    CUDA: nothing read back) or not."""
    dt = torch.bfloat16
    cu_q, cu_k = [0, 9, 9, 15], [0, 13, 17, 23]
    q = rand(15, 8, 128, dtype=dt, device=device)
    k, v = rand(23, 2, 128, dtype=dt, device=device), rand(23, 2, 128, dtype=dt, device=device)
    mq, mk = max_seqlen or (None, None)
    out = kernelkit.attention(q, k, v, causal=True, cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32, device=device),
                              cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32, device=device), max_seqlen_q=mq,
                              max_seqlen_k=mk)
    for b in range(3):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0:
            continue
        want = attention_ref(q[None, q0:q1].cpu(), k[None, k0:k1].cpu(), v[None, k0:k1].cpu(), True)[0]
        assert (out[q0:q1].cpu().double() - want).abs().max().item() < 2e-2, f"sequence {b}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal,window_left,softcap", [(True, 4, 0.0), (False, 3, 0.0), (True, -1, 2.5),
                                                        (True, 2, 4.0)])
def test_sliding_window_and_softcap(device, causal, window_left, softcap):
    """Prefill and decode with a sliding window and / or Gemma 2's soft-cap against float64."""
    q = rand(2, 7, 8, 64, dtype=torch.bfloat16, device=device) * 2
    k, v = rand(2, 19, 2, 64, dtype=torch.bfloat16, device=device) * 2, rand(2, 19, 2, 64, dtype=torch.bfloat16,
                                                                               device=device)
    kw = dict(causal=causal, window_left=window_left, softcap=softcap)
    want = attention_ref(q.cpu(), k.cpu(), v.cpu(), causal, window_left=window_left, softcap=softcap)
    assert (kernelkit.attention(q, k, v, **kw).cpu().double() - want).abs().max().item() < 2e-2
    want = attention_ref(q[:, :2].cpu(), k.cpu(), v.cpu(), causal, window_left=window_left, softcap=softcap)
    assert (kernelkit.decode_attention(q[:, :2], k, v, **kw).cpu().double() - want).abs().max().item() < 2e-2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("per_sequence", [False, True])
def test_alibi(device, per_sequence):
    """ALiBi slopes ([h], or [b, h]) alone, with causal and a window, and with a soft-cap, prefill and decode, against
    float64 on the CPU."""
    q = rand(2, 7, 8, 64, dtype=torch.bfloat16, device=device) * 2
    k, v = (rand(2, 19, 2, 64, dtype=torch.bfloat16, device=device) for _ in range(2))
    slopes = 2.0 ** -torch.arange(1, 9, dtype=torch.float32)
    slopes = (slopes * torch.tensor([[1.0], [3.0]]) if per_sequence else slopes).to(device)
    qc, kc, vc, sc = q.cpu(), k.cpu(), v.cpu(), slopes.cpu()
    for causal, window_left, softcap in [(False, -1, 0.0), (True, 6, 0.0), (True, -1, 5.0)]:
        kw = dict(causal=causal, window_left=window_left, softcap=softcap, alibi_slopes=slopes)
        ref = dict(window_left=window_left, softcap=softcap, alibi=sc)
        want = attention_ref(qc, kc, vc, causal, **ref)
        assert (kernelkit.attention(q, k, v, **kw).cpu().double() - want).abs().max().item() < 2e-2, kw
        want = attention_ref(qc[:, :2], kc, vc, causal, **ref)
        assert (kernelkit.decode_attention(q[:, :2], k, v, **kw).cpu().double() - want).abs().max().item() < 2e-2, kw
    with pytest.raises(ValueError, match="options.alibi_slopes dtype bf16 must be f32"):
        kernelkit.attention(q, k, v, alibi_slopes=slopes.bfloat16())


@pytest.mark.parametrize("device", DEVICES)
def test_decode_attention_contiguous_and_paged(device):
    dt = torch.float16
    b, h, hk, d, cap = 2, 8, 2, 64, 48
    q = rand(b, 1, h, d, dtype=dt, device=device)
    kc, vc = rand(b, cap, hk, d, dtype=dt, device=device), rand(b, cap, hk, d, dtype=dt, device=device)
    lens = torch.tensor([40, 17], dtype=torch.int32, device=device)
    out = kernelkit.decode_attention(q, kc, vc, seqlens_k=lens)
    for i, n in enumerate([40, 17]):
        want = attention_ref(q[i:i + 1].cpu(), kc[i:i + 1, :n].cpu(), vc[i:i + 1, :n].cpu(), False)
        assert (out[i:i + 1].cpu().double() - want).abs().max().item() < 3e-3
    # the same cache in pages of 1, 16 and 8 (the page size read from the shape), pages shuffled
    for page in (1, 16, 8):
        pages = cap // page
        perm = torch.randperm(b * pages)
        kp = kc.reshape(b * pages, page, hk, d)[perm.argsort()].contiguous()
        vp = vc.reshape(b * pages, page, hk, d)[perm.argsort()].contiguous()
        table = perm.reshape(b, pages).to(torch.int32).to(device)
        paged = kernelkit.decode_attention(q, kp, vp, block_table=table, seqlens_k=lens)
        torch.testing.assert_close(paged, out)


def fp8_supported(device):
    """Whether kernels for e4m3 caches run here: the CPU backend always, CUDA from sm_89."""
    return device == "cpu" or torch.cuda.get_device_capability(device) >= (8, 9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("per_head", [False, True])
def test_fp8_kv_cache(device, dtype, per_head):
    """write_kv_cache into float8_e4m3fn pages (scales per tensor or per KV head): every code within e4m3's rounding
    of value / scale; decode_attention over that cache against float64 attention over the dequantized cache (code *
    scale, exact); missing scales name the argument. Refused with the FP8 message on a GPU without FP8."""
    b, h, hk, d, page, pages = 2, 8, 2, 128, 16, 10
    lens = [70, 33]
    k, v = rand(sum(lens), hk, d, dtype=dtype, device=device), rand(sum(lens), hk, d, dtype=dtype, device=device)
    def scale_of(x):  # amax / 448 per KV head or per tensor
        a = x.float().abs().amax(dim=(0, 2)) if per_head else x.float().abs().amax().reshape(1)
        return (a / 448).contiguous()
    ks, vs = scale_of(k), scale_of(v)
    kc = torch.zeros(pages, page, hk, d, dtype=torch.float8_e4m3fn, device=device)
    vc = torch.zeros_like(kc)
    perm = torch.randperm(pages)
    table = perm.reshape(b, pages // b).to(torch.int32).to(device)
    slots = torch.cat([table[i].long().repeat_interleave(page)[:n] * page + torch.arange(n, device=device) % page
                       for i, n in enumerate(lens)])
    if not fp8_supported(device):
        with pytest.raises(Exception, match="f8e4m3 is not supported"):
            kernelkit.write_kv_cache(kc, vc, k, v, slots, k_scale=ks, v_scale=vs)
        return
    kernelkit.write_kv_cache(kc, vc, k, v, slots, k_scale=ks, v_scale=vs)
    def rows_of(cache, rows):  # the cache rows at slots `rows`, as float32 codes (indexed as bytes)
        return cache.view(torch.uint8).reshape(-1, hk, d)[rows].view(torch.float8_e4m3fn).float()
    for cache, x, sc in ((kc, k, ks), (vc, v, vs)):
        got = rows_of(cache, slots) * sc.reshape(1, -1, 1)  # dequantized, exact in float32
        bound = x.float().abs() * 2.0 ** -4 + 2.0 ** -10 * sc.reshape(1, -1, 1)  # half an e4m3 step (subnormal: 2^-10)
        assert ((got - x.float()).abs() <= bound).all()
    q = rand(b, 1, h, d, dtype=dtype, device=device)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    out = kernelkit.decode_attention(q, kc, vc, block_table=table, seqlens_k=seqlens, k_scale=ks, v_scale=vs)
    start = 0
    for i, n in enumerate(lens):
        rows = slots[start:start + n]
        kd = (rows_of(kc, rows).double() * ks.double().reshape(1, -1, 1)).cpu()
        vd = (rows_of(vc, rows).double() * vs.double().reshape(1, -1, 1)).cpu()
        want = attention_ref(q[i:i + 1].cpu(), kd[None], vd[None], False)
        assert (out[i:i + 1].cpu().double() - want).abs().max().item() < (2e-2 if dtype == torch.bfloat16 else 3e-3)
        start += n
    with pytest.raises(ValueError, match="v_scale is required"):
        kernelkit.decode_attention(q, kc, vc, block_table=table, seqlens_k=seqlens, k_scale=ks)
    with pytest.raises(ValueError, match="k_scale"):
        kernelkit.write_kv_cache(kc, vc, k, v, slots, v_scale=vs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_prefill(device, dtype, causal):
    """attention with float8_e4m3fn K / V (scales per KV head) against float64 attention over code * scale; with
    CUDA's one rounding of each dequantized value to q's dtype inside the output tolerance. Varlen too."""
    q = rand(2, 37, 8, 128, dtype=dtype, device=device)
    k8 = (rand(2, 70, 2, 128, dtype=torch.float32, device=device) * 200).to(torch.float8_e4m3fn)
    v8 = (rand(2, 70, 2, 128, dtype=torch.float32, device=device) * 200).to(torch.float8_e4m3fn)
    ks = torch.tensor([0.004, 0.003], device=device)
    vs = torch.tensor([0.005], device=device)
    if not fp8_supported(device):
        with pytest.raises(Exception, match="f8e4m3 is not supported"):
            kernelkit.attention(q, k8, v8, causal=causal, k_scale=ks, v_scale=vs)
        return
    out = kernelkit.attention(q, k8, v8, causal=causal, k_scale=ks, v_scale=vs)
    kd = k8.cpu().double() * ks.cpu().double()[:, None]
    vd = v8.cpu().double() * vs.cpu().double()
    want = attention_ref(q.cpu(), kd, vd, causal)
    assert (out.cpu().double() - want).abs().max().item() < (2e-2 if dtype == torch.bfloat16 else 3e-3)
    cu = torch.tensor([0, 37, 74], dtype=torch.int32, device=device)
    cuk = torch.tensor([0, 70, 140], dtype=torch.int32, device=device)
    packed = kernelkit.attention(q.reshape(74, 8, 128), k8.reshape(140, 2, 128), v8.reshape(140, 2, 128),
                                 causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cuk, k_scale=ks, v_scale=vs)
    # Against the reference, as the dense call: on sm_90a the two run different kernels (the packed batch is not
    # TMA-fed), whose P is rounded at different running maxima (the dense kernel's lazy rescale).
    assert (packed.cpu().double() - want.reshape(74, 8, 128)).abs().max().item() < (
        2e-2 if dtype == torch.bfloat16 else 3e-3)
    with pytest.raises(ValueError, match="k_scale is required"):
        kernelkit.attention(q, k8, v8, v_scale=vs)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    h = torch.float16
    q, k = torch.randn(1, 5, 4, 64, device=device, dtype=h), torch.randn(1, 9, 2, 64, device=device, dtype=h)
    for op, args in [
        (kernelkit.ops.attention.default, (torch.empty_like(q), torch.empty(1, 4, 5, device=device), q, k, k.clone(),
                                           0.0, True, None, None)),
        (kernelkit.ops.decode_attention.default, (torch.empty(1, 1, 4, 64, device=device, dtype=h), None,
                                                  torch.randn(1, 1, 4, 64, device=device, dtype=h), k, k.clone(), None,
                                                  None, 0.0, False)),
        (kernelkit.ops.attention.default, (torch.empty(9, 4, 64, device=device, dtype=h), None,
                                           torch.randn(9, 4, 64, device=device, dtype=h), k[0], k[0].clone(), 0.0, True,
                                           torch.tensor([0, 5, 9], dtype=torch.int32, device=device),
                                           torch.tensor([0, 4, 9], dtype=torch.int32, device=device), 5, 5)),
        (kernelkit.ops.write_kv_cache.default, (torch.randn(4, 16, 2, 64, device=device, dtype=h),
                                                torch.randn(4, 16, 2, 64, device=device, dtype=h), k[0], k[0].clone(),
                                                torch.randperm(64, device=device)[:9])),
        (kernelkit.ops.write_kv_cache.default, (torch.randn(4, 16, 2, 64, device=device, dtype=h),
                                                torch.randn(4, 16, 2, 64, device=device, dtype=h), k[0], k[0].clone(),
                                                torch.randperm(64, device=device)[:9],
                                                torch.empty(9, 4, 64, device=device, dtype=h),
                                                torch.randn(9, 4, 64, device=device, dtype=h),
                                                torch.randint(0, 32, (9,), device=device),
                                                torch.randn(32, 64, device=device), True)),
    ]:
        torch.library.opcheck(op, args)
    if fp8_supported(device):  # e4m3 caches with their scales (per KV head, per tensor): the fake tensors and
        # AOT dispatch; test_schema compares mutated inputs by arithmetic torch has no float8 kernels for
        fp8_tests = ("test_faketensor", "test_aot_dispatch_dynamic")
        k8 = (k / 4).to(torch.float8_e4m3fn)
        ks, vs = torch.full((2,), 0.25, device=device), torch.full((1,), 0.25, device=device)
        torch.library.opcheck(kernelkit.ops.decode_attention.default,
                              (torch.empty(1, 1, 4, 64, device=device, dtype=h), None,
                               torch.randn(1, 1, 4, 64, device=device, dtype=h), k8, k8.clone(), None, None, 0.0, False,
                               -1, 0.0, None, ks, vs), test_utils=fp8_tests)
        torch.library.opcheck(kernelkit.ops.write_kv_cache.default,
                              (torch.zeros(4, 16, 2, 64, device=device, dtype=torch.float8_e4m3fn),
                               torch.zeros(4, 16, 2, 64, device=device, dtype=torch.float8_e4m3fn), k[0], k[0].clone(),
                               torch.randperm(64, device=device)[:9], None, None, None, None, True, ks, vs),
                              test_utils=fp8_tests)


def rope_ref(x, positions, cos_sin_cache, neox):
    """float64 RoPE of x [tokens, heads, d] by the table rows of positions (cos in the first rot_dim / 2 columns)."""
    x = x.double().clone()
    rot = cos_sin_cache.shape[1]
    cos, sin = (t.double()[:, None, :] for t in cos_sin_cache[positions.long()].chunk(2, dim=-1))
    if neox:
        a, b = x[..., : rot // 2].clone(), x[..., rot // 2: rot].clone()
        x[..., : rot // 2], x[..., rot // 2: rot] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = x[..., 0:rot:2].clone(), x[..., 1:rot:2].clone()
        x[..., 0:rot:2], x[..., 1:rot:2] = a * cos - b * sin, b * cos + a * sin
    return x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("style", [None, "neox", "gptj"])
def test_write_kv_cache(device, style):
    """k / v rows into shuffled slots of a paged cache (every 4th token padding, -1), bit for bit without RoPE; with it
    q and k rotated against float64 (partial rotary for gptj), k itself untouched. A slot outside the cache is an
    error."""
    dt, tokens, hk, d, pages, page = torch.bfloat16, 45, 2, 128, 8, 16
    k, v = (rand(tokens, hk, d, dtype=dt, device=device) for _ in range(2))
    k_cache, v_cache = (rand(pages, page, hk, d, dtype=dt, device=device) for _ in range(2))
    old_k, old_v, k0 = k_cache.clone(), v_cache.clone(), k.clone()
    slots = torch.randperm(pages * page, device=device)[:tokens]
    slots[3::4] = -1
    kw = {}
    if style:
        q = rand(tokens, 8, d, dtype=dt, device=device)
        positions = torch.randint(0, 512, (tokens,), device=device)
        rot = d if style == "neox" else 64
        inv = 10000.0 ** (-torch.arange(0, rot, 2, dtype=torch.float64) / rot)
        angles = torch.arange(512, dtype=torch.float64)[:, None] * inv
        cos_sin = torch.cat([angles.cos(), angles.sin()], dim=-1).float().to(device)
        kw = dict(q=q.clone(), positions=positions, cos_sin_cache=cos_sin, style=style)
    q_out = kernelkit.write_kv_cache(k_cache, v_cache, k, v, slots, **kw)
    assert torch.equal(k, k0)
    live = slots >= 0
    want_k, want_v = old_k.flatten(0, 1).clone(), old_v.flatten(0, 1).clone()
    want_v[slots[live]] = v[live]
    assert torch.equal(v_cache.flatten(0, 1), want_v)
    if style:
        neox = style == "neox"
        want_q = rope_ref(q.cpu(), positions.cpu(), cos_sin.cpu(), neox)
        assert (q_out.cpu().double() - want_q).abs().max().item() < 2e-2
        rotated = rope_ref(k.cpu(), positions.cpu(), cos_sin.cpu(), neox)
        got = k_cache.flatten(0, 1).cpu().double()
        assert (got[slots[live].cpu()] - rotated[live.cpu()]).abs().max().item() < 2e-2
        untouched = torch.ones(pages * page, dtype=torch.bool)
        untouched[slots[live].cpu()] = False
        assert torch.equal(k_cache.flatten(0, 1)[untouched.to(device)], old_k.flatten(0, 1)[untouched.to(device)])
    else:
        assert q_out is None
        want_k[slots[live]] = k[live]
        assert torch.equal(k_cache.flatten(0, 1), want_k)
    bad = slots.clone()
    bad[0] = pages * page
    before = k_cache.clone()
    with pytest.raises(ValueError, match=rf"write_kv_cache: slot_mapping\[0\] = {pages * page} must be -1"):
        kernelkit.write_kv_cache(k_cache, v_cache, k, v, bad)  # the CPU (and CUDA in debug mode) raise here,
        kernelkit.check_errors()                                 # CUDA otherwise here
    if device == "cpu":
        assert torch.equal(k_cache, before)  # refused before any write
    with pytest.raises(ValueError, match="write_kv_cache: RoPE needs q, positions and cos_sin_cache together"):
        kernelkit.write_kv_cache(k_cache, v_cache, k, v, slots, q=rand(tokens, 8, d, dtype=dt, device=device))
