"""kernelkit's PyTorch ops as a whole: torch.compile(fullgraph=True), bad input as
exceptions naming the argument, CUDA graphs and side streams, a second GPU, info(), the registry. The values of each
family (and their torch.library.opcheck) are checked in tests/<family>/test_<family>_torch.py."""
import warnings

import pytest
import torch

import kernelkit
from torch_testing import DEVICES, close, close_attention, rand, rms_ref


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
    with pytest.raises(ValueError, match=r"x dtype f8e4m3 is not supported \(expected f32, f16 or bf16\)"):
        kernelkit.rms_norm(torch.ones(4, 64).to(torch.float8_e4m3fn))  # FP8 is storage, not a norm's input
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


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_every_family_on_the_second_gpu():
    """RoPE, attention, decode (paged), write_kv_cache, the weight-only and W8A8 linears and a CUDA graph on cuda:1
    while cuda:0 is current, each against the same op on the CPU (the fp64 reference backend): each device's plan,
    workspace, cuBLASLt handle and sm_90a check are its own."""
    assert torch.cuda.current_device() == 0
    dev, h = "cuda:1", torch.bfloat16

    def both(fn, *tensors):  # fn on cuda:1 and on the CPU copies
        return fn(*(t.to(dev) for t in tensors)), fn(*(t.cpu() for t in tensors))

    q, k, v = rand(2, 37, 8, 128, dtype=h, device="cpu"), rand(2, 37, 2, 128, dtype=h, device="cpu"), rand(
        2, 37, 2, 128, dtype=h, device="cpu")
    got = kernelkit.attention(q.to(dev), k.to(dev), v.to(dev), causal=True)
    assert got.device == torch.device(dev)
    close(got.cpu(), kernelkit.attention(q, k, v, causal=True), h, scale=2)
    table = torch.randperm(8, dtype=torch.int32).reshape(2, 4)
    lens = torch.tensor([37, 20], dtype=torch.int32)
    kp, vp = rand(8, 16, 2, 128, dtype=h, device="cpu"), rand(8, 16, 2, 128, dtype=h, device="cpu")
    got, want = both(lambda q1, kp1, vp1, t1, l1: kernelkit.decode_attention(q1, kp1, vp1, block_table=t1,
                                                                             seqlens_k=l1), q[:, :1], kp, vp, table, lens)
    close(got.cpu(), want, h, scale=2)
    slots = torch.randperm(128)[:37]
    kc, vc = kp.clone().to(dev), vp.clone().to(dev)
    kernelkit.write_kv_cache(kc, vc, k[0].to(dev), v[0].to(dev), slots.to(dev))
    kernelkit.check_errors(dev)
    assert torch.equal(kc.view(-1, 2, 128)[slots.to(dev)].cpu(), k[0])
    positions, cs = torch.randint(0, 64, (37,)), rand(64, 128, dtype=torch.float32, device="cpu")
    got, want = both(lambda q1, k1, p1, c1: kernelkit.rotary_embedding(q1, k1, p1, c1), q[0], k[0], positions, cs)
    for g, w_ in zip(got, want):
        close(g.cpu(), w_, h, scale=2)
    x = rand(5, 512, dtype=torch.float16, device="cpu")
    wt = rand(256, 512, dtype=torch.float16, device="cpu") * 0.05
    for bits in (8, 4):
        qw, sc = kernelkit.quantize_weight(wt.to(dev), bits, 128)
        got = kernelkit.linear_weight_only(x.to(dev), qw, sc, bits, 128)
        close(got.cpu(), kernelkit.linear_weight_only(x, qw.cpu(), sc.cpu(), bits, 128), torch.float16, scale=2)
    xq, sx = kernelkit.quantize_per_token(x.to(dev))
    wq, sw = kernelkit.quantize_weight(wt.to(dev), 8)
    got = kernelkit.linear_w8a8(xq, sx, wq, sw)
    close(got.cpu(), kernelkit.linear_w8a8(xq.cpu(), sx.cpu(), wq.cpu(), sw.cpu()), torch.float16, scale=2)
    # A CUDA graph captured and replayed on cuda:1's stream.
    with torch.cuda.device(1):
        xs, ws = rand(33, 1024, dtype=h, device=dev), rand(1024, dtype=h, device=dev)
        out = kernelkit.rms_norm(xs, ws)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = kernelkit.rms_norm(xs, ws)
        captured.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, out)


def test_info():
    i = kernelkit.info()
    assert i["library"].endswith("_kernelkit_ops.so")
    assert "rms_norm" in i["ops"]
    assert i["version"] == kernelkit.__version__ and kernelkit.__version__.count(".") == 2
    from importlib.metadata import PackageNotFoundError, version
    try:  # a pip install has package metadata (a hub build variant does not)
        assert version("kernelkit") == kernelkit.__version__
    except PackageNotFoundError:
        pass
    assert i["cuda_kernels"] == bool(i["cuda_archs"])
    if torch.cuda.is_available():
        assert i["cuda_kernels"], "a CUDA machine running a CPU-only build"


