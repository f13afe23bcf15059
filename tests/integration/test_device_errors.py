"""What the kernels check on the device. Index values only the device sees (decode's block_table / seqlens_k, RoPE
positions, packed varlen cu_seqlens when max_seqlen_q / k are given): on the CPU a bad one is a ValueError at the call; on CUDA the kernel never follows it and records it, and
it comes back from kernelkit.check_errors() (or, in debug mode, from the call itself) naming the op, the argument, the
index, the value and the bound. Also under torch.cuda.graph replay. And the quantizers' non-finite inputs."""
import re

import pytest
import torch

import kernelkit
from torch_testing import DEVICES, rand

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class debug_mode:
    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.previous = kernelkit.debug_checks()
        kernelkit.set_debug_checks(self.on)

    def __exit__(self, *exc):
        kernelkit.set_debug_checks(self.previous)


def paged_decode(device, table, lens):
    """Batch 2, 4 + 2 heads of 64, 4 pages of 16 keys, two a sequence."""
    torch.manual_seed(0)
    q = rand(2, 1, 4, 64, dtype=torch.float16, device=device)
    kp, vp = (rand(4, 16, 2, 64, dtype=torch.float16, device=device) for _ in range(2))
    table = torch.tensor(table, dtype=torch.int32, device=device).reshape(2, 2)
    lens = torch.tensor(lens, dtype=torch.int32, device=device)
    return lambda: kernelkit.decode_attention(q, kp, vp, block_table=table, seqlens_k=lens)


def rope_call(device, positions, dtype=torch.int64):
    f32 = torch.float32
    q, k = rand(3, 4, 64, dtype=f32, device=device), rand(3, 2, 64, dtype=f32, device=device)
    cache = rand(100, 64, dtype=f32, device=device)
    pos = torch.tensor(positions, dtype=dtype, device=device)
    return lambda: kernelkit.rotary_embedding(q, k, pos, cache)


CASES = [
    (lambda d: paged_decode(d, [0, 1, 2, 99], [20, 30]),
     "decode_attention: cache.block_table[1, 1] = 99 must be a page in [0, 4)"),
    (lambda d: paged_decode(d, [0, 1, 2, -1], [20, 30]), "cache.block_table[1, 1] = -1 must be a page in [0, 4)"),
    (lambda d: paged_decode(d, [0, 1, 2, 4], [20, 30]), "cache.block_table[1, 1] = 4 must be a page in [0, 4)"),
    (lambda d: paged_decode(d, [0, 1, 2, 3], [20, 33]),
     "cache.seqlens_k[1] = 33 must be in [0, 32] (the cache capacity)"),
    (lambda d: paged_decode(d, [0, 1, 2, 3], [-5, 3]), "cache.seqlens_k[0] = -5 must be in [0, 32]"),
    (lambda d: rope_call(d, [3, 5000, 99]), "rotary_embedding: positions[1] = 5000 is outside the cache [0, 100)"),
    (lambda d: rope_call(d, [3, 99, 100], torch.int32), "positions[2] = 100 is outside the cache [0, 100)"),
    (lambda d: rope_call(d, [-1, 0, 1]), "positions[0] = -1 is outside the cache [0, 100)"),
    (lambda d: rope_call(d, [0, 2 ** 63 - 1, 1]), f"positions[1] = {2 ** 63 - 1} is outside the cache [0, 100)"),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_bad_index_on_cpu_raises_at_the_call(case):
    make, want = CASES[case]
    with pytest.raises(ValueError, match=re.escape(want)):
        make("cpu")()


@cuda_only
@pytest.mark.parametrize("case", range(len(CASES)))
def test_bad_index_on_cuda_is_recorded(case):
    make, want = CASES[case]
    call = make("cuda")
    kernelkit.check_errors()  # nothing left over
    with debug_mode(False):
        call()  # no error yet: nothing waited for the device
        with pytest.raises(ValueError) as raised:
            kernelkit.check_errors()
        assert want in str(raised.value) and "found on cuda:0" in str(raised.value)
        kernelkit.check_errors()  # cleared
    with debug_mode(True):
        with pytest.raises(ValueError) as raised:
            call()
        assert want in str(raised.value)
    kernelkit.check_errors()


def varlen_prefill(device, cu_q, cu_k, max_seqlen=(7, 11)):
    """3 packed sequences of (5, 7), (0, 2), (7, 11) query / key tokens when cu_q / cu_k are valid; 4 + 2 heads of 64,
    causal; max_seqlen_q / k given (None: not), so on CUDA nothing is read back and the kernels check the entries."""
    torch.manual_seed(1)
    q = rand(12, 4, 64, dtype=torch.float16, device=device)
    k, v = (rand(20, 2, 64, dtype=torch.float16, device=device) for _ in range(2))
    cq, ck = (torch.tensor(c, dtype=torch.int32, device=device) for c in (cu_q, cu_k))
    mq, mk = max_seqlen if max_seqlen else (None, None)

    def call():
        return kernelkit.attention(q, k, v, causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=mq,
                                   max_seqlen_k=mk)
    call.cu_seqlens_q = cq  # for a test that rewrites it under a captured graph
    return call


CQ, CK = [0, 5, 5, 12], [0, 7, 9, 20]
VARLEN_CASES = [  # (cu_q, cu_k, max_seqlen, the device's message, the CPU's)
    ([0, 5, 4, 12], CK, (12, 20), "options.cu_seqlens_q[2] = 4 breaks the rise from 0 to total_q = 12",
     "options.cu_seqlens_q must be non-decreasing"),
    ([0, 5, 5, 2 ** 31 - 1], CK, (12, 20), f"options.cu_seqlens_q[3] = {2 ** 31 - 1} breaks the rise",
     "options.cu_seqlens_q[batch] must equal total_q"),
    (CQ, [0, -1, 9, 20], (12, 20), "options.cu_seqlens_k[1] = -1 breaks the rise from 0 to total_k = 20",
     "options.cu_seqlens_k must be non-decreasing"),
    (CQ, CK, (6, 11), "sequence 2 has 7 query tokens, more than options.max_seqlen_q = 6",
     "options.max_seqlen_q = 6 is less than the longest sequence's 7 tokens"),
]


@pytest.mark.parametrize("case", range(len(VARLEN_CASES)))
def test_bad_cu_seqlens_on_cpu_raise_at_the_call(case):
    cu_q, cu_k, max_seqlen, _, want = VARLEN_CASES[case]
    with pytest.raises(ValueError, match=re.escape(want)):
        varlen_prefill("cpu", cu_q, cu_k, max_seqlen)()


@cuda_only
@pytest.mark.parametrize("case", range(len(VARLEN_CASES)))
def test_bad_cu_seqlens_given_max_seqlen_are_recorded_on_cuda(case):
    cu_q, cu_k, max_seqlen, want, _ = VARLEN_CASES[case]
    call = varlen_prefill("cuda", cu_q, cu_k, max_seqlen)
    kernelkit.check_errors()
    with debug_mode(False):
        call()
        with pytest.raises(ValueError) as raised:
            kernelkit.check_errors()
        assert "attention: " + want in str(raised.value) and "found on cuda:0" in str(raised.value)
    with debug_mode(True):
        with pytest.raises(ValueError, match=re.escape(want)):
            call()
    kernelkit.check_errors()


@cuda_only
def test_varlen_given_max_seqlen_captures_in_a_cuda_graph():
    """Nothing read back, so torch.cuda.graph's global capture mode (where a synchronization raises) takes it; the
    replay gives the host-checked call's bits, and a bad entry written into the captured cu_seqlens is recorded."""
    want = varlen_prefill("cuda", CQ, CK, None)()
    call = varlen_prefill("cuda", CQ, CK)
    call()  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want)
    kernelkit.check_errors()
    call.cu_seqlens_q[2] = 4
    graph.replay()
    with pytest.raises(ValueError, match=re.escape("options.cu_seqlens_q[2] = 4 breaks the rise")):
        kernelkit.check_errors()


