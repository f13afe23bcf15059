#!/bin/bash
# Diagnostic (temporary): does an exception raised by the op library crash the process on this machine?
set -x
python3 -c "import torch,sys; print(torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI, sys.version)"
g++ --version | head -1; which gdb; c++ --version | head -1
cat > /tmp/snip.py <<'PY'
import sys, torch
torch.ops.load_library(sys.argv[1])
x = torch.randn(4, 64); out = torch.empty_like(x)
if len(sys.argv) > 2:
    f = torch.compile(lambda a: a * 2 + 1)
    print("compiled", f(x).sum().item(), flush=True)
try:
    torch.ops.kernelkit.activation(out, x, "relu")
except Exception as e:
    print("activation raised", type(e).__name__, str(e)[:80], flush=True)
try:
    torch.ops.kernelkit.rms_norm(out, x, torch.ones(63), 1e-6, 0.0)
except Exception as e:
    print("rms_norm raised", type(e).__name__, str(e)[:80], flush=True)
print("done", flush=True)
PY
for cuda in OFF ON; do
  b=build/diag-$cuda
  cmake -S . -B $b -G Ninja -DKERNELKIT_ENABLE_CUDA=$cuda -DKERNELKIT_BUILD_TORCH=ON -DKERNELKIT_BUILD_TESTS=OFF \
    -DKERNELKIT_BUILD_TOOLS=OFF -DKERNELKIT_CUDA_ARCHS=native -DCMAKE_BUILD_TYPE=Release > $OUT/cfg-$cuda.log 2>&1
  cmake --build $b -j16 > $OUT/build-$cuda.log 2>&1; echo "build $cuda rc $?"
  so=$(find $b -name "_kernelkit_ops*.so" | head -1); echo "so=$so"
  python3 -X faulthandler /tmp/snip.py $so 2>&1 | tail -n 8; echo "rc ${PIPESTATUS[0]}"
  python3 -X faulthandler /tmp/snip.py $so compile 2>&1 | tail -n 8; echo "rc ${PIPESTATUS[0]}"
  if which gdb >/dev/null; then gdb -batch -ex run -ex bt --args python3 /tmp/snip.py $so 2>&1 | grep -A25 "SIGSEGV" | head -40; fi
done
