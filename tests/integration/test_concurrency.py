"""Ops from several Python threads at once, each on its own CUDA stream, and replayed from a CUDA graph: the same bits
as one sequential run. What is shared between calls is what this exercises: decode's and the split-K linear's
stream-ordered workspaces, the planner's caches, the device-check record."""
import threading

import pytest
import torch

import kernelkit

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def workload(seed):
    """A decoder step's worth of ops on fresh random inputs: norm, RoPE, decode over a long cache (several splits),
    the gated MLP activation, a weight-only INT4 linear (tensor cores with split-K at 16 tokens), W8A8."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def r(*shape, dtype=torch.float16):
        return (torch.rand(*shape, generator=g, device="cuda") * 2 - 1).to(dtype)

    x, w = r(16, 1024), r(1024) + 1.5
    q, k = r(16, 8, 128), r(16, 2, 128)
    positions = torch.arange(16, device="cuda") * 7
    cache = r(256, 128, dtype=torch.float32)
    dq = r(4, 1, 32, 128)
    kc, vc = r(4, 2048, 8, 128), r(4, 2048, 8, 128)
    lens = torch.tensor([2048, 1500, 17, 1], dtype=torch.int32, device="cuda")
    gate_up = r(16, 2 * 1024)
    qw, qs = kernelkit.quantize_weight(r(512, 1024), 4, group=128)
    w8, w8s = kernelkit.quantize_weight(r(256, 1024), 8)

    def run():
        y = kernelkit.rms_norm(x, w)
        qr, kr = kernelkit.rotary_embedding(q.clone(), k.clone(), positions, cache)
        o = kernelkit.decode_attention(dq, kc, vc, seqlens_k=lens)
        h = kernelkit.silu_and_mul(gate_up)
        lin = kernelkit.linear_weight_only(h, qw, qs, bits=4, group=128)
        xq, xs = kernelkit.quantize_per_token(y)
        lin8 = kernelkit.linear_w8a8(xq, xs, w8, w8s)
        return [y, qr, kr, o, h, lin, xq, xs, lin8]

    return run


def test_threads_on_their_own_streams_match_a_sequential_run():
    runs = [workload(seed) for seed in range(4)]
    want = [run() for run in runs]
    torch.cuda.synchronize()
    got, errors = [None] * len(runs), []

    def worker(i):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                for _ in range(10):
                    got[i] = runs[i]()
            stream.synchronize()
        except Exception as e:  # reported below: an exception in a thread would otherwise pass silently
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(len(runs)):
        for j, (a, b) in enumerate(zip(got[i], want[i])):
            assert torch.equal(a, b), f"workload {i}, output {j}: {(a.double() - b.double()).abs().max().item()}"
    kernelkit.check_errors()


def test_cuda_graph_replay_matches_eager():
    run = workload(7)
    want = run()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on the capture stream (plans, workspaces)
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = run()
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        for j, (a, b) in enumerate(zip(outs, want)):
            assert torch.equal(a, b), f"output {j}: {(a.double() - b.double()).abs().max().item()}"
    kernelkit.check_errors()