@cuda_only
def test_recorded_under_cuda_graph_replay():
    call = paged_decode("cuda", [0, 1, 2, 3], [20, 30])
    bad = paged_decode("cuda", [0, 1, 2, 77], [20, 30])
    message = r"cache.block_table\[1, 1\] = 77"
    with debug_mode(True):
        call()  # warm-up outside the capture
        with pytest.raises(ValueError, match=message):
            bad()  # eager in debug mode: the op itself waits and raises
        kernelkit.check_errors()  # raising cleared the record
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # debug mode skips its wait inside the capture
            bad()
        for _ in range(2):
            graph.replay()
            with pytest.raises(ValueError, match=message):
                kernelkit.check_errors()
    kernelkit.check_errors()


def test_debug_switch_and_check_without_errors():
    previous = kernelkit.debug_checks()
    try:
        kernelkit.set_debug_checks(False)
        assert kernelkit.debug_checks() is False
        kernelkit.set_debug_checks(True)
        assert kernelkit.debug_checks() is True
    finally:
        kernelkit.set_debug_checks(previous)
    kernelkit.check_errors()  # nothing recorded (and nothing to do without CUDA)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="must be a CUDA device"):
            kernelkit.check_errors("cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_valid_edges_are_not_errors(device):
    """Lengths 0 and capacity, the last page, positions 0 and max_position - 1, and a table entry past the length
    (never read) are all fine."""
    paged_decode(device, [0, 1, 2, 3], [0, 32])()
    paged_decode(device, [3, 99, 2, 1], [16, 17])()
    rope_call(device, [0, 99, 50])()
    kernelkit.check_errors()


@cuda_only
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_quantizers_refuse_non_finite_inputs_on_cuda(bad):
    """quantize_weight waits and raises at the call (as on the CPU, which also names the column); quantize_per_token,
    on the serving path, records it for check_errors (debug mode: at the call)."""
    w = torch.randn(16, 256, device="cuda").half()
    w[2, 172] = bad
    kernelkit.check_errors()
    with debug_mode(False):
        with pytest.raises(ValueError, match=r"quantize_int8_per_channel: w row 2 holds inf or NaN"):
            kernelkit.quantize_weight(w, 8)
        with pytest.raises(ValueError, match=r"quantize_int4_groupwise: w row 2 \(scale group 1\) holds inf or NaN"):
            kernelkit.quantize_weight(w, 4, group=128)
        kernelkit.quantize_per_token(w)
        with pytest.raises(ValueError, match=r"quantize_per_token_int8: x row 2 holds inf or NaN"):
            kernelkit.check_errors()
    with debug_mode(True):
        with pytest.raises(ValueError, match=r"x row 2 holds inf or NaN"):
            kernelkit.quantize_per_token(w)
    kernelkit.check_errors()
