"""The quantizers and quantized linear layers from PyTorch: against dequantized and exact integer matmuls, and
kernelkit.quantize on a small transformers Llama."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, code_bits, fp8_runs, rand


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bits", [8, 4])
def test_weight_only_linear_matches_dequantized_matmul(device, bits):
    w = rand(96, 256, dtype=torch.float32, device=device, lo=-0.1, hi=0.1)
    q, s = kernelkit.quantize_weight(w, bits=bits, group=64)
    assert q.dtype == (torch.int8 if bits == 8 else torch.uint8)
    x = rand(5, 256, dtype=torch.float16, device=device)
    bias = rand(96, dtype=torch.float16, device=device)
    y = kernelkit.linear_weight_only(x, q, s, bits, 64, bias)
    # dequantize independently: int8 directly; int4 through the per-group scales and the error bound of quantization
    if bits == 8:
        deq = q.double().cpu() * s.double().cpu()[:, None]
        want = x.double().cpu() @ deq.T + bias.double().cpu()
        assert (y.double().cpu() - want).abs().max().item() <= 1e-3 * (1 + want.abs().max().item())
    step = (w.abs().amax(-1, keepdim=True) / (127 if bits == 8 else 7)).cpu().double()  # worst case per row
    approx = x.double().cpu() @ w.double().cpu().T + bias.double().cpu()
    bound = 0.5 * (x.double().cpu().abs() @ step.expand(-1, 256).T) + 1e-2
    assert ((y.double().cpu() - approx).abs() <= bound).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bits,group", [(4, 32), (4, 128), (8, 32), (8, 128)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_weight_only_linear_with_zero_points(device, bits, group, dtype):
    """zeros=: w = s (q - z) with int8 zero points per group (GPTQ / AWQ), every code and zeros across int8, against a
    float64 product; one rounding of fp32 sums (the accuracy docs/tolerances.md states)."""
    if device == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip("no bf16 on this GPU")
    g = torch.Generator().manual_seed(bits * group)
    n, k = 48 if bits == 4 else 40, 256  # INT4: whole 16-row tiles; INT8: a partial one
    lo = -(1 << (bits - 1))
    v = torch.randint(lo, -lo, (n, k), generator=g, dtype=torch.int8)
    q = kernelkit.formats.pack_int4(v) if bits == 4 else v
    s = torch.rand(n, k // group, generator=g) * 0.01 + 0.001
    z = torch.randint(-128, 128, (n, k // group), generator=g, dtype=torch.int8)
    x = (torch.rand(3, k, generator=g) * 2 - 1).to(dtype)
    y = kernelkit.linear_weight_only(x.to(device), q.to(device), s.to(device), bits, group, zeros=z.to(device))
    deq = s.double().repeat_interleave(group, 1) * (v.double() - z.double().repeat_interleave(group, 1))
    want = x.double() @ deq.T
    u = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[dtype]
    bound = u * want.abs() + (k + 64) * 2.0 ** -23 * (x.double().abs() @ deq.abs().T)
    assert y.dtype == dtype and ((y.cpu().double() - want).abs() <= bound).all()
    with pytest.raises(ValueError, match="zeros dtype f32 must be i8"):
        kernelkit.linear_weight_only(x, q, s, bits, group, zeros=z.float())
    with pytest.raises(ValueError, match=rf"zeros shape \[{n}, 1\] must be"):
        kernelkit.linear_weight_only(x, q, s, bits, group, zeros=z[:, :1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_weight_only_linear_perm_gathers_x(device, m, index_dtype):
    """perm= (act-order): the same bits as the call on x[..., perm] (the GEMV at 1 token, tensor cores at 5), and an
    index outside [0, k) refused naming it."""
    g = torch.Generator().manual_seed(m)
    n, k = 48, 256
    v = torch.randint(-8, 8, (n, k), generator=g, dtype=torch.int8)
    q = kernelkit.formats.pack_int4(v).to(device)
    s = (torch.rand(n, k // 128, generator=g) * 0.01 + 0.001).to(device)
    z = torch.randint(-8, 9, (n, k // 128), generator=g, dtype=torch.int8).to(device)
    x = (torch.rand(m, k, generator=g) * 2 - 1).to(torch.float16).to(device)
    perm = torch.randperm(k, generator=g).to(index_dtype).to(device)
    y = kernelkit.linear_weight_only(x, q, s, 4, 128, zeros=z, perm=perm)
    want = kernelkit.linear_weight_only(x[..., perm].contiguous(), q, s, 4, 128, zeros=z)
    assert torch.equal(y, want)
    bad = perm.clone()
    bad[7] = k
    with pytest.raises(ValueError, match=r"perm\[7\] = 256 must be an input of x in \[0, k = 256\)"):
        kernelkit.linear_weight_only(x, q, s, 4, 128, zeros=z, perm=bad)  # the CPU (and CUDA in debug mode) raise here,
        kernelkit.check_errors()                                           # CUDA otherwise here
    with pytest.raises(ValueError, match="perm dtype f32 must be i32 or i64"):
        kernelkit.linear_weight_only(x, q, s, 4, 128, perm=perm.float())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_op_scratch_comes_from_torchs_allocator():
    """An op's temporaries (act-order's gathered x) are allocated by torch's caching allocator: one allocation more
    than the same call without perm (its output), none outside torch's pool."""
    g = torch.Generator().manual_seed(3)
    n, k = 64, 512
    q = kernelkit.formats.pack_int4(torch.randint(-8, 8, (n, k), generator=g, dtype=torch.int8)).cuda()
    s = (torch.rand(n, k // 128, generator=g) * 0.01 + 0.001).cuda()
    x = torch.rand(1, k, generator=g).half().cuda()
    perm = torch.randperm(k, generator=g).to(torch.int32).cuda()

    def allocations(call):
        call()  # warm: plans and cached blocks
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        call()
        return torch.cuda.memory_stats()["allocation.all.allocated"] - before

    plain = allocations(lambda: kernelkit.linear_weight_only(x, q, s, 4, 128))
    gathered = allocations(lambda: kernelkit.linear_weight_only(x, q, s, 4, 128, perm=perm))
    assert gathered == plain + 1


@pytest.mark.parametrize("device", DEVICES)
def test_w8a8_linear_matches_exact_integer_matmul(device):
    w = rand(200, 272, dtype=torch.float32, device=device, lo=-0.1, hi=0.1)
    qw, sw = kernelkit.quantize_weight(w, bits=8)
    x = rand(37, 272, dtype=torch.float16, device=device)
    xq, sx = kernelkit.quantize_per_token(x)
    assert xq.dtype == torch.int8 and sx.shape == (37,)
    # the activation quantization: x = q s up to half a step
    assert ((xq.double() * sx.double()[:, None] - x.double()).abs() <= 0.5 * sx.double()[:, None] + 1e-6).all()
    bias = rand(200, dtype=torch.float16, device=device)
    y = kernelkit.linear_w8a8(xq, sx, qw, sw, bias, out_dtype=torch.float16)
    exact = (xq.cpu().long() @ qw.cpu().long().T).double()  # int64: exact
    want = exact * sx.cpu().double()[:, None] * sw.cpu().double() + bias.cpu().double()
    assert (y.cpu().double() - want).abs().max().item() <= 1e-3 * (1 + want.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fp8_per_token_matches_torch_bit_for_bit(device, dtype):
    """quantize_per_token(x, torch.float8_e4m3fn) against torch's own e4m3 rounding of the fp32 quotient: s = max|x| /
    448 and every q byte equal; an all-zero row gives s = 0 and q = 0; x = q s within half an e4m3 step."""
    if not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    x = rand(37, 272, dtype=dtype, device=device, lo=-3.0, hi=3.0)
    x[5] = 0
    x[9, ::5] *= 1e-4  # quotients in e4m3's subnormal range
    q, s = kernelkit.quantize_per_token(x, dtype=torch.float8_e4m3fn)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (37,) and s.dtype == torch.float32
    xf = x.cpu().float()
    s_want = (xf.abs().amax(-1).double() / 448).float()
    assert torch.equal(s.cpu(), s_want)
    quotient = torch.where(s_want[:, None] == 0, torch.zeros_like(xf), xf / s_want[:, None])
    q_want = quotient.clamp(-448, 448).to(torch.float8_e4m3fn)
    assert torch.equal(q.cpu().view(torch.uint8), q_want.view(torch.uint8))
    assert s[5].item() == 0 and (q[5].float() == 0).all()
    err = (q.cpu().double() * s.cpu().double()[:, None] - xf.double()).abs()
    assert (err <= xf.double().abs() / 16 + s.cpu().double()[:, None] * 2.0 ** -10).all()  # 3 mantissa bits


def _codes_want(xf, s, qdtype):
    """The codes by definition from torch's own arithmetic: the fp32 quotient x / s (0 where s = 0), rounded by
    torch's float8_e4m3fn conversion (nearest even) after clamping to +-448, or torch.round (half to even) clamped to
    +-127; as bytes."""
    quotient = torch.where(s == 0, torch.zeros_like(xf), xf / torch.where(s == 0, torch.ones_like(s), s))
    if qdtype == torch.float8_e4m3fn:
        return quotient.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
    return quotient.round().clamp(-127, 127).to(torch.int8)


def _span_data(rows, k, dtype, device):
    """x in [-3, 3] with every 5th value of the last row at 1e-5 of the rest (e4m3-subnormal quotients)."""
    x = rand(rows, k, dtype=torch.float32, device="cpu", lo=-3.0, hi=3.0)
    x[-1, ::5] *= 1e-5
    return x.to(dtype).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("qdtype", [torch.float8_e4m3fn, torch.int8])
@pytest.mark.parametrize("static", [False, True])
def test_per_tensor_matches_torch_bit_for_bit(device, dtype, qdtype, static):
    """quantize_per_tensor: s = max|x| / 448 (or 127) as fp32 (dynamic), or the given scale left as it is (static, 1.5 /
    qmax: |x| past 1.5 saturates); every code equal to torch's rounding of the fp32 quotient; leading dims kept."""
    if qdtype == torch.float8_e4m3fn and not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    qmax = 448 if qdtype == torch.float8_e4m3fn else 127
    x = _span_data(37, 272, dtype, device).reshape(37, 2, 136)
    scale = torch.tensor([1.5 / qmax], dtype=torch.float32, device=device) if static else None
    q, s = kernelkit.quantize_per_tensor(x, dtype=qdtype, scale=scale)
    assert q.shape == x.shape and q.dtype == qdtype and s.shape == (1,) and s.dtype == torch.float32
    xf = x.cpu().float()
    s_want = torch.tensor([1.5 / qmax]).float() if static else (xf.abs().amax().double() / qmax).float().reshape(1)
    assert torch.equal(s.cpu(), s_want)
    if static:
        assert s is scale
    assert torch.equal(code_bits(q).cpu(), _codes_want(xf, s_want, qdtype))
    # all zeros: s = 0 and q = 0
    q0, s0 = kernelkit.quantize_per_tensor(torch.zeros(3, 64, dtype=dtype, device=device), dtype=qdtype)
    assert s0.item() == 0 and (q0.float() == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("qdtype", [torch.float8_e4m3fn, torch.int8])
@pytest.mark.parametrize("group", [64, 128])
@pytest.mark.parametrize("column_major", [False, True])
def test_per_token_group_matches_torch_bit_for_bit(device, dtype, qdtype, group, column_major):
    """quantize_per_token_group: s[t, g] = max|x[t, group g]| / qmax (an all-zero group: s = 0, q = 0), codes as
    torch rounds them; column-major scales come back as the [m, k / group] view of a [k / group, m'] buffer (m' =
    m rounded up to 4)."""
    if qdtype == torch.float8_e4m3fn and not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    qmax = 448 if qdtype == torch.float8_e4m3fn else 127
    m, k = 37, 384
    x = _span_data(m, k, dtype, device)
    x[5, :group] = 0
    q, s = kernelkit.quantize_per_token_group(x, group=group, dtype=qdtype, column_major_scales=column_major)
    assert q.shape == (m, k) and q.dtype == qdtype and s.shape == (m, k // group) and s.dtype == torch.float32
    if column_major:
        assert s.stride() == (1, 40)
    xf = x.cpu().float()
    s_want = (xf.reshape(m, k // group, group).abs().amax(-1).double() / qmax).float()
    assert torch.equal(s.cpu(), s_want)
    assert s_want[5, 0] == 0
    assert torch.equal(code_bits(q).cpu(), _codes_want(xf, s_want.repeat_interleave(group, 1), qdtype))
    # leading dims (row-major scales)
    q3, s3 = kernelkit.quantize_per_token_group(x.reshape(1, m, k), group=group, dtype=qdtype)
    assert q3.shape == (1, m, k) and s3.shape == (1, m, k // group) and torch.equal(s3[0].cpu(), s_want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("qdtype", [torch.float8_e4m3fn, torch.int8])
def test_blockwise_matches_torch_bit_for_bit(device, dtype, qdtype):
    """quantize_blockwise on w [300, 200]: 3 x 2 blocks of 128 x 128, the last row and column partial; the first block
    all zero (s = 0); s = max|w| / qmax over each block, codes as torch rounds them."""
    if qdtype == torch.float8_e4m3fn and not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    qmax = 448 if qdtype == torch.float8_e4m3fn else 127
    w = _span_data(300, 200, dtype, "cpu")
    w[:128, :128] = 0
    w = w.to(device)
    q, s = kernelkit.quantize_blockwise(w, dtype=qdtype)
    assert q.shape == (300, 200) and q.dtype == qdtype and s.shape == (3, 2) and s.dtype == torch.float32
    wf = w.cpu().float()
    padded = torch.zeros(384, 256)
    padded[:300, :200] = wf.abs()
    s_want = (padded.reshape(3, 128, 2, 128).amax((1, 3)).double() / qmax).float()
    assert torch.equal(s.cpu(), s_want)
    assert s_want[0, 0] == 0
    per_element = s_want.repeat_interleave(128, 0).repeat_interleave(128, 1)[:300, :200]
    assert torch.equal(code_bits(q).cpu(), _codes_want(wf, per_element, qdtype))


def test_span_quantizers_refuse_bad_input():
    x = torch.randn(4, 128)
    with pytest.raises(ValueError, match="quantize_per_token_group_fp8: group must be 64 or 128, got 96"):
        kernelkit.quantize_per_token_group(x, group=96)
    with pytest.raises(ValueError, match="quantize_per_token_group_int8: k = 192 must be a multiple of group = 128"):
        kernelkit.quantize_per_token_group(torch.randn(4, 192), dtype=torch.int8)
    with pytest.raises(ValueError, match=r"quantize_per_token_group: x must be \[m, k\] \(column-major scales\)"):
        kernelkit.quantize_per_token_group(x.reshape(2, 2, 128), column_major_scales=True)
    with pytest.raises(ValueError, match="quantize_per_tensor: dtype must be torch.float8_e4m3fn or torch.int8"):
        kernelkit.quantize_per_tensor(x, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"quantize_per_tensor_fp8: scale shape \[2\] must be \[1\]"):
        kernelkit.quantize_per_tensor(x, scale=torch.ones(2))
    with pytest.raises(ValueError, match="quantize_per_tensor_int8: scale = -1 must be finite and > 0"):
        kernelkit.quantize_per_tensor(x, dtype=torch.int8, scale=-torch.ones(1))
    with pytest.raises(ValueError, match="quantize_per_tensor_fp8: x row 1 holds inf at column 3"):
        kernelkit.quantize_per_tensor(torch.where(torch.arange(512).reshape(4, 128) == 131, float("inf"), x))
    with pytest.raises(ValueError, match=r"quantize_blockwise: w must be \[n, k\]"):
        kernelkit.quantize_blockwise(torch.randn(128))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scaling", ["per_tensor", "rowwise"])
def test_fp8_linear_matches_fp64_and_scaled_mm(device, out_dtype, scaling):
    """linear_fp8 on per-token FP8 activations and per-channel FP8 weights (or one scale each) against the fp64 product
    of the same e4m3 values, within the FP8 sums' bound (docs/tolerances.md), and on CUDA against torch._scaled_mm
    with the same scales (cuBLASLt's FP8 matmul too: within both output roundings and both sums' bounds)."""
    if not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    w = rand(264, 528, dtype=torch.bfloat16, device=device, lo=-0.1, hi=0.1)
    x = rand(37, 528, dtype=torch.bfloat16, device=device, lo=-3.0, hi=3.0)
    xq, sx = kernelkit.quantize_per_token(x, dtype=torch.float8_e4m3fn)
    wq, sw = kernelkit.quantize_per_token(w, dtype=torch.float8_e4m3fn)  # rows of w: per output channel
    if scaling == "per_tensor":
        sx, sw = sx.amax().reshape(1), sw.amax().reshape(1)  # q values reused with one scale: a different product
    bias = rand(264, dtype=out_dtype, device=device)
    y = kernelkit.linear_fp8(xq, sx, wq, sw, bias, out_dtype=out_dtype)
    assert y.dtype == out_dtype and y.shape == (37, 264)
    prod = xq.cpu().double() @ wq.cpu().double().T
    scaled = prod * sx.cpu().double().reshape(-1, 1) * sw.cpu().double().reshape(1, -1)
    want = scaled + bias.cpu().double()
    l1 = (xq.cpu().double().abs() @ wq.cpu().double().abs().T) * (sx.cpu().double().reshape(-1, 1) *
                                                                   sw.cpu().double().reshape(1, -1))
    ulp = 2.0 ** -10 if out_dtype == torch.float16 else 2.0 ** -7
    sums = (2.0 ** -13 * min(528, 128) / 32 + 528 * 2.0 ** -24) * l1  # the FP8 sums' bound (docs/tolerances.md)
    allowed = ulp * want.abs() + 2.0 ** -22 * scaled.abs() + sums + 1e-6
    assert ((y.cpu().double() - want).abs() <= allowed).all()
    if device != "cpu":
        # torch's row-wise scaling writes bf16 only; the bias is added here in fp64 (same for both scalings).
        ref_dtype = torch.bfloat16 if scaling == "rowwise" else out_dtype
        # torch._scaled_mm wants n a multiple of 16: w padded with 8 zero rows (scale 1), the padding cut off.
        pad = torch.zeros(8, 528, dtype=torch.uint8, device=device)
        wq16 = torch.cat([wq.view(torch.uint8), pad]).view(torch.float8_e4m3fn)
        sw16 = torch.cat([sw, sw.new_ones(8)]) if scaling == "rowwise" else sw
        ref = torch._scaled_mm(xq, wq16.T, scale_a=sx.reshape(-1, 1) if scaling == "rowwise" else sx.reshape(()),
                               scale_b=sw16.reshape(1, -1) if scaling == "rowwise" else sw16.reshape(()),
                               out_dtype=ref_dtype)[:, :264].double() + bias.double()
        ref_ulp = 2.0 ** -7 if ref_dtype == torch.bfloat16 else ulp
        # The two may pick different cuBLASLt algorithms: each within the sums' bound.
        assert ((y.double() - ref).abs() <= (ulp + ref_ulp) * ref.abs() + 2 * sums.to(device) + 1e-3).all()


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_linear_refuses_bad_inputs(device):
    if not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    xq = torch.zeros(4, 32, dtype=torch.float8_e4m3fn, device=device)
    wq = torch.zeros(8, 32, dtype=torch.float8_e4m3fn, device=device)
    s4, s8, s1 = (torch.ones(n, device=device) for n in (4, 8, 1))
    with pytest.raises(ValueError, match=r"x_scales and w_scales must be both \[1\]"):
        kernelkit.linear_fp8(xq, s1, wq, s8)
    with pytest.raises(ValueError, match="xq dtype i8 must be f8e4m3"):
        kernelkit.linear_fp8(xq.view(torch.int8), s4, wq, s8)
    with pytest.raises(ValueError, match="k = 24 must be a positive multiple of 16"):
        kernelkit.linear_fp8(xq[:, :24], s4, wq[:, :24].contiguous(), s8)
    assert kernelkit.linear_fp8(xq, s4, wq, s8).abs().max().item() == 0  # zeros in, zeros out: the call itself works


def _block_scaled_inputs(m, n, k, out_dtype, device, x_scales_layout):
    """DeepSeek-V3's FP8 linear: activations through quantize_per_token_group (1 x 128) and weights through
    quantize_blockwise (128 x 128), never zeros; x_scales token-major with ld m (cuBLASLt's layout), ld rounded up to 4
    (the TMA form) or row major."""
    x = rand(m, k, dtype=torch.bfloat16, device=device, lo=-3.0, hi=3.0)
    w = rand(n, k, dtype=torch.bfloat16, device=device, lo=-0.1, hi=0.1)
    column_major = x_scales_layout != "row_major"
    xq, sx = kernelkit.quantize_per_token_group(x, 128, column_major_scales=column_major,
                                                tma_aligned=x_scales_layout == "tma_aligned")
    wq, sw = kernelkit.quantize_blockwise(w)
    return xq, sx, wq, sw, rand(n, dtype=out_dtype, device=device)


def _block_scaled_want(xq, sx, wq, sw, bias):
    """The float64 dequantize-then-matmul, and the FP8 sums' bound of docs/tolerances.md applied per 128-wide block: the
    per-block scaled sums of |products| (2^-13 at each of a block's 4 MMA steps, k 2^-24 for the fp32 sums)."""
    k = xq.shape[1]
    xd, wd = xq.cpu().double(), wq.cpu().double()
    sxe = sx.cpu().double().repeat_interleave(128, 1)[:, :k]
    swe = sw.cpu().double().repeat_interleave(128, 0)[:wq.shape[0]].repeat_interleave(128, 1)[:, :k]
    scaled = (xd * sxe) @ (wd * swe).T
    l1 = (xd.abs() * sxe) @ (wd.abs() * swe).T
    return scaled + bias.cpu().double(), scaled, (2.0 ** -13 * 4 + k * 2.0 ** -24) * l1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 37])
@pytest.mark.parametrize("x_scales_layout", ["token_major", "tma_aligned", "row_major"])
def test_fp8_block_scaled_linear_matches_dequantized_matmul(device, out_dtype, m, x_scales_layout):
    """linear_fp8 with block scales (DeepSeek-V3: x_scales [m, k / 128], w_scales [ceil(n / 128), k / 128]) against the
    float64 product of the dequantized inputs, within the FP8 sums' bound per block; n 264 leaves a partial last
    128-row block, k 384 pads the weight scales' rows (3 blocks -> 4). On CUDA only cuBLASLt's layouts run (token-major
    x_scales with ld m; the others are refused, naming the layout) and only on sm_90."""
    if not fp8_runs(device):
        pytest.skip("no FP8 on this GPU (sm_89+)")
    if device == "cuda" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("cuBLASLt's block-scaled FP8 matmul runs on sm_90 only")
    xq, sx, wq, sw, bias = _block_scaled_inputs(m, 264, 384, out_dtype, device, x_scales_layout)
    assert sx.shape == (m, 3) and sw.shape == (3, 3) and sw.stride() == (4, 1)
    if x_scales_layout == "token_major":
        assert sx.stride() == (1, m)
    # cuBLASLt's layout: token-major with ld m (tma_aligned gives it when m % 4 == 0; row major when m == 1)
    refused = device == "cuda" and ((x_scales_layout == "tma_aligned" and m % 4 != 0) or
                                    (x_scales_layout == "row_major" and m > 1))
    if refused:
        with pytest.raises(ValueError, match="on CUDA, x_scales must be token-major with strides"):
            kernelkit.linear_fp8(xq, sx, wq, sw, bias, out_dtype=out_dtype)
        return
    y = kernelkit.linear_fp8(xq, sx, wq, sw, bias, out_dtype=out_dtype)
    assert y.dtype == out_dtype and y.shape == (m, 264)
    want, scaled, sums = _block_scaled_want(xq, sx, wq, sw, bias)
    ulp = 2.0 ** -10 if out_dtype == torch.float16 else 2.0 ** -7
    allowed = ulp * want.abs() + 2.0 ** -22 * (scaled.abs() + want.abs()) + sums + 1e-5
    assert ((y.cpu().double() - want).abs() <= allowed).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch._scaled_mm's block scales need a GPU")
@pytest.mark.parametrize("m", [1, 16, 129])
def test_fp8_block_scaled_linear_matches_scaled_mm_blockwise(m):
    """Against torch._scaled_mm's DeepSeek-style mode (1 x 128 x 128 x 128 scales, cuBLASLt too) on the same codes and
    scales: within both output roundings and both sums' bounds. k 512 (4 blocks: the weight scales' rows need no
    padding, so torch's layout checks agree with either of its versions), n 272 (torch wants n % 16 == 0)."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("cuBLASLt's block-scaled FP8 matmul runs on sm_90 only")
    xq, sx, wq, sw, _ = _block_scaled_inputs(m, 272, 512, torch.bfloat16, "cuda", "token_major")
    try:
        ref = torch._scaled_mm(xq, wq.T, scale_a=sx, scale_b=sw.T, out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, ValueError) as e:
        pytest.skip(f"torch._scaled_mm refuses block scales here: {e}")
    y = kernelkit.linear_fp8(xq, sx, wq, sw, out_dtype=torch.bfloat16)
    _, scaled, sums = _block_scaled_want(xq, sx, wq, sw, torch.zeros(272, dtype=torch.float64))
    allowed = 2 * 2.0 ** -7 * ref.double().abs() + 2 * 2.0 ** -22 * scaled.abs().cuda() + 2 * sums.cuda() + 1e-5
    assert ((y.double() - ref.double()).abs() <= allowed).all()


def test_fp8_block_scaled_linear_refuses_bad_inputs():
    xq = torch.zeros(4, 256, dtype=torch.float8_e4m3fn)
    wq = torch.zeros(136, 256, dtype=torch.float8_e4m3fn)
    sx, sw = torch.ones(4, 2), torch.ones(2, 2)
    assert kernelkit.linear_fp8(xq, sx, wq, sw).abs().max().item() == 0  # zeros in, zeros out: the call itself works
    with pytest.raises(ValueError, match=r"linear_fp8_blockwise: x_scales shape \[4, 3\] must be \[4, 2\]"):
        kernelkit.linear_fp8(xq, torch.ones(4, 3), wq, sw)
    with pytest.raises(ValueError, match=r"linear_fp8_blockwise: w_scales shape \[1, 2\] must be \[2, 2\]"):
        kernelkit.linear_fp8(xq, sx, wq, torch.ones(1, 2))
    with pytest.raises(ValueError, match="linear_fp8_blockwise: k = 144 must be a multiple of 128"):
        kernelkit.linear_fp8(xq[:, :144].contiguous(), sx, wq[:, :144].contiguous(), sw)
    with pytest.raises(ValueError, match="fast_accumulation is not available with block scales"):
        kernelkit.linear_fp8(xq, sx, wq, sw, fast_accumulation=True)
    with pytest.raises(ValueError, match=r"x_scales strides \(4, 2\) must be \(2, 1\) \(row major\)"):
        kernelkit.linear_fp8(xq, torch.ones(4, 4)[:, ::2], wq, sw)
    # row-wise [m, 1] x [1, n] scales stay row-wise; a single element each stays per tensor
    assert kernelkit.linear_fp8(xq, torch.ones(4, 1), wq, torch.ones(1, 136)).shape == (4, 136)
    assert kernelkit.linear_fp8(xq[:1], torch.ones(1, 1), wq[:8], torch.ones(1, 1)).shape == (1, 8)


@pytest.mark.parametrize("out_features,in_features", [(40, 128), (32, 96), (8, 32)])
def test_int4_linear_refuses_shapes_the_layout_cannot_hold(out_features, in_features):
    """Int4Linear (and kernelkit.quantize(bits=4), naming the module) refuse out_features % 16 or in_features % 64,
    saying to pad; Int8Linear takes them."""
    linear = torch.nn.Linear(in_features, out_features)
    msg = (rf"Int4Linear: INT4 weights need out_features a multiple of 16 and in_features a multiple of 64, got "
           rf"out_features {out_features}, in_features {in_features}: pad the weight")
    with pytest.raises(ValueError, match=msg):
        kernelkit.nn.Int4Linear.from_linear(linear, 64)
    model = torch.nn.Sequential(torch.nn.Linear(128, 64), linear)
    with pytest.raises(ValueError, match=rf"quantize: 1: {msg}"):
        kernelkit.quantize(model, bits=4, group=64)
    assert kernelkit.nn.Int8Linear.from_linear(linear).qweight.shape == (out_features, in_features)


@pytest.mark.parametrize("kind,kwargs,min_cos", [("Int8Linear", dict(bits=8), 0.99),
                                                 ("Int4Linear", dict(bits=4, group=64), 0.95),
                                                 ("W8A8Linear", dict(bits=8, activations=True), 0.99),
                                                 ("Fp8Linear", dict(bits="fp8"), 0.99)])
def test_quantize_a_llama_and_report(kind, kwargs, min_cos):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, 256, (1, 12))
    with torch.no_grad():
        want = model(ids).logits.double()
        report = kernelkit.quantize(model, **kwargs)
        got = model(ids).logits.double()
    assert report["replaced"] == {kind: 2 * 7}  # q, k, v, o, gate, up, down per layer; lm_head kept
    assert report["bytes_after"] < report["bytes_before"]
    cos = torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0).item()
    assert cos > min_cos, cos


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    h = torch.float16
    w8 = torch.randn(16, 128, device=device) * 0.1
    q8, s8 = kernelkit.quantize_weight(w8, 8)
    for op, args in [
        (kernelkit.ops.quantize_weight.default, (torch.empty(16, 128, dtype=torch.int8, device=device),
                                                 torch.empty(16, device=device), w8, 8, 0)),
        (kernelkit.ops.linear_weight_only.default, (torch.empty(3, 16, device=device, dtype=h),
                                                    torch.randn(3, 128, device=device, dtype=h), q8, s8, 8, 0, None)),
        (kernelkit.ops.linear_weight_only.default, (torch.empty(3, 16, device=device, dtype=h),
                                                    torch.randn(3, 128, device=device, dtype=h), q8, s8, 8, 0, None,
                                                    None, torch.randperm(128, device=device).int())),
        (kernelkit.ops.quantize_per_token.default, (torch.empty(3, 128, dtype=torch.int8, device=device),
                                                    torch.empty(3, device=device), torch.randn(3, 128, device=device))),
        (kernelkit.ops.linear_w8a8.default, (torch.empty(3, 16, device=device, dtype=h),
                                             torch.randint(-127, 128, (3, 128), dtype=torch.int8, device=device),
                                             torch.rand(3, device=device), q8, s8, None)),
    ]:
        torch.library.opcheck(op, args)
    x = torch.randn(3, 128, device=device)
    colmajor = torch.empty(2, 4, device=device)[:, :3]
    for op, args in [
        (kernelkit.ops.quantize_per_tensor.default, (torch.empty(3, 128, dtype=torch.int8, device=device),
                                                     torch.empty(1, device=device), x, False)),
        (kernelkit.ops.quantize_per_token_group.default, (torch.empty(3, 128, dtype=torch.int8, device=device),
                                                          torch.empty(3, 2, device=device), x, 64, False)),
        (kernelkit.ops.quantize_per_token_group.default, (torch.empty(3, 128, dtype=torch.int8, device=device),
                                                          colmajor, x, 64, True)),
        (kernelkit.ops.quantize_blockwise.default, (torch.empty(3, 128, dtype=torch.int8, device=device),
                                                    torch.empty(1, 1, device=device), x)),
    ]:
        torch.library.opcheck(op, args)
    if fp8_runs(device):
        f8 = torch.empty(3, 128, dtype=torch.float8_e4m3fn, device=device)
        for op, args in [(kernelkit.ops.quantize_per_tensor.default, (f8, torch.empty(1, device=device), x, False)),
                         (kernelkit.ops.quantize_per_token_group.default, (f8, torch.empty(3, 1, device=device), x,
                                                                           128, False)),
                         (kernelkit.ops.quantize_blockwise.default, (f8, torch.empty(1, 1, device=device), x))]:
            torch.library.opcheck(op, args, test_utils=("test_faketensor",))
        # The fake kernel only: opcheck's other checks do arithmetic on the outputs, which
        # torch has no float8 kernels for ("mul_cpu_reduced_float" not implemented for 'Float8_e4m3fn').
        torch.library.opcheck(kernelkit.ops.quantize_per_token_fp8.default,
                              (torch.empty(3, 128, dtype=torch.float8_e4m3fn, device=device),
                               torch.empty(3, device=device), torch.randn(3, 128, device=device)),
                              test_utils=("test_faketensor",))
        torch.library.opcheck(kernelkit.ops.linear_fp8.default,
                              (torch.empty(3, 16, dtype=torch.bfloat16, device=device),
                               torch.randn(3, 128, device=device).to(torch.float8_e4m3fn), torch.rand(3, device=device),
                               torch.randn(16, 128, device=device).to(torch.float8_e4m3fn),
                               torch.rand(16, device=device), None, False),
                              test_utils=("test_faketensor",))
        if device == "cpu" or torch.cuda.get_device_capability() == (9, 0):  # block scales: sm_90 only
            torch.library.opcheck(kernelkit.ops.linear_fp8.default,
                                  (torch.empty(3, 16, dtype=torch.bfloat16, device=device),
                                   torch.randn(3, 256, device=device).to(torch.float8_e4m3fn),
                                   torch.rand(2, 3, device=device).T,
                                   torch.randn(16, 256, device=device).to(torch.float8_e4m3fn),
                                   torch.rand(1, 2, device=device), None, False),
                                  test_utils=("test_faketensor",))
