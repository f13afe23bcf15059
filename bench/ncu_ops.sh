#!/usr/bin/env bash
# Nsight Compute on the prefill, decode and weight-only kernels: where their time goes (DRAM and
# tensor-pipe throughput, occupancy and what limits it, warp stall reasons), for the shapes of the benchmark table; the
# prefill's default (on sm_90a the TMA-fed wgmma kernel) next to its KERNELKIT_TUNE alternatives, the CUDA-core
# decode (decode_tc=0) next to the default tensor-core one. Needs a GPU, ncu, and the kernelkit package installed in
# the Python environment (scripts/gpu-check --python does that). KK_NCU_ONLY=prefill, decode or decodefp8 profiles only
# the prefill kernels, only the 16-bit decode at batches 1 to 256, or only the decode over an e4m3 cache.
#   [KK_NCU_ONLY=prefill|decode|decodefp8] bench/ncu_ops.sh [OUT_DIR]     -> OUT_DIR/ncu_ops.txt (default build/ncu)
set -uo pipefail
out=${1:-build/ncu}
mkdir -p "$out"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
cat >"$out/ncu_ops.py" <<'PY'
import os

import torch
import kernelkit

dev, dt = "cuda", torch.bfloat16
only = os.environ.get("KK_NCU_ONLY", "")
torch.manual_seed(0)
if only in ("", "prefill"):
    q, k, v = (torch.randn(1, 4096, 32, 128, device=dev, dtype=dt) for _ in range(3))  # prefill b1 h32 s4096 d128
    kernelkit.attention(q, k, v, causal=True)  # the default: on sm_90a the TMA-fed wgmma kernel, 128-key tiles
    # Its alternatives: the mma.sync kernel; the wgmma one fed by cp.async (64- and 128-key tiles) or TMA with 64 keys.
    for tune in ("attn_wgmma=0", "attn_wgmma=1", "attn_wgmma=1,attn_bn=128", "attn_wgmma=2,attn_bn=64"):
        os.environ["KERNELKIT_TUNE"] = tune
        try:
            kernelkit.attention(q, k, v, causal=True)
        except RuntimeError as e:
            print(tune + ":", str(e).splitlines()[0])
    os.environ.pop("KERNELKIT_TUNE", None)
# decode: b x h32/kv8 x ctx x d128; all: b1 and b32 at ctx 4096 on tensor cores (default), then CUDA cores; decode: the
# default at b1 ctx 32768, b16 ctx 512, b64 ctx 2048 (where it trails cuDNN on the H200) and b256 ctx 2048 (where not)
decode = {"": ((1, 4096), (32, 4096)), "decode": ((1, 32768), (16, 512), (64, 2048), (256, 2048))}.get(only, ())
for b, ctx in decode:
    q = torch.randn(b, 1, 32, 128, device=dev, dtype=dt)
    kc = torch.randn(b, ctx, 8, 128, device=dev, dtype=dt)
    vc = torch.randn(b, ctx, 8, 128, device=dev, dtype=dt)
    for tune in (None, "decode_tc=0") if only == "" else (None,):
        if tune:
            os.environ["KERNELKIT_TUNE"] = tune
        for _ in range(2):
            kernelkit.decode_attention(q, kc, vc)
        os.environ.pop("KERNELKIT_TUNE", None)
# decode over an e4m3 cache (b16 ctx 8192: #25's bar), bf16 q
if only in ("", "decodefp8") and torch.cuda.get_device_capability() >= (8, 9):
    q = torch.randn(16, 1, 32, 128, device=dev, dtype=dt)
    caches = []
    for _ in range(2):  # K, V: distinct memory, as in a model (one tensor for both would hit L2 for V)
        c = torch.randn(16, 8192, 8, 128, device=dev, dtype=dt)
        scale = c.float().abs().amax(dim=(0, 1, 3)) / 448
        caches.append(((c.float() / scale[:, None]).to(torch.float8_e4m3fn), scale))
        del c
    (k8, ks), (v8, vs) = caches
    for tune in (None, "decode_f16mma=0"):
        if tune:
            os.environ["KERNELKIT_TUNE"] = tune
        for _ in range(2):
            kernelkit.decode_attention(q, k8, v8, k_scale=ks, v_scale=vs)
        os.environ.pop("KERNELKIT_TUNE", None)
for n, k in ((11008, 4096), (4096, 11008)) if only == "" else ():  # weight-only linear, m 1 (GEMV), 16 (split-K)
    w = torch.randn(n, k, device=dev, dtype=dt) * 0.02
    for bits in (8, 4):
        qw, s = kernelkit.quantize_weight(w, bits, 128)
        for m in (1, 16):
            x = torch.randn(m, k, device=dev, dtype=dt)
            for _ in range(2):
                kernelkit.linear_weight_only(x, qw, s, bits, 128 if bits == 4 else 0)
torch.cuda.synchronize()
print("ncu_ops.py done")
PY
# Every launch of the matching kernels (the second of each pair is warm); the sections that say where time goes.
kernels='flash_prefill|decode_kernel|decode_tc_kernel|decode_merge|linear_gemv|linear_tc|splitk_reduce'
"$NCU" --target-processes all -k "regex:$kernels" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis python3 "$out/ncu_ops.py" >"$out/ncu_ops.txt" 2>&1
rc=$?
keep='^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit'
keep+='|Registers Per|Grid Size|Block Size|Stall|Issue Slots Busy|ncu_ops.py done|==ERROR=='
grep -E "$keep" "$out/ncu_ops.txt" | head -400
exit $rc
