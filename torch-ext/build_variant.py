"""Builds a Hugging Face `kernels` hub build variant of kernelkit from this source tree.

    python torch-ext/build_variant.py OUT_REPO [--build-dir DIR] [--archs "75;80;90"]

writes OUT_REPO/build/torch<MM>-cxx11-<cu<VV>|cpu>-x86_64-linux/ with the `kernelkit` package, its op library built
under a versioned namespace (so it can be loaded next to the pip package), the generated _ops.py and metadata.json,
and copies build.toml and torch-ext/ beside it. `kernels.get_local_kernel(OUT_REPO)` then loads it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.1.0"
NAMESPACE = "_kernelkit_" + VERSION.replace(".", "_")


def variant_name() -> str:
    v = torch.__version__.split("+")[0].split(".")
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    compute = "cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else "cpu"
    return f"torch{v[0]}{v[1]}-{abi}-{compute}-{platform.machine()}-{platform.system().lower()}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the hub repository directory to write")
    p.add_argument("--build-dir", type=Path, default=ROOT / "build" / "hub-cmake")
    p.add_argument("--archs", default=os.environ.get("KERNELKIT_CUDA_ARCHS", "75;80;90"))
    a = p.parse_args(argv)
    jobs = str(os.cpu_count() or 2)
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(a.build_dir), "-G", "Ninja",
                    f"-DPython3_EXECUTABLE={sys.executable}", "-DKERNELKIT_BUILD_TORCH=ON",
                    "-DKERNELKIT_BUILD_TESTS=OFF", "-DKERNELKIT_BUILD_TOOLS=OFF",
                    f"-DKERNELKIT_TORCH_NAMESPACE={NAMESPACE}", f"-DKERNELKIT_CUDA_ARCHS={a.archs}"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(a.build_dir), "-j", jobs, "--target", "kernelkit_torch"], check=True,
                   stdout=subprocess.DEVNULL)
    variant = a.out / "build" / variant_name()
    package = variant / "kernelkit"
    shutil.rmtree(variant, ignore_errors=True)
    package.mkdir(parents=True)
    for f in (ROOT / "torch-ext" / "kernelkit").glob("*.py"):
        shutil.copy2(f, package)
    shutil.copy2(a.build_dir / "torch-ext" / "_ops.py", package)
    shutil.copy2(a.build_dir / "torch-ext" / "_kernelkit_ops.so", package)
    metadata = {
        "name": "kernelkit",
        "id": NAMESPACE,
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "backend": {"type": "cuda", "archs": ["7.5", "8.0", "9.0"]} if torch.version.cuda else {"type": "cpu"},
    }
    (variant / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    shutil.copy2(ROOT / "build.toml", a.out)
    shutil.copytree(ROOT / "torch-ext", a.out / "torch-ext", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "build_variant.py"))
    print(variant)
    return 0


if __name__ == "__main__":
    sys.exit(main())
