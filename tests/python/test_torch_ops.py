"""kernelkit's PyTorch ops: values against a float64 formula, torch.library.opcheck, torch.compile(fullgraph=True),
bad input as exceptions naming the argument. CPU always; CUDA (and CUDA graphs, a non-default stream) when a GPU is
present."""
import math

import pytest
import torch

import kernelkit

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# One ulp in [1, 2) of each dtype (README "Tolerances"): outputs are rounded once from fp32 math.
RTOL = {torch.float32: 1e-5, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
ATOL = {torch.float32: 1e-6, torch.float16: 1e-5, torch.bfloat16: 1e-4}


def close(got, want, dtype, scale=1.0):
    """Every element within atol + rtol |want| (scale widens it for composed references that round twice)."""
    got, want = got.double(), want.double()
    bad = (got - want).abs() > scale * (ATOL[dtype] + RTOL[dtype] * want.abs())
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} elements off; worst {float((got - want).abs().max())}"


def close_attention(got, q, k, v, dtype):
    """Attention's derived bound (src/ops/attention/attention_cases.cpp): the tensor-core kernels round P to the dtype for
    the P V product, so each element may be off by rtol (|want| + m / 2) with m = sum_j p_j |v_j| / l, the float64
    attention over |v|. q [b, s, h, d], k / v [b, s_k, h_kv, d]."""
    def sdpa(vv):
        g = q.shape[2] // k.shape[2]
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).double(), k.transpose(1, 2).double().repeat_interleave(g, 1),
            vv.transpose(1, 2).double().repeat_interleave(g, 1)).transpose(1, 2)
    want, m = sdpa(v), sdpa(v.abs())
    bad = (got.double() - want).abs() > ATOL[dtype] + RTOL[dtype] * (want.abs() + m / 2)
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} elements off; worst {float((got - want).abs().max())}"


def rms_ref(x, w=None, eps=1e-6, offset=0.0):
    x = x.double()
    y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * (offset + w.double())


def ln_ref(x, w=None, b=None, eps=1e-5):
    x = x.double()
    m = x.mean(-1, keepdim=True)
    y = (x - m) / torch.sqrt((x - m).pow(2).mean(-1, keepdim=True) + eps)
    y = y if w is None else y * w.double()
    return y if b is None else y + b.double()


def rand(*shape, dtype, device, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, dtype=torch.float32, device=device) * (hi - lo) + lo).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", [64, 111, 769, 4096])
def test_norms_match_float64(device, dtype, hidden):
    torch.manual_seed(hidden)
    x = rand(7, hidden, dtype=dtype, device=device) + 0.3
    w = rand(hidden, dtype=dtype, device=device, lo=0.5, hi=1.5)
    b = rand(hidden, dtype=dtype, device=device, lo=-0.5, hi=0.5)
    close(kernelkit.rms_norm(x, w, 1e-6), rms_ref(x, w).to(dtype), dtype)
    close(kernelkit.rms_norm(x, None, 1e-6), rms_ref(x).to(dtype), dtype)
    close(kernelkit.rms_norm(x, w, 1e-6, weight_offset=1.0), rms_ref(x, w, offset=1.0).to(dtype), dtype)
    close(kernelkit.layer_norm(x, w, b, 1e-5), ln_ref(x, w, b).to(dtype), dtype, scale=2.0)
    gelu = torch.nn.functional.gelu(rms_ref(x, w), approximate="tanh")
    close(kernelkit.rms_norm_gelu(x, w, 1e-6), gelu.to(dtype), dtype, scale=2.0)
    # fused add: residual = round(x + residual); x = rms_norm(residual)
    r = rand(7, hidden, dtype=dtype, device=device)
    r_want = (x.double() + r.double()).to(dtype)
    xo, ro = kernelkit.fused_add_rms_norm(x.clone(), r.clone(), w, 1e-6)
    assert torch.equal(ro, r_want)
    close(xo, rms_ref(r_want, w).to(dtype), dtype)
    # ada: layer_norm(x) * (1 + scale[b]) + shift[b]
    xa = rand(2, 5, hidden, dtype=dtype, device=device)
    sc, sh = rand(2, hidden, dtype=dtype, device=device), rand(2, hidden, dtype=dtype, device=device)
    want = ln_ref(xa, eps=1e-6) * (1 + sc.double()[:, None]) + sh.double()[:, None]
    close(kernelkit.ada_layer_norm(xa, sc, sh, eps=1e-6), want.to(dtype), dtype, scale=3.0)


