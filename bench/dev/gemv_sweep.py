"""Weight-only linear under KERNELKIT_TUNE settings (a lab sweep, not the benchmark): median us of CUDA-graph replays
over enough weight copies to defeat L2, per shape x tokens x setting, against F.linear.
    python3 bench/dev/gemv_sweep.py [--bits 4] [--ms 1,16,32] [--tunes 'gemv_mma=1;gemv_mma=1,gemv_kwarps=2']"""
import argparse, os, statistics
import torch, torch.nn.functional as F
import kernelkit

ap = argparse.ArgumentParser()
ap.add_argument("--bits", type=int, default=4)
ap.add_argument("--ms", default="1,16,32")
ap.add_argument("--shapes", default="11008x4096,4096x11008,28672x8192,13824x5120,5120x13824")
ap.add_argument("--tunes", default="")
args = ap.parse_args()
l2 = torch.cuda.get_device_properties(0).L2_cache_size
group = 128 if args.bits == 4 else 0


def timed(fns, reps=20):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns: f()
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for f in fns: f()
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(5): g.replay()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); g.replay(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / len(fns))
    return statistics.median(ts)


print(f"{torch.cuda.get_device_name()} bits {args.bits}")
for shape in args.shapes.split(","):
    n, k = map(int, shape.split("x"))
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    q, sc = kernelkit.quantize_weight(w, args.bits, group)
    sets = max(3, int(3 * l2 // (q.numel() + 1)) + 1)
    qs = [(q.clone(), sc.clone()) for _ in range(sets)]
    ws = [w.clone() for _ in range(max(2, int(2 * l2 // (w.numel() * 2)) + 1))]
    for m in map(int, args.ms.split(",")):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        os.environ["KERNELKIT_TUNE"] = ""
        ref = kernelkit.linear_weight_only(x, q, sc, args.bits, group)
        line = [f"m{m} n{n} k{k}", f"F.linear {timed([lambda w_=w_: F.linear(x, w_) for w_ in ws]):.1f}"]
        for tune in [""] + [t for t in args.tunes.split(";") if t]:
            os.environ["KERNELKIT_TUNE"] = tune
            try:
                got = kernelkit.linear_weight_only(x, q, sc, args.bits, group)
                # Against the default's output: more than a bf16 rounding step (2^-7 relative) apart is flagged.
                off = int(((got.float() - ref.float()).abs() > 2.0**-7 * ref.float().abs() + 1e-3).sum())
                us = timed([lambda p=p: kernelkit.linear_weight_only(x, p[0], p[1], args.bits, group) for p in qs])
                line.append(f"[{tune or 'default'}] {us:.1f}" + (f" ({off} outputs off the default's)" if off else ""))
            except Exception as e:  # noqa: BLE001 - a setting the planner refuses for this shape
                line.append(f"[{tune}] {type(e).__name__}: {str(e)[:60]}")
        os.environ["KERNELKIT_TUNE"] = ""
        print(" | ".join(line), flush=True)
