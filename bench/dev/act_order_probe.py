"""Where act-order's time goes (a lab probe, not the benchmark): median us of CUDA-graph replays of a W4A16 layer
(groups of 128, bf16) over enough weight copies to defeat L2, without perm, with perm=, with x[:, perm] gathered by
torch first, and torch's gather alone.
    python3 bench/dev/act_order_probe.py [--shape 13824x5120] [--ms 1,16]"""
import argparse
import statistics

import torch

import kernelkit

ap = argparse.ArgumentParser()
ap.add_argument("--shape", default="13824x5120", help="n x k")
ap.add_argument("--ms", default="1,16")
args = ap.parse_args()
n, k = (int(v) for v in args.shape.split("x"))
copies = max(2, -(-2 * 50 * 2**20 // (n * k // 2)))  # twice a 50 MB L2
torch.manual_seed(0)
qs = [kernelkit.formats.pack_int4(torch.randint(-8, 8, (n, k), dtype=torch.int8)).cuda() for _ in range(copies)]
ss = [(torch.rand(n, k // 128) * 0.01 + 0.001).cuda() for _ in range(copies)]
perm = torch.randperm(k).to(torch.int32).cuda()


def timed(fn, reps=20):
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn(0)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            for i in range(reps):
                fn(i)
    times = []
    for _ in range(15):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / reps)
    return statistics.median(times)


print(torch.cuda.get_device_name(), f"n{n} k{k}, {copies} weight copies")
for m in (int(v) for v in args.ms.split(",")):
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    rows = {
        "native": lambda i: kernelkit.linear_weight_only(x, qs[i % copies], ss[i % copies], 4, 128),
        "perm=": lambda i: kernelkit.linear_weight_only(x, qs[i % copies], ss[i % copies], 4, 128, perm=perm),
        "torch gather + native": lambda i: kernelkit.linear_weight_only(x[:, perm], qs[i % copies], ss[i % copies], 4,
                                                                       128),
        "torch gather alone": lambda i: x[:, perm],
    }
    print(f"m{m} | " + " | ".join(f"{name} {timed(fn):.1f}" for name, fn in rows.items()))
