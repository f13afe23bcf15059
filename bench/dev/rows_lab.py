#!/usr/bin/env python3
"""Row-kernel lab: every work split of bench/dev/rows_lab.cu beside Liger-Kernel and torch.compile, same inputs, one
process (bf16). Each variant's output is checked against a float32 torch reference before it is timed; times are
medians of CUDA-graph replays over rotating buffer sets (cold L2), as bench/torch_baselines.py takes them.

  nvcc -O3 -std=c++20 -arch=sm_90a -shared -Xcompiler -fPIC -I src -I include bench/dev/rows_lab.cu -o /tmp/rows_lab.so
  python3 bench/dev/rows_lab.py /tmp/rows_lab.so [--ops rms,add,ln,softmax,silu] [--shapes 65536x4096,...] [--json F]
"""
import argparse
import ctypes
import os
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch_baselines as tb  # noqa: E402

OPS = {"rms": 0, "add": 1, "ln": 2, "softmax": 3, "copy": 4}
SHAPES = "65536x4096,16384x5120,4096x14336,2048x4096,16x4096"


def load(path):
    lib = ctypes.CDLL(path)
    P, I, I64, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float
    lib.lab_row_info.restype = ctypes.c_char_p
    lib.lab_row_info.argtypes = [I] + [ctypes.POINTER(I)] * 5
    lib.lab_row_launch.argtypes = [I, P, P, P, P, P, I64, I, F, I, P]
    lib.lab_act_name.restype = ctypes.c_char_p
    lib.lab_act_launch.argtypes = [I, P, P, I64, I, P]
    return lib


def row_variants(lib):
    out = []
    for i in range(lib.lab_row_count()):
        vals = [ctypes.c_int() for _ in range(5)]
        name = lib.lab_row_info(i, *[ctypes.byref(v) for v in vals]).decode()
        op, tpr, nv, rpc, persist = (v.value for v in vals)
        out.append(dict(i=i, name=name, op=op, tpr=tpr, nv=nv, rpc=rpc, persist=persist,
                        regs=lib.lab_row_registers(i), occ=lib.lab_row_occupancy(i)))
    return out


def fits(v, hidden):
    nvec = hidden // 8
    return v["tpr"] * v["nv"] >= nvec and v["tpr"] * (v["nv"] - 1) < nvec


def reference(op, t, eps):
    x = t["x"].float()
    if op == "rms":
        return [x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * t["w"].float()]
    if op == "add":
        r = (x + t["res0"].float()).to(torch.bfloat16).float()
        return [r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * t["w"].float(), r]
    if op == "ln":
        return [torch.nn.functional.layer_norm(x, x.shape[-1:], t["w"].float(), t["b"].float(), eps)]
    if op == "softmax":
        return [torch.softmax(x, -1)]
    if op == "copy":
        return [x]
    d = x.shape[-1] // 2
    return [torch.nn.functional.silu(x[..., :d]) * x[..., d:]]


