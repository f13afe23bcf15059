# Sourced by the scripts: CUDA on PATH when installed in the usual place; parallelism; the compilers and their cache.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
JOBS=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/kernelkit-ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Paths under the checkout hash relative to it, so clones at other paths (CI) reuse the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
# One compiler name for every build of the checkout: CMake picks cc / c++, while scikit-build-core (pip install .)
# would set Python's configured gcc / g++, and ccache keys on the name, so the wheel and the hub variant would compile
# again what the CMake build just compiled.
export CC=${CC:-cc} CXX=${CXX:-c++}
# phase "what": prints what the next long step does, and the time the previous one took.
phase() {
  local now=$SECONDS
  [ -n "${KK_PHASE:-}" ] && echo "== ${KK_PHASE}: $((now - KK_PHASE_T0)) s"
  KK_PHASE=$1 KK_PHASE_T0=$now
  [ -n "$1" ] && echo "== $1 ..."
  return 0
}
