#!/bin/bash
# Diagnostic (session 5): where does a core-reported error crash the op library on the H200 machine? cuda-gdb (the
# machine has no gdb) backtraces the segfault; the installed op library comes back for addr2line here.
cd "$(dirname "$0")/../../.."
export CMAKE_BUILD_PARALLEL_LEVEL=16
t0=$(date +%s)
timeout 150 python3 -m pip install -q --no-build-isolation --config-settings=cmake.define.KERNELKIT_CUDA_ARCHS=native . \
  > $OUT/pip.log 2>&1; echo "pip rc $? in $(($(date +%s)-t0)) s"
pkg=$(cd /tmp && python3 -c "import kernelkit,os;print(os.path.dirname(kernelkit.__file__))"); ls -la $pkg
so=$(ls $pkg/_kernelkit*.so | head -1); cp $so $OUT/
cat > /tmp/snip.py <<'PY'
import torch, kernelkit
x = torch.randn(4, 64)
for name, f in [("silu_and_mul 63", lambda: kernelkit.silu_and_mul(torch.randn(4, 63))),
                ("rms_norm w63", lambda: kernelkit.rms_norm(x, torch.ones(63)))]:
    try:
        f()
    except Exception as e:
        print(name, "raised", type(e).__name__, str(e)[:100], flush=True)
print("done", flush=True)
PY
(cd /tmp && timeout 40 python3 -X faulthandler /tmp/snip.py 2>&1 | grep -v "^  File\|^Thread\|^$" | head -20)
(cd /tmp && timeout 100 cuda-gdb -batch -ex run -ex "bt 40" -ex "info registers rip" -ex "x/8i \$pc-16" \
   -ex "info sharedlibrary" --args python3 /tmp/snip.py > $OUT/gdb.txt 2>&1); echo "gdb rc $?"
grep -n "SIGSEGV" -A45 $OUT/gdb.txt | head -60; grep -n "kernelkit\|libstdc\|libgcc" $OUT/gdb.txt | tail -8
(cd /tmp && timeout 60 python3 -m pytest -q -x --tb=long "$OLDPWD/tests/python/test_aoti.py" > $OUT/aoti.txt 2>&1)
grep -nE "Error|error:|assert|passed|failed" $OUT/aoti.txt | head -30