def close(got, ref):
    got = got.float()
    return bool(((got - ref).abs() <= 2.0**-7 * ref.abs() + 1e-4).all())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--ops", default="copy,rms,add,ln,softmax,silu")
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--compile", default="rms,silu", help="ops that get a torch.compile baseline")
    ap.add_argument("--json")
    ap.add_argument("--kk-only", action="store_true", help="time only the library (--kk), no lab variants or peers")
    ap.add_argument("--kk", help="libkernelkit_c.so: the library's kernels as a baseline")
    ap.add_argument("--tune", action="append", default=[], help="KERNELKIT_TUNE settings to time the library under")
    args = ap.parse_args()
    lib = load(args.lib)
    kk = tb.Kernelkit(args.kk) if args.kk else None
    kk_ops = {"rms": "rms_norm", "add": "fused_add_rms_norm", "ln": "layer_norm", "softmax": "softmax",
              "silu": "silu_and_mul"}
    variants = row_variants(lib)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    peak = tb.copy_peak()["gbps"]
    print(f"copy ceiling {peak:.0f} GB/s; liger {tb.liger_version()}", flush=True)
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)  # noqa: E731
    gen = torch.Generator(device="cuda").manual_seed(1)
    results = []
    for op in args.ops.split(","):
        for shape in args.shapes.split(","):
            rows, hidden = map(int, shape.split("x"))
            width = 2 * hidden if op == "silu" else hidden
            n_out = hidden
            elems_io = {"rms": 2, "add": 4, "ln": 2, "softmax": 2, "silu": 3, "copy": 2}[op]
            nbytes = 2 * rows * hidden * elems_io
            sets_n, cold = tb.buffer_sets(nbytes, l2)
            sets = []
            for _ in range(sets_n):
                t = {"x": torch.randn(1, rows, width, generator=gen, device="cuda").to(torch.bfloat16),
                     "w": (1 + 0.1 * torch.randn(hidden, generator=gen, device="cuda")).to(torch.bfloat16),
                     "b": (0.1 * torch.randn(hidden, generator=gen, device="cuda")).to(torch.bfloat16),
                     "res0": torch.randn(1, rows, hidden, generator=gen, device="cuda").to(torch.bfloat16),
                     "out": torch.empty(1, rows, n_out, device="cuda", dtype=torch.bfloat16)}
                t["res"] = t["res0"].clone()
                sets.append(t)
            eps = 1e-6 if op != "ln" else 1e-5
            ref = reference(op, sets[0], eps)
            cands = []
            if args.kk_only:
                pass
            elif op == "silu":
                for i in range(lib.lab_act_count()):
                    cands.append((lib.lab_act_name(i).decode(), None,
                                  lambda t, i=i: lib.lab_act_launch(i, t["out"].data_ptr(), t["x"].data_ptr(), rows,
                                                                    hidden, stream())))
            else:
                for v in variants:
                    if v["op"] != OPS[op] or not fits(v, hidden):
                        continue
                    pb = max(v["occ"], 1) * sms

                    def call(t, v=v, pb=pb):
                        return lib.lab_row_launch(v["i"], t["out"].data_ptr(), t["x"].data_ptr(), t["res"].data_ptr(),
                                                  t["w"].data_ptr(), t["b"].data_ptr(), rows, hidden, eps, pb, stream())
                    cands.append((f'{v["name"]} r{v["regs"]} o{v["occ"]}', v, call))
            base = []
            if kk is not None and op in kk_ops:
                kop = next(o for o in tb.OPS if o.name == kk_ops[op])
                for setting in [""] + args.tune:
                    def kcall(t, kop=kop, setting=setting):
                        os.environ["KERNELKIT_TUNE"] = setting
                        kop.kernelkit(kk, t, kop.eps)
                    base.append((f"kernelkit[{setting}]" if setting else "kernelkit", kcall))
            if not tb.LIGER_MISSING and op != "copy" and not args.kk_only:
                lf = {"rms": lambda t: tb.liger_rms_norm(t["x"], t["w"], eps),
                      "add": lambda t: tb.liger_fused_add_rms_norm(t["x"], t["res"], t["w"], eps),
                      "ln": lambda t: tb.liger_layer_norm(t["x"], t["w"], t["b"], eps),
                      "softmax": lambda t: tb.liger_softmax(t["x"], eps),
                      "silu": lambda t: tb.liger_silu_and_mul(t["x"], eps)}[op]
                base.append(("Liger", lf))
            formula = {"rms": lambda x, w: tb.hf_rms_norm(x, w, eps),
                       "add": lambda x, r, w: tb.add_rms_norm(x, r, w, eps),
                       "ln": lambda x, w, b: tb.torch_layer_norm(x, w, b, eps),
                       "softmax": lambda x: torch.softmax(x, -1), "copy": lambda x: x.clone(),
                       "silu": lambda x: tb.act_formula("silu", True)(x, 0.0)}[op]
            argn = {"rms": ("x", "w"), "add": ("x", "res", "w"), "ln": ("x", "w", "b"), "softmax": ("x",),
                    "silu": ("x",), "copy": ("x",)}[op]
            if op in args.compile.split(",") and not args.kk_only:
                compiled = torch.compile(formula)
                base.append(("compile", lambda t: compiled(*(t[n] for n in argn))))
            row = {"op": op, "shape": shape, "bytes": nbytes, "cold": cold, "variants": {}, "baselines": {}}
            for name, v, call in cands:
                t = sets[0]
                t["out"].fill_(float("nan"))
                t["res"].copy_(t["res0"])
                rc = call(t)
                torch.cuda.synchronize()
                outs = [t["out"]] + ([t["res"]] if op == "add" else [])
                ok = rc == 0 and all(close(g, r) for g, r in zip(outs, ref))
                if not ok:
                    row["variants"][name] = {"error": f"rc {rc} or mismatch"}
                    continue
                us = tb.time_calls([lambda t=t: call(t) for t in sets], args.runs, host=False)["gpu_us"]
                row["variants"][name] = {"us": us, "gbps": nbytes / us / 1e3}
            for name, f in base:
                try:
                    us = tb.time_calls([lambda t=t: f(t) for t in sets], args.runs, host=False)["gpu_us"]
                    row["baselines"][name] = {"us": us, "gbps": nbytes / us / 1e3}
                except Exception as e:  # noqa: BLE001
                    row["baselines"][name] = {"error": str(e)[:200]}
                    print(f"    ERROR {name}: {str(e)[:200]}")
                os.environ.pop("KERNELKIT_TUNE", None)
            timed = {k: v["us"] for k, v in row["variants"].items() if "us" in v}
            best = min(timed, key=timed.get) if timed else None
            other = {k: v["us"] for k, v in row["baselines"].items() if "us" in v and not k.startswith("kernelkit")}
            for k, v in row["baselines"].items():
                if k.startswith("kernelkit") and "us" in v:
                    print(f"    {v['us']:9.2f}  {k} ({nbytes / v['us'] / 1e3 / peak * 100:5.1f}%)")
            bo = min(other, key=other.get) if other else None
            if best and bo:
                print(f"{op:8s} {shape:11s} best {timed[best]:8.1f} us {nbytes / timed[best] / 1e3 / peak * 100:5.1f}% "
                      f"[{best}]  {bo} {other[bo]:8.1f} ({nbytes / other[bo] / 1e3 / peak * 100:5.1f}%)  "
                      f"ratio {other[bo] / timed[best]:.3f}", flush=True)
            for k in sorted(timed, key=timed.get):
                print(f"    {timed[k]:9.2f}  {k}")
            for k, v in row["variants"].items():
                if "error" in v:
                    print(f"    ERROR {k}: {v['error']}")
            results.append(row)
            del sets
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps({"peak_gbps": peak, "results": results}, indent=1))


if __name__ == "__main__":
    main()
