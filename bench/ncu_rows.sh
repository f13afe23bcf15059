#!/usr/bin/env bash
# Nsight Compute on the row ops next to Liger-Kernel's Triton kernels on the same inputs: where each spends its time
# (DRAM throughput, occupancy, issue slots, warp stall reasons, shared-memory wavefronts). kernelkit is called through
# its C ABI (bench/torch_baselines.py's binding), so no Python install is needed; Liger comes from PYTHONPATH.
#   bench/ncu_rows.sh [LIB] [OUT_DIR] [ROWS] [HIDDEN]   -> OUT_DIR/ncu_rows.txt (defaults: build/gc-native/libkernelkit_c.so,
#                                                        build/ncu, 65536 x 4096 bf16)
# KK_NCU_TUNE: a KERNELKIT_TUNE setting whose kernels are profiled after the defaults'.
set -uo pipefail
lib=${1:-build/gc-native/libkernelkit_c.so} out=${2:-build/ncu} rows=${3:-65536} hidden=${4:-4096}
mkdir -p "$out"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
cat >"$out/ncu_rows.py" <<'PY'
import os
import sys

import torch

sys.path.insert(0, os.environ["KK_BENCH_DIR"])
import torch_baselines as tb

kk = tb.Kernelkit(os.environ["KK_LIB"])
rows, hidden = int(os.environ["KK_ROWS"]), int(os.environ["KK_HIDDEN"])
torch.manual_seed(0)
t = {"x": torch.randn(1, rows, hidden, device="cuda", dtype=torch.bfloat16),
     "res": torch.randn(1, rows, hidden, device="cuda", dtype=torch.bfloat16),
     "w": torch.randn(hidden, device="cuda", dtype=torch.bfloat16),
     "b": torch.randn(hidden, device="cuda", dtype=torch.bfloat16)}
t["out"] = torch.empty_like(t["x"])
gate = torch.randn(rows, 2 * hidden, device="cuda", dtype=torch.bfloat16)
act_out = torch.empty(rows, hidden, device="cuda", dtype=torch.bfloat16)
eps = 1e-6
tunes = [None] + ([os.environ["KK_NCU_TUNE"]] if os.environ.get("KK_NCU_TUNE") else [])
for tune in tunes:  # two calls each: the second is warm
    if tune:
        os.environ["KERNELKIT_TUNE"] = tune
    for _ in range(2):
        tb.kk_rms_norm(kk, t, eps)
        tb.kk_layer_norm(kk, t, eps)
        tb.kk_softmax(kk, t, eps)
        tb.kk_fused_add_rms_norm(kk, t, eps)
    os.environ.pop("KERNELKIT_TUNE", None)
if tb.LIGER_MISSING:
    print("Liger not profiled:", tb.LIGER_MISSING)
else:
    for _ in range(2):
        tb.liger_rms_norm(t["x"], t["w"], eps)
        tb.liger_layer_norm(t["x"], t["w"], t["b"], eps)
        tb.liger_softmax(t["x"], eps)
        tb.liger_fused_add_rms_norm(t["x"], t["res"], t["w"], eps)
torch.cuda.synchronize()
print("ncu_rows.py done")
PY
kernels='row_norm_kernel|softmax|_rms_norm_forward|_layer_norm_forward|_fused_add_rms_norm'
KK_LIB=$(realpath "$lib") KK_BENCH_DIR=$(realpath bench) KK_ROWS=$rows KK_HIDDEN=$hidden \
  "$NCU" --target-processes all -k "regex:$kernels" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
  --section InstructionStats python3 "$out/ncu_rows.py" >"$out/ncu_rows.txt" 2>&1
rc=$?
keep='^  [a-zA-Z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit'
keep+='|Registers Per|Grid Size|Block Size|Stall|Issue Slots Busy|Executed Ipc|Issued Warp|No Eligible|Eligible Warps'
keep+='|Executed Instructions |Shared Memory|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|ncu_rows.py done|==ERROR==|not profiled'
grep -E "$keep" "$out/ncu_rows.txt" | head -600
exit $rc