ACTS = {"gelu": lambda v: torch.nn.functional.gelu(v), "silu": torch.nn.functional.silu,
        "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh")}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 111, 4096])
def test_activations_match_float64(device, dtype, d):
    torch.manual_seed(d)
    x = rand(7, 2 * d, dtype=dtype, device=device, lo=-4, hi=4)
    a, b = x[:, :d], x[:, d:]  # strided views: rows 2d apart
    for name, f in ACTS.items():
        close(getattr(kernelkit, name)(a), f(a.double()).to(dtype), dtype)
        close(getattr(kernelkit, name + "_and_mul")(x), (f(a.double()) * b.double()).to(dtype), dtype)
    close(kernelkit.geglu(a, b), (ACTS["gelu"](a.double()) * b.double()).to(dtype), dtype)
    close(kernelkit.swiglu(a, b), (ACTS["silu"](a.double()) * b.double()).to(dtype), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_causal(device, dtype):
    torch.manual_seed(0)
    x = rand(2, 3, 5, 40, dtype=dtype, device=device, lo=-8, hi=8)
    close(kernelkit.softmax(x, 0.5), torch.softmax(x.double() * 0.5, -1).to(dtype), dtype, scale=2.0)
    sq, sk = 5, 40
    mask = torch.ones(sq, sk, dtype=torch.bool, device=device).tril(sk - sq)
    want = torch.softmax((x.double() * 0.5).masked_fill(~mask, float("-inf")), -1)
    close(kernelkit.softmax(x, 0.5, causal=True), want.to(dtype), dtype, scale=2.0)
    inf_row = torch.full((1, 16), float("-inf"), dtype=dtype, device=device)
    assert torch.equal(kernelkit.softmax(inf_row), torch.zeros_like(inf_row))


def rope_ref(x, cos, sin, style):
    """x [tokens, heads, d] float64; cos/sin [tokens, rot/2]: the HF formulas (rotate_half for neox)."""
    rot = 2 * cos.shape[-1]
    y = x.clone()
    c, s = cos[:, None, :], sin[:, None, :]
    if style == "neox":
        a, b = x[..., : rot // 2], x[..., rot // 2: rot]
        y[..., : rot // 2], y[..., rot // 2: rot] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        y[..., 0:rot:2], y[..., 1:rot:2] = a * c - b * s, b * c + a * s
    return y


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("head_dim,rot", [(64, 64), (128, 64)])
def test_rotary_embedding(device, dtype, style, head_dim, rot):
    torch.manual_seed(head_dim + rot)
    tokens, h, hk = 9, 4, 2
    qkv = rand(tokens, (h + 2 * hk) * head_dim, dtype=dtype, device=device, lo=-2, hi=2)
    q = qkv[:, : h * head_dim].view(tokens, h, head_dim)  # strided views of a fused projection
    k = qkv[:, h * head_dim: (h + hk) * head_dim].view(tokens, hk, head_dim)
    pos = torch.randint(0, 64, (tokens,), device=device)
    inv = 10000.0 ** (-torch.arange(0, rot, 2, dtype=torch.float64, device=device) / rot)
    ang = torch.arange(64, dtype=torch.float64, device=device)[:, None] * inv[None]
    cache = torch.cat([ang.cos(), ang.sin()], -1).float()
    qw, kw = rope_ref(q.double(), ang.cos()[pos], ang.sin()[pos], style), rope_ref(k.double(), ang.cos()[pos],
                                                                                  ang.sin()[pos], style)
    qo, ko = kernelkit.rotary_embedding(q, k, pos, cache, style=style, inplace=False)
    close(qo, qw.to(dtype), dtype, scale=2.0)
    close(ko, kw.to(dtype), dtype, scale=2.0)
    cos_full = torch.cat([ang.cos()[pos]] * 2, -1) if style == "neox" else ang.cos()[pos].repeat_interleave(2, -1)
    sin_full = torch.cat([ang.sin()[pos]] * 2, -1) if style == "neox" else ang.sin()[pos].repeat_interleave(2, -1)
    q2, k2 = kernelkit.rotary_embedding(q, k, cos=cos_full.float(), sin=sin_full.float(), rot_dim=rot, style=style,
                                        inplace=False)
    torch.testing.assert_close(q2, qo, rtol=0, atol=0)  # per-token HF tables == cache
    kernelkit.rotary_embedding(q, k, pos, cache, style=style)  # in place
    torch.testing.assert_close(q, qo, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_every_op(device):
    x = torch.randn(6, 96, device=device)
    w = torch.rand(96, device=device) + 0.5
    b = torch.randn(96, device=device)
    xa = torch.randn(2, 3, 96, device=device)
    sc, sh = torch.randn(2, 96, device=device), torch.randn(2, 96, device=device)
    cases = [
        (kernelkit.ops.rms_norm.default, (torch.empty_like(x), x, w, 1e-6, 0.0)),
        (kernelkit.ops.rms_norm.default, (torch.empty_like(x), x, None, 1e-6, 1.0)),
        (kernelkit.ops.fused_add_rms_norm.default, (x.clone(), torch.randn_like(x), w, 1e-6, 0.0)),
        (kernelkit.ops.layer_norm.default, (torch.empty_like(x), x, w, b, 1e-5)),
        (kernelkit.ops.ada_layer_norm.default, (torch.empty_like(xa), xa, sc, sh, None, None, 1e-6)),
        (kernelkit.ops.rms_norm_gelu.default, (torch.empty_like(x), x, w, 1e-6)),
        (kernelkit.ops.activation.default, (torch.empty_like(x), x, "gelu_tanh")),
        (kernelkit.ops.act_and_mul.default, (torch.empty(6, 48, device=device), x, "silu")),
        (kernelkit.ops.act_mul.default, (torch.empty_like(x), x, torch.randn_like(x), "gelu")),
        (kernelkit.ops.softmax.default, (torch.empty_like(xa), xa, 0.5, True)),
        (kernelkit.ops.rotary_embedding_.default, (torch.randint(0, 8, (6,), device=device), torch.randn(6, 4, 16,
         device=device), torch.randn(6, 2, 16, device=device), torch.randn(8, 16, device=device), True)),
        (kernelkit.ops.rotary_embedding_cos_sin_.default, (torch.randn(6, 4, 16, device=device),
         torch.randn(6, 2, 16, device=device), torch.randn(6, 8, device=device), torch.randn(6, 8, device=device), 16,
         False)),
    ]
    h = torch.float16
    q, k = torch.randn(1, 5, 4, 64, device=device, dtype=h), torch.randn(1, 9, 2, 64, device=device, dtype=h)
    w8 = torch.randn(16, 128, device=device) * 0.1
    q8, s8 = kernelkit.quantize_weight(w8, 8)
    cases += [
        (kernelkit.ops.attention.default, (torch.empty_like(q), torch.empty(1, 4, 5, device=device), q, k, k.clone(),
                                           0.0, True, None, None)),
        (kernelkit.ops.decode_attention.default, (torch.empty(1, 1, 4, 64, device=device, dtype=h), None,
                                                  torch.randn(1, 1, 4, 64, device=device, dtype=h), k, k.clone(), None,
                                                  None, 0.0, False)),
        (kernelkit.ops.quantize_weight.default, (torch.empty(16, 128, dtype=torch.int8, device=device),
                                                 torch.empty(16, device=device), w8, 8, 0)),
        (kernelkit.ops.linear_weight_only.default, (torch.empty(3, 16, device=device, dtype=h),
                                                    torch.randn(3, 128, device=device, dtype=h), q8, s8, 8, 0, None)),
        (kernelkit.ops.quantize_per_token.default, (torch.empty(3, 128, dtype=torch.int8, device=device),
                                                    torch.empty(3, device=device), torch.randn(3, 128, device=device))),
        (kernelkit.ops.linear_w8a8.default, (torch.empty(3, 16, device=device, dtype=h),
                                             torch.randint(-127, 128, (3, 128), dtype=torch.int8, device=device),
                                             torch.rand(3, device=device), q8, s8, None)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(device, backend):
    torch._dynamo.reset()

    def block(x, residual, w):
        h = kernelkit.rms_norm(x, w, 1e-6)
        h = h * 2.0 + 1.0  # torch ops around ours stay in the same graph
        x2, r2 = kernelkit.fused_add_rms_norm(h, residual, w, 1e-6)
        return x2, r2

    x, r, w = torch.randn(4, 256, device=device), torch.randn(4, 256, device=device), torch.rand(256, device=device)
    eager = block(x.clone(), r.clone(), w)
    compiled = torch.compile(block, fullgraph=True, backend=backend)(x.clone(), r.clone(), w)
    for a, b in zip(eager, compiled):
        torch.testing.assert_close(a, b)


def test_bad_input_is_a_clear_exception():
    x = torch.randn(4, 64)
    with pytest.raises(ValueError, match=r"weight.*\[hidden=64\].*\[63\]"):
        kernelkit.rms_norm(x, torch.ones(63))
    with pytest.raises(ValueError, match="eps must be finite and > 0"):
        kernelkit.rms_norm(x, None, eps=0.0)
    with pytest.raises(ValueError, match="weight dtype f16 does not match x dtype f32"):
        kernelkit.rms_norm(x, torch.ones(64, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"x dtype i32 is not supported \(expected f32, f16 or bf16\)"):
        kernelkit.rms_norm(torch.ones(4, 64, dtype=torch.int32))
    with pytest.raises(ValueError, match="contiguous last dim"):  # the op itself takes no such view...
        kernelkit.ops.rms_norm(torch.empty(4, 64), torch.randn(64, 4).t(), None, 1e-6, 0.0)
    xt = torch.randn(2, 64, 3, 8).transpose(1, 2)  # ...the functional API copies it (attention's q/k norms)
    close(kernelkit.rms_norm(xt, None), rms_ref(xt).float(), torch.float32)
    with pytest.raises(ValueError, match="not one of gelu, gelu_tanh, silu"):
        kernelkit.ops.activation(torch.empty(4, 64), x, "relu")
    with pytest.raises(ValueError, match="multiple of 2"):
        kernelkit.silu_and_mul(torch.randn(4, 63))
    with pytest.raises(ValueError, match="residual shape"):
        kernelkit.fused_add_rms_norm(torch.randn(4, 64), torch.randn(2, 64))
    assert kernelkit.rms_norm(torch.empty(0, 64)).shape == (0, 64)  # rows = 0 is a no-op


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graph_and_side_stream():
    x, w = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16), torch.rand(4096, device="cuda").bfloat16()
    out = torch.empty_like(x)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # runs on the current (side) stream
        kernelkit.rms_norm(x, w, out=out)
    stream.synchronize()
    close(out, rms_ref(x, w).bfloat16(), torch.bfloat16)
    g = torch.cuda.CUDAGraph()
    out.zero_()
    with torch.cuda.graph(g):
        kernelkit.rms_norm(x, w, out=out)
    g.replay()
    torch.cuda.synchronize()
    close(out, rms_ref(x, w).bfloat16(), torch.bfloat16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graph_of_split_kernel_pairs():
    """The ops that launch a second kernel over stream-ordered scratch (decode's split-KV merge; the tensor-core
    weight-only linear's split-K reduction), on sm_90 as a programmatic dependent launch: captured in a CUDA graph
    (torch's default global mode), replayed into outputs poisoned with NaN, equal to the eager calls."""
    torch.manual_seed(5)
    q = torch.randn(1, 1, 32, 128, device="cuda", dtype=torch.float16)
    kc, vc = (torch.randn(1, 4096, 8, 128, device="cuda", dtype=torch.float16) for _ in range(2))  # a split cache
    w = torch.randn(64, 8192, device="cuda", dtype=torch.float16) * 0.02  # n 64, long k: split over the grid
    qw, s = kernelkit.quantize_weight(w, 8)
    x = torch.randn(16, 8192, device="cuda", dtype=torch.float16)
    want_decode, want_linear = kernelkit.decode_attention(q, kc, vc), kernelkit.linear_weight_only(x, qw, s, 8)
    close_attention(want_decode, q, kc, vc, torch.float16)
    out_decode, out_linear = torch.empty_like(want_decode), torch.empty_like(want_linear)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out_decode.copy_(kernelkit.decode_attention(q, kc, vc))
        out_linear.copy_(kernelkit.linear_weight_only(x, qw, s, 8))
    out_decode.fill_(float("nan"))
    out_linear.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out_decode, want_decode)
    assert torch.equal(out_linear, want_linear)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_ops_on_the_second_gpu():
    """Tensors on cuda:1 while cuda:0 is current: the op runs on their device (device guard) and on cuda:1's current
    stream; mixing devices is a clear error."""
    assert torch.cuda.current_device() == 0
    x, w = rand(33, 4096, dtype=torch.bfloat16, device="cuda:1"), rand(4096, dtype=torch.bfloat16, device="cuda:1")
    out = kernelkit.rms_norm(x, w)
    assert out.device == torch.device("cuda:1")
    torch.cuda.synchronize(1)
    close(out, rms_ref(x, w).bfloat16(), torch.bfloat16)
    g = rand(7, 2 * 1024, dtype=torch.float16, device="cuda:1")
    close(kernelkit.silu_and_mul(g), torch.nn.functional.silu(g[:, :1024].double()) * g[:, 1024:].double(),
          torch.float16)
    s = rand(5, 300, dtype=torch.float32, device="cuda:1", lo=-4, hi=4)
    close(kernelkit.softmax(s, 0.5), torch.softmax(s.double() * 0.5, -1), torch.float32)
    with pytest.raises((ValueError, RuntimeError), match="device"):
        kernelkit.rms_norm(x, w.to("cuda:0"))


def test_info():
    i = kernelkit.info()
    assert i["library"].endswith("_kernelkit_ops.so")
    assert "rms_norm" in i["ops"]


# ---- attention and quantization (issues 6 and 7): the Python ops over the C++ core ----------------------------------
def attention_ref(q, k, v, causal, scale=None):
    """float64 attention over [b, s, h, d] with GQA and the bottom-right causal mask."""
    q, k, v = q.double(), k.double(), v.double()
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // hk, dim=2)
    v = v.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale if scale else d ** -0.5)
    if causal:
        mask = torch.arange(sk)[None, :] > torch.arange(sq)[:, None] + (sk - sq)
        s = s.masked_fill(mask, float("-inf"))
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
    # the same cache in pages of 16, pages shuffled
    pages = cap // 16
    perm = torch.randperm(b * pages)
    kp = kc.reshape(b * pages, 16, hk, d)[perm.argsort()].contiguous()
    vp = vc.reshape(b * pages, 16, hk, d)[perm.argsort()].contiguous()
    table = perm.reshape(b, pages).to(torch.int32).to(device)
    paged = kernelkit.decode_attention(q, kp, vp, block_table=table, seqlens_k=lens)
    torch.testing.assert_close(paged, out)


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


@pytest.mark.parametrize("kind,kwargs,min_cos", [("Int8Linear", dict(bits=8), 0.99),
                                                 ("Int4Linear", dict(bits=4, group=64), 0.95),
                                                 ("W8A8Linear", dict(bits=8, activations=True), 0.99)])
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


def test_attention_and_quantized_linear_compile_fullgraph():
    """The attention and weight-only ops trace with no graph break (their fakes) and give the eager results."""
    q, k, v = (torch.randn(1, 6, 4, 64, dtype=torch.float16) for _ in range(3))
    w = torch.randn(32, 128) * 0.05
    qw, s = kernelkit.quantize_weight(w, 4, 64)
    x = torch.randn(3, 128, dtype=torch.float16)

    def f(q, k, v, x):
        return kernelkit.attention(q, k, v, causal=True) * 2, kernelkit.linear_weight_only(x, qw, s, 4, 64)

    eager = f(q, k, v, x)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, x)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b)