def test_pip_install_puts_the_cli_on_path():
    """`pip install .` installs the kernelkit CLI into the environment's bin/ (beside this python)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from importlib.metadata import PackageNotFoundError, distribution
    try:
        distribution("kernelkit")
    except PackageNotFoundError:
        pytest.skip("kernelkit is not pip-installed here (a hub build variant or a source tree)")
    exe = shutil.which("kernelkit", path=str(Path(sys.executable).parent))
    assert exe, f"no kernelkit CLI in {Path(sys.executable).parent}"
    out = subprocess.run([exe, "info", "--profile", "t4"], capture_output=True, text=True, check=True).stdout
    assert "SMs" in out and "40" in out, out


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


def test_public_names_resolve_and_tolerance_is_the_contract():
    """Every name of kernelkit.__all__ exists (the registry check, tests/runtime/check_registry.py, compares the
    lists themselves), and kernelkit.tolerance reads the table of docs/tolerances.md."""
    for name in kernelkit.__all__:
        assert hasattr(kernelkit, name), name
    assert kernelkit.tolerance(torch.bfloat16) == (2.0**-7, 1e-4)
    assert kernelkit.tolerance(torch.float16) == (2.0**-10, 1e-5)
    assert kernelkit.tolerance(torch.float32) == (1e-5, 1e-6)
    with pytest.raises(ValueError, match="dtype must be"):
        kernelkit.tolerance(torch.int32)


def test_bad_input_names_the_op_and_the_argument():
    """Errors name the op and the argument, whatever the tensor's rank, dtype or the number: checked before any
    indexing of a shape can fail less clearly."""
    x = torch.randn(4, 64)
    with pytest.raises(ValueError, match=r"kernelkit\.rms_norm: x has dtype torch\.float64"):
        kernelkit.rms_norm(x.double(), torch.ones(64, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"kernelkit\.rms_norm: x has dtype torch\.uint8"):
        kernelkit.rms_norm(torch.zeros(4, 64, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"kernelkit\.rms_norm: eps = 1e-50 is not representable in float32"):
        kernelkit.rms_norm(x, None, eps=1e-50)
    scalar = torch.tensor(1.0)
    with pytest.raises(ValueError, match=r"silu_and_mul: x must be \[\.\.\., 2d\], got a 0-dim tensor"):
        kernelkit.silu_and_mul(scalar)
    q8, s8 = kernelkit.quantize_weight(torch.randn(16, 64) * 0.1, 8)
    with pytest.raises(ValueError, match=r"linear_weight_only: x must be \[\.\.\., k\], got a 0-dim tensor"):
        kernelkit.linear_weight_only(scalar.half(), q8, s8, 8)
    with pytest.raises(ValueError, match=r"linear_w8a8: xq must be \[m, k\] \(int8\), got a 0-dim tensor"):
        kernelkit.linear_w8a8(torch.tensor(1, dtype=torch.int8), torch.ones(1), q8, s8)
    with pytest.raises(ValueError, match=r"attention: q must be \[batch, s_q, heads, head_dim\], got a 0-dim"):
        kernelkit.attention(scalar.half(), scalar.half(), scalar.half(), return_lse=True)
    with pytest.raises(ValueError, match=r"decode_attention: q must be \[batch, s_q, heads, head_dim\], got a 3-dim"):
        kernelkit.decode_attention(torch.randn(1, 4, 64).half(), torch.randn(1, 8, 4, 64).half(),
                                   torch.randn(1, 8, 4, 64).half())
    for w in (torch.randn(64), torch.randn(2, 16, 64)):
        with pytest.raises(ValueError, match=r"quantize_weight: w must be \[n, k\] \(an nn\.Linear weight\)"):
            kernelkit.quantize_weight(w, 8)
    with pytest.raises(ValueError, match="group must be 64 or 128 for bits=4, got 0"):
        kernelkit.quantize_weight(torch.randn(16, 128), 4, group=0)
    w = torch.randn(16, 128)
    w[5, 9] = float("inf")
    with pytest.raises(ValueError, match="quantize_int8_per_channel: w row 5 holds inf at column 9"):
        kernelkit.quantize_weight(w, 8)
    # The raw ops validate as strictly as the functions over them.
    with pytest.raises(ValueError, match=r"kernelkit\.quantize_weight: bits must be 8 or 4, got 3"):
        kernelkit.ops.quantize_weight(torch.empty(16, 64, dtype=torch.int8), torch.empty(16), torch.randn(16, 64), 3, 0)
    with pytest.raises(ValueError, match=r"kernelkit\.quantize_weight: bits 8 is per output channel"):
        kernelkit.ops.quantize_weight(torch.empty(16, 64, dtype=torch.int8), torch.empty(16), torch.randn(16, 64), 8,
                                      64)


def test_grad_mode_warns_once_that_the_ops_are_inference_only():
    from kernelkit import _common

    _common._grad_warned = False
    x, w = torch.randn(4, 64, requires_grad=True), torch.rand(64)
    with pytest.warns(UserWarning, match="inference-only"):
        y = kernelkit.rms_norm(x, w)
    assert y.grad_fn is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernelkit.rms_norm(x, w)  # once a process
        _common._grad_warned = False
        with torch.no_grad():
            kernelkit.rms_norm(x, w)  # no grad mode: nothing to warn about
        kernelkit.rms_norm(x.detach(), w)  # no input requires grad


def test_an_output_that_partly_overlaps_an_input_is_refused():
    """torch refuses it too ("some elements of the input tensor and the written-to tensor refer to a single memory
    location"); in place is allowed where the op says so."""
    buf = torch.randn(9, 64)
    with pytest.raises(ValueError, match="rms_norm: out partly overlaps x"):
        kernelkit.rms_norm(buf[1:], out=buf[:-1])
    with pytest.raises(ValueError, match="fused_add_rms_norm: x partly overlaps residual"):
        kernelkit.fused_add_rms_norm(buf[:-1], buf[1:])
    with pytest.raises(ValueError, match="silu_and_mul: out partly overlaps x"):
        g = torch.randn(4, 128)
        kernelkit.silu_and_mul(g, out=g[:, :64])
    x = torch.randn(8, 64)
    want = kernelkit.rms_norm(x)
    kernelkit.rms_norm(x, out=x)
    assert torch.equal(x, want)


@pytest.mark.parametrize("device", DEVICES)
def test_the_eager_fast_path_gives_torch_ops_bits_through_the_dispatcher(device, monkeypatch):
    """The eager fast path (torch-ext/fast/fast.cpp) serves the eager calls of the norms (with and without
    quantization), softmax, the activations (silu_and_mul_quant too), RoPE, the weight-only linear, attention, decode
    attention and the KV-cache write: each such call takes it, gives the bits of the same op called through torch.ops,
    keeps an `out` it is given, and still goes through the dispatcher (a dispatch mode sees the op)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from kernelkit import _common
    from kernelkit._ops import ops
    if _common._fast is None:
        pytest.skip("the op library was built without Python's headers: no eager fast path")
    dtype = torch.float16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    x = rand(3, 5, 64, dtype=dtype, device=device)
    w, b = rand(64, dtype=dtype, device=device, lo=0.5, hi=1.5), rand(64, dtype=dtype, device=device)
    taken = []

    class Spy:
        def __getattr__(self, name):
            taken.append(name)
            return getattr(real, name)

    real = _common._fast
    monkeypatch.setattr(_common, "_fast", Spy())  # _eager_ops() and _fast_for() read it there

    def fresh(shape=x.shape):
        return torch.full(shape, float("nan"), dtype=dtype, device=device)

    cases = [  # (fast call, the same op through torch.ops into `out`, out's shape)
        (lambda: kernelkit.rms_norm(x, w, 1e-5), lambda o: ops.rms_norm(o, x, w, 1e-5, 0.0), x.shape),
        (lambda: kernelkit.layer_norm(x, w, b, 1e-5), lambda o: ops.layer_norm(o, x, w, b, 1e-5), x.shape),
        (lambda: kernelkit.softmax(x, 0.5), lambda o: ops.softmax(o, x, 0.5, False), x.shape),
        (lambda: kernelkit.gelu_tanh(x), lambda o: ops.activation(o, x, "gelu_tanh"), x.shape),
        (lambda: kernelkit.silu_and_mul(x), lambda o: ops.act_and_mul(o, x, "silu"), (3, 5, 32)),
    ]
    for fast, slow, shape in cases:
        want = fresh(shape)
        slow(want)
        assert torch.equal(fast(), want)
    assert taken == ["rms_norm", "layer_norm", "softmax", "activation", "act_and_mul"]
    out = fresh()
    assert kernelkit.rms_norm(x, w, out=out) is out
    # The destination-passing ops: the same arguments as torch.ops.
    r = rand(3, 5, 64, dtype=dtype, device=device)
    x2, r2, x3, r3 = x.clone(), r.clone(), x.clone(), r.clone()
    kernelkit.fused_add_rms_norm(x2, r2, w)
    ops.fused_add_rms_norm(x3, r3, w, 1e-6, 0.0)
    assert torch.equal(x2, x3) and torch.equal(r2, r3)
    q, k = rand(9, 4, 64, dtype=dtype, device=device), rand(9, 2, 64, dtype=dtype, device=device)
    pos = torch.randint(0, 16, (9,), device=device)
    ang = torch.arange(16, dtype=torch.float32, device=device)[:, None] * torch.rand(32, device=device)[None]
    cache = torch.cat([ang.cos(), ang.sin()], -1)
    q2, k2 = kernelkit.rotary_embedding(q, k, pos, cache, inplace=False)
    q3, k3 = q.clone(), k.clone()
    ops.rotary_embedding_(pos, q3, k3, cache, True)
    assert torch.equal(q2, q3) and torch.equal(k2, k3)
    xh = rand(5, 256, dtype=torch.float16, device=device)
    qw, sw = kernelkit.quantize_weight(rand(96, 256, dtype=torch.float32, device=device, lo=-0.1, hi=0.1), 4, 64)
    want = fresh((5, 96)).half()
    ops.linear_weight_only(want, xh, qw, sw, 4, 64, None, None)
    assert torch.equal(kernelkit.linear_weight_only(xh, qw, sw, 4, 64), want)
    qd = rand(2, 1, 8, 64, dtype=torch.float16, device=device)
    kc, vc = (rand(2, 48, 2, 64, dtype=torch.float16, device=device) for _ in range(2))
    lens = torch.tensor([40, 17], dtype=torch.int32, device=device)
    want = fresh(qd.shape).half()
    ops.decode_attention(want, None, qd, kc, vc, None, lens, 0.0, False, -1, 0.0, None, None, None)
    assert torch.equal(kernelkit.decode_attention(qd, kc, vc, seqlens_k=lens), want)
    qp = rand(2, 12, 8, 64, dtype=torch.float16, device=device)
    kp, vp = (rand(2, 12, 2, 64, dtype=torch.float16, device=device) for _ in range(2))
    want = fresh(qp.shape).half()
    ops.attention(want, None, qp, kp, vp, 0.0, True, None, None, None, None, -1, 0.0, None, None, None)
    assert torch.equal(kernelkit.attention(qp, kp, vp, causal=True), want)
    slots = torch.tensor([3, -1, 40, 7], device=device)
    kt, vt = (rand(4, 2, 64, dtype=torch.float16, device=device) for _ in range(2))
    kc2, vc2, kc3, vc3 = kc.clone(), vc.clone(), kc.clone(), vc.clone()
    kernelkit.write_kv_cache(kc2, vc2, kt, vt, slots)
    ops.write_kv_cache(kc3, vc3, kt, vt, slots, None, None, None, None, True, None, None)
    assert torch.equal(kc2, kc3) and torch.equal(vc2, vc3) and not torch.equal(kc2, kc)
    sc, sh = rand(3, 64, dtype=dtype, device=device), rand(3, 64, dtype=dtype, device=device)
    want = fresh()
    ops.ada_layer_norm(want, x, sc, sh, None, None, 1e-6)
    assert torch.equal(kernelkit.ada_layer_norm(x, sc, sh), want)
    want = fresh()
    ops.rms_norm_gelu(want, x, w, 1e-6)
    assert torch.equal(kernelkit.rms_norm_gelu(x, w), want)
    xh, rh = (rand(3, 5, 64, dtype=torch.float16, device=device) for _ in range(2))
    wh = rand(64, dtype=torch.float16, device=device, lo=0.5, hi=1.5)
    q1, s1 = kernelkit.rms_norm_quant(xh, wh, dtype=torch.int8)
    q2, s2 = torch.empty_like(q1), torch.empty_like(s1)
    ops.rms_norm_quant(q2, s2, xh, wh, 1e-6, False, 0.0)
    assert torch.equal(q1, q2) and torch.equal(s1, s2)
    r1, r2 = rh.clone(), rh.clone()
    q1, s1 = kernelkit.fused_add_rms_norm_quant(xh, r1, wh, dtype=torch.int8)
    ops.fused_add_rms_norm_quant(q2, s2, xh, r2, wh, 1e-6, False, 0.0)
    assert torch.equal(q1, q2) and torch.equal(s1, s2) and torch.equal(r1, r2)
    g = rand(3, 5, 128, dtype=torch.float16, device=device)
    q1, s1 = kernelkit.silu_and_mul_quant(g, torch.int8)
    ops.silu_and_mul_quant(q2, s2, g, False)
    assert torch.equal(q1, q2) and torch.equal(s1, s2)
    assert taken[6:] == ["fused_add_rms_norm", "rotary_embedding_", "linear_weight_only", "decode_attention",
                         "attention", "write_kv_cache", "ada_layer_norm", "rms_norm_gelu", "rms_norm_quant",
                         "fused_add_rms_norm_quant", "silu_and_mul_quant"]

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Seen() as seen:
        kernelkit.rms_norm(x, w)
    assert any("rms_norm" in op for op in seen.ops), seen.ops
