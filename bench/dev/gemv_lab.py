#!/usr/bin/env python3
"""Weight-only GEMV lab: the forms of bench/dev/gemv_lab.cu (the library's tensor-core GEMV over its INT4 kernel
layout, at several warps along k) beside F.linear, a plain streaming read of the same weight bytes and, when the
kernelkit package is installed, the library's default plan: same inputs, one process (W4A16 g128 bf16, symmetric).
The weights are quantized here in torch into the library's INT4 kernel layout (no package needed: the word placement
of include/kernelkit/ops/quant.hpp); each form's output is checked against the fp32 product with the dequantized weights before it is
timed; times are medians of CUDA-graph replays over enough weight copies to defeat L2 (bench/torch_baselines.py
time_calls), GB/s of the INT4 weights and their scales.

  nvcc -O3 -std=c++20 -arch=sm_90a --expt-relaxed-constexpr -shared -Xcompiler -fPIC -I src -I include \\
    bench/dev/gemv_lab.cu -o /tmp/gemv_lab.so
  python3 bench/dev/gemv_lab.py /tmp/gemv_lab.so [--shapes 13824x5120,...] [--ms 1,16,32] [--kwarps 1,2,4,8]
"""
import argparse
import ctypes
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

try:
    import kernelkit
except ImportError:
    kernelkit = None

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch_baselines as tb  # noqa: E402


def load(path):
    lib = ctypes.CDLL(path)
    P, I, I64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    lib.lab_gemv_name.restype = ctypes.c_char_p
    lib.lab_gemv_smem.restype = I64
    lib.lab_gemv_smem.argtypes = [I, I]
    lib.lab_gemv_launch.argtypes = [I, P, P, P, P, I64, I64, I64, I, P]
    lib.lab_read.argtypes = [P, I64, I, I, P, P]
    return lib


NIBBLE = (0, 4, 1, 5, 2, 6, 3, 7)  # value j of a little-endian word of 8 sits at bits 4 NIBBLE[j] (kernel layout)


def quantize(w, group=128):
    """(q [n, k / 2] uint8 in the kernel layout, scales [n, k / group] fp32, dequantized weights fp32): symmetric
    INT4 codes round(w / s), s = max|w| / 7 over each group."""
    n, k = w.shape
    wg = w.float().reshape(n, k // group, group)
    s = (wg.abs().amax(-1) / 7).clamp_min(1e-12)
    q = torch.clamp(torch.round(wg / s[..., None]), -7, 7).to(torch.int32).reshape(n, k)
    shift = torch.tensor(NIBBLE, device=w.device, dtype=torch.int32) * 4
    words = ((q.reshape(n, k // 8, 8) & 0xF) << shift).sum(-1).to(torch.int32)
    # Row 16 tile + 8 h + g's word 8 R + 2 t + w_ -> [tile][R][lane 4 g + t][h][w_] (16-row tiles of 64-value regions).
    words = words.reshape(n // 16, 2, 8, k // 64, 4, 2).permute(0, 3, 2, 4, 1, 5).contiguous()
    return words.view(torch.uint8).reshape(n, k // 2), s, (q.reshape(n, k // group, group) * s[..., None]).reshape(n, k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--shapes", default="13824x5120,28672x8192,5120x13824")
    ap.add_argument("--ms", default="1,16,32")
    ap.add_argument("--kwarps", default="1,2,4,8")
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    lib = load(args.lib)
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)  # noqa: E731
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    peak = tb.copy_peak()["gbps"]
    print(f"{torch.cuda.get_device_name()}: copy ceiling {peak:.0f} GB/s", flush=True)
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    forms = [(i, lib.lab_gemv_name(i).decode(), lib.lab_gemv_tokens(i), lib.lab_gemv_registers(i))
             for i in range(lib.lab_gemv_count())]
    for shape in args.shapes.split(","):
        n, k = map(int, shape.split("x"))
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        q, s, wq = quantize(w)
        nbytes = q.numel() * q.element_size() + s.numel() * 4
        sets = max(3, int(3 * l2 // nbytes) + 1)
        qs = [(q.clone(), s.clone()) for _ in range(sets)]
        ws = [w.clone() for _ in range(max(2, int(2 * l2 // (w.numel() * 2)) + 1))]
        rate = lambda us: f"{us:8.2f} us {nbytes / us / 1e3:6.0f} GB/s {nbytes / us / 1e3 / peak * 100:5.1f}%"  # noqa
        qbytes = q.numel() * q.element_size()
        for unroll in (4, 8):
            for bps in (4, 8):
                us = tb.time_calls([lambda c=c: lib.lab_read(c[0].data_ptr(), qbytes, unroll, bps, sink.data_ptr(),
                                                             stream()) for c in qs], args.runs, host=False)["gpu_us"]
                print(f"n{n} k{k} plain read of the {qbytes / 1e6:.1f} MB of INT4 weights (unroll {unroll}, {bps} x 256 "
                      f"threads an SM): {us:.2f} us, {qbytes / us / 1e3:.0f} GB/s "
                      f"({qbytes / us / 1e3 / peak * 100:.1f}% of copy)", flush=True)
        for m in map(int, args.ms.split(",")):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ref = F.linear(x.float(), wq)
            rows = []
            rows.append(("F.linear", tb.time_calls([lambda w_=w_: F.linear(x, w_) for w_ in ws], args.runs,
                                                    host=False)["gpu_us"]))
            for tune in ("", "gemv_pdl=0") if kernelkit else ():
                os.environ["KERNELKIT_TUNE"] = tune
                rows.append((f"kernelkit [{tune or 'default'}]", tb.time_calls(
                    [lambda c=c: kernelkit.linear_weight_only(x, c[0], c[1], 4, 128) for c in qs], args.runs,
                    host=False)["gpu_us"]))
            os.environ.pop("KERNELKIT_TUNE", None)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            for i, name, tokens, regs in forms:
                if tokens < m or (tokens > 8 and tokens // 2 >= m):
                    continue  # a form of another token count
                for kw in map(int, args.kwarps.split(",")):
                    if lib.lab_gemv_smem(i, kw) > 48 * 1024 or k // 64 < kw:
                        continue
                    call = lambda c, i=i, kw=kw: lib.lab_gemv_launch(  # noqa: E731
                        i, x.data_ptr(), c[0].data_ptr(), c[1].data_ptr(), out.data_ptr(), m, n, k, kw, stream())
                    out.fill_(float("nan"))
                    rc = call(qs[0])
                    torch.cuda.synchronize()
                    got = out.float()
                    off = int(((got - ref).abs() > 2.0**-7 * ref.abs() + 1e-3).sum()) if rc == 0 else -1
                    label = f"{name} kw{kw} r{regs}"
                    if rc != 0 or off:
                        rows.append((label + f" FAILED (rc {rc}, {off} outputs off)", None))
                        continue
                    rows.append((label, tb.time_calls([lambda c=c: call(c) for c in qs], args.runs,
                                                      host=False)["gpu_us"]))
            print(f"== m{m} n{n} k{k} ({nbytes / 1e6:.1f} MB of weights and scales)", flush=True)
            for label, us in sorted(rows, key=lambda r: r[1] if r[1] is not None else 1e9):
                print(f"  {rate(us) if us is not None else ' ' * 36}  {label}", flush=True)
        del qs, ws
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
