"""What bench/generate.py and bench/diffusion.py share: their common command-line options and how they write results."""
from __future__ import annotations

import json

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def add_common_args(p, runs):
    p.add_argument("--runs", type=int, default=runs)
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--device", default="cuda")
    p.add_argument("--compile-backend", default="inductor")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--markdown", help="write the table here")
    p.add_argument("--commit", default="")


def on_cuda(device) -> bool:
    return torch.device(device).type == "cuda"


def sync(device):
    """Waits for the device (wall-clock timing of what a caller sees)."""
    if on_cuda(device):
        torch.cuda.synchronize()


def gpu_name(device):
    return torch.cuda.get_device_name(device) if on_cuda(device) else "cpu"


def write_outputs(args, result, md):
    """Prints the table and writes --json / --markdown when given."""
    print(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
