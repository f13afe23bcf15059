"""torch.export + AOTInductor with kernelkit ops (the C++ deployment route of issue 9): a transformers Llama patched
with kernelkit is exported and packaged (deploy/aoti/export_llama.py), a C++ program built against the environment's
libtorch (deploy/aoti/runner.cpp) loads kernelkit's op library and the package and runs it without Python, and its
logits match the Python model's. On CPU always; on CUDA (fp16) when a GPU is present."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_testing import sanitized

pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]
AOTI = ROOT / "deploy" / "aoti"


def run(cmd, **kw):
    """subprocess.run that fails with the command's own output (a bare CalledProcessError hides it)."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd[0]} exited {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    """The C++ runner, built once with CMake against this environment's torch."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    build = tmp_path_factory.mktemp("aoti-build")
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    run(["cmake", "-S", AOTI, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"], env=env)
    run(["cmake", "--build", build], env=env)
    return build / "aoti_runner"


@pytest.mark.parametrize("device,dtype,tol", [("cpu", "fp32", 1e-4)] +
                         ([("cuda", "fp16", 2e-2)] if torch.cuda.is_available() else []))
def test_aoti_package_runs_from_cpp_with_kernelkit_ops(runner, tmp_path, device, dtype, tol):
    run(sanitized([sys.executable, AOTI / "export_llama.py", tmp_path, "--device", device, "--dtype", dtype]))
    info = json.loads((tmp_path / "export.json").read_text())
    assert info["patched"] == {"LlamaMLP": 2, "LlamaRMSNorm": 5}
    assert info["kernelkit_calls_in_graph"] >= 7  # the exported graph calls kernelkit's ops, not a decomposition
    out = run(sanitized([runner, info["ops_library"], info["package"], tmp_path / "ids.bin", info["rows"],
                         info["cols"], tmp_path / "logits_cpp.bin"]))
    assert f"on {device}" in out.stdout
    want = np.fromfile(tmp_path / "logits_python.bin", dtype=np.float32)
    got = np.fromfile(tmp_path / "logits_cpp.bin", dtype=np.float32)
    assert got.size == want.size == info["rows"] * info["cols"] * info["vocab"]
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max()), np.abs(got - want).max()
