#!/bin/bash
# Session 5, after diag-segv.sh: is the compiler's libstdc++.so development link missing there, does the op library now
# link the shared libstdc++, and do the PyTorch tests that crashed pass?
cd "$(dirname "$0")/../../.."
echo "g++: $(g++ -dumpfullversion) libstdc++.so -> $(g++ -print-file-name=libstdc++.so); .a -> $(g++ -print-file-name=libstdc++.a)"
t0=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 120 python3 -m pip install -q --no-build-isolation \
  --config-settings=cmake.define.KERNELKIT_CUDA_ARCHS=native . > $OUT/pip.log 2>&1; echo "pip rc $? in $(($(date +%s)-t0)) s"
so=$(cd /tmp && python3 -c "import kernelkit,os;print(os.path.dirname(kernelkit.__file__))")/_kernelkit_ops.so
readelf -d $so | grep NEEDED | grep -o "\[.*\]" | tr '\n' ' '; echo; echo "std::locale symbols defined: $(nm -D --defined-only $so | grep -c _ZNSt6locale)"
(cd /tmp && timeout 100 python3 -m pytest -q -rf --tb=short "$OLDPWD/tests/python/test_torch_ops.py" \
   "$OLDPWD/tests/python/test_aoti.py" > $OUT/pytest.txt 2>&1); echo "pytest rc $?"; tail -25 $OUT/pytest.txt
