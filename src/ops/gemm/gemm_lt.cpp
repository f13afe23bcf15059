// linear on CUDA through cuBLASLt. Row-major y[m, n] = x[m, k] w[n, k]^T is, in cuBLASLt's column-major terms,
// D[n, m] = op(A) B with A = w seen as [k, n] (ld = w's row stride) transposed, B = x seen as [k, m] (ld = x's row
// stride) and D = y seen as [n, m] (ld = y's row stride); the bias epilogue adds bias[n] along D's rows.
// Compute in fp32 (CUBLAS_COMPUTE_32F; 32F_FAST_TF32 when TF32 is allowed for f32), scale type fp32. The INT8 sums of
// linear_w8a8 and the FP8 matmul of linear_fp8 (src/ops/quant/) take the same reading.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "kernels/common/check.cuh"
#include "kernels/common/scratch.hpp"
#include "ops/gemm/gemm.hpp"
#include "runtime/op_args.hpp"
#include "runtime/runtime_internal.hpp"

namespace kernelkit {
namespace {

// cuBLASLt is loaded at the first GEMM handle (dlopen) instead of linked: loading it runs its initialization, about
// 70 ms of every process's start on the CI machine (an empty program linked with it starts in 0.07 s, 0.00 without),
// which every kernelkit program and test process paid whether or not it ran a GEMM. The functions used, typed by
// cublasLt.h:
// clang-format off
#define KK_LT_FUNCTIONS(X)                                                                                \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic)                \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)              \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                                    \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)
// clang-format on
struct LtApi {
#define KK_LT_MEMBER(name) decltype(&::name) name = nullptr;
  KK_LT_FUNCTIONS(KK_LT_MEMBER)
#undef KK_LT_MEMBER
};

// The library by the soname of the cuBLAS major version compiled against (the one a process may already have loaded,
// e.g. by torch), else the file the build linked against; then its functions. Once per process; the error stays.
struct LtLoad {
  LtApi api;
  std::string error;
};
const LtLoad& lt_load() {
  static const LtLoad loaded = [] {
    LtLoad l;
    const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef KERNELKIT_CUBLASLT_PATH
    if (!lib) lib = dlopen(KERNELKIT_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!lib) {
      const char* why = dlerror();
      l.error = "linear: cannot load cuBLASLt (" + soname + "): " + (why ? why : "not found");
      return l;
    }
#define KK_LT_RESOLVE(name)                                            \
  l.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (!l.api.name && l.error.empty()) l.error = "linear: " + soname + " has no " #name;
    KK_LT_FUNCTIONS(KK_LT_RESOLVE)
#undef KK_LT_RESOLVE
    return l;
  }();
  return loaded;
}
Status load_lt() {
  const LtLoad& l = lt_load();
  return l.error.empty() ? Status::Ok() : unsupported(l.error);
}
// The loaded functions: only after load_lt() succeeded (GemmHandle::init, which every path here passes first).
const LtApi& cublaslt() { return lt_load().api; }

Status lt_error(const char* what, cublasStatus_t s) {
  return Status(StatusCode::cuda_error, std::string("linear: ") + what + " failed: cuBLAS status " +
                                            std::to_string(static_cast<int>(s)));
}
#define KK_LT_RETURN(call)                                   \
  do {                                                       \
    const cublasStatus_t kk_s_ = (call);                     \
    if (kk_s_ != CUBLAS_STATUS_SUCCESS) return lt_error(#call, kk_s_); \
  } while (0)

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// The problem an algorithm is chosen for: shape, dtype, strides and pointer alignment (cuBLASLt's kernels depend on
// them), epilogue and compute type.
using AlgoKey = std::tuple<int64_t, int64_t, int64_t, int, int64_t, int64_t, int64_t, int, int, bool>;

// A pointer's alignment in bytes, up to 256 (what cuBLASLt assumes when not told).
int alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// Owns a cuBLASLt descriptor of type H through its destroy function.
template <typename H, auto LtApi::*Destroy>
struct Desc {
  H h = nullptr;
  ~Desc() {
    if (h) (cublaslt().*Destroy)(h);
  }
};

// The descriptors of one D [n, m] = op(A)^T B problem in the reading above (A = w as [k, n], B = x as [k, m], D as
// [n, m]; row strides as leading dims), with its epilogue set and its bias (of D's type) when given.
struct TnMatmul {
  Desc<cublasLtMatmulDesc_t, &LtApi::cublasLtMatmulDescDestroy> op;
  Desc<cublasLtMatrixLayout_t, &LtApi::cublasLtMatrixLayoutDestroy> a, b, d;
};
struct TnShape {
  int64_t m, n, k, x_stride, w_stride, d_stride;
};
Status make_tn(cublasComputeType_t compute, cudaDataType_t scale, cudaDataType_t in, cudaDataType_t out,
               const TnShape& s, cublasLtEpilogue_t epilogue, const void* bias, TnMatmul* t) {
  KK_LT_RETURN(cublaslt().cublasLtMatmulDescCreate(&t->op.h, compute, scale));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  KK_LT_RETURN(
      cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  KK_LT_RETURN(
      cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
  KK_LT_RETURN(
      cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  if (bias) {
    KK_LT_RETURN(
        cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    KK_LT_RETURN(
        cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &out, sizeof out));
  }
  KK_LT_RETURN(cublaslt().cublasLtMatrixLayoutCreate(&t->a.h, in, s.k, s.n, s.w_stride));
  KK_LT_RETURN(cublaslt().cublasLtMatrixLayoutCreate(&t->b.h, in, s.k, s.m, s.x_stride));
  KK_LT_RETURN(cublaslt().cublasLtMatrixLayoutCreate(&t->d.h, out, s.n, s.m, s.d_stride));
  return Status::Ok();
}

}  // namespace

struct GemmHandle::Impl {
  int device = -1;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algos;
  std::set<AlgoKey> no_algo;  // problems cuBLASLt's heuristic has no algorithm for: asked once
  ~Impl() {
    if (workspace) cudaFree(workspace);
    if (lt) cublaslt().cublasLtDestroy(lt);
  }
};

GemmHandle::GemmHandle() = default;
GemmHandle::~GemmHandle() = default;
GemmHandle::GemmHandle(GemmHandle&&) noexcept = default;
GemmHandle& GemmHandle::operator=(GemmHandle&&) noexcept = default;
int GemmHandle::device() const { return impl_ ? impl_->device : -1; }
size_t GemmHandle::cached_algorithms() const { return impl_ ? impl_->algos.size() : 0; }

Status GemmHandle::init(int device, size_t workspace_bytes) {
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  KK_RETURN_IF_ERROR(load_lt());
  KK_LT_RETURN(cublaslt().cublasLtCreate(&impl->lt));
  if (workspace_bytes > 0 && cudaMalloc(&impl->workspace, workspace_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return Status(StatusCode::cuda_error, "linear: cannot allocate a cuBLASLt workspace of " +
                                              std::to_string(workspace_bytes) + " bytes on cuda:" +
                                              std::to_string(device));
  }
  impl->workspace_bytes = workspace_bytes;
  impl_ = std::move(impl);
  return Status::Ok();
}

namespace {

// The caller's handle, or this thread's default one for `device` (created on first use, which may be inside a CUDA
// graph capture). A default handle ends with its thread, so nothing captured may point at its workspace: captured
// calls take theirs from the graph (linear_cuda).
Status handle_for(GemmHandle* handle, const Device& device, GemmHandle::Impl** out) {
  thread_local std::map<int, GemmHandle> defaults;  // per device, for calls without a handle
  if (!handle) {
    handle = &defaults[device.index];
    if (!handle->impl()) {
      const cuda::RelaxedCaptureMode relaxed;
      KK_RETURN_IF_ERROR(handle->init(device.index));
    }
  }
  GemmHandle::Impl* h = handle->impl();
  if (!h) return invalid_argument("linear: the GemmHandle is not initialized (call init(device) first)");
  if (h->device != device.index)
    return invalid_argument("linear: the GemmHandle is for cuda:" + std::to_string(h->device) +
                            " but the tensors are on " + to_string(device));
  *out = h;
  return Status::Ok();
}

// The cached algorithm for `key`, or cuBLASLt's first heuristic choice for matrices aligned to `align` bytes (the
// smallest of the A, B, C / D pointers' alignments: unless told, cuBLASLt assumes 256 and may pick a kernel that fails
// on a less aligned view) within `workspace_bytes` of workspace; null when it has none.
Status algorithm_for(GemmHandle::Impl* h, const AlgoKey& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                     cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, uint32_t align, size_t workspace_bytes,
                     const cublasLtMatmulAlgo_t** out) {
  auto it = h->algos.find(key);
  if (it == h->algos.end()) {
    if (h->no_algo.count(key)) {
      *out = nullptr;
      return Status::Ok();
    }
    Desc<cublasLtMatmulPreference_t, &LtApi::cublasLtMatmulPreferenceDestroy> pref;
    KK_LT_RETURN(cublaslt().cublasLtMatmulPreferenceCreate(&pref.h));
    KK_LT_RETURN(cublaslt().cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &workspace_bytes, sizeof workspace_bytes));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      KK_LT_RETURN(cublaslt().cublasLtMatmulPreferenceSetAttribute(pref.h, attr, &align, sizeof align));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublaslt().cublasLtMatmulAlgoGetHeuristic(h->lt, op, la, lb, ld, ld, pref.h, 1, &result, &found);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) {
      h->no_algo.insert(key);
      *out = nullptr;
      return Status::Ok();
    }
    KK_LT_RETURN(st);
    it = h->algos.emplace(key, result.algo).first;
  }
  *out = &it->second;
  return Status::Ok();
}

// D = alpha op(A) B + beta C with C = D, on the handle's workspace, or inside a CUDA graph capture on the graph's own
// (a stream-ordered allocation the graph records): a graph outlives a default handle (freed when its thread ends), and
// replays of it must not share a workspace with eager calls on other streams. Eagerly, no allocation per call.
Status run_matmul(GemmHandle::Impl* h, cublasLtMatmulDesc_t op, float alpha, const void* a, cublasLtMatrixLayout_t la,
                  const void* b, cublasLtMatrixLayout_t lb, float beta, void* d, cublasLtMatrixLayout_t ld,
                  const cublasLtMatmulAlgo_t& algo, Stream stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  KK_CUDA_RETURN(cudaStreamIsCapturing(s, &capturing));
  const size_t graph_bytes = capturing == cudaStreamCaptureStatusActive ? h->workspace_bytes : 0;
  return cuda::with_stream_scratch(graph_bytes, s, [&](void* scratch) -> Status {
    KK_LT_RETURN(cublaslt().cublasLtMatmul(h->lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &algo,
                                           scratch ? scratch : h->workspace, h->workspace_bytes, s));
    return Status::Ok();
  });
}

// The descriptors of an FP8 problem and cuBLASLt's algorithm for it (null: none). The column-major reading of linear
// (top of the file) with e4m3 A = w and B = x: cuBLASLt's FP8 matmul takes exactly this transposed-A, plain-B ("TN")
// form. A's scales are w's (one, one a row of D = an output channel, or one a 128 x 128 block of w), B's are x's (one,
// one a column of D = a token, or one a 1 x 128 slice of a token's row).
Status fp8_matmul_for(GemmHandle::Impl* h, const detail::Fp8GemmArgs& a, TnMatmul* t,
                      const cublasLtMatmulAlgo_t** algo) {
  KK_RETURN_IF_ERROR(make_tn(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, cuda_type(a.out_dtype),
                             {a.m, a.n, a.k, a.x_stride, a.w_stride, a.out_stride},
                             a.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, a.bias, t));
  KK_LT_RETURN(
      cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a.sw, sizeof a.sw));
  KK_LT_RETURN(
      cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a.sx, sizeof a.sx));
  if (a.scaling != detail::Fp8Scaling::tensor) {
    const bool block = a.scaling == detail::Fp8Scaling::block;
    const int32_t a_mode =
        block ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const int32_t b_mode = block ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    KK_LT_RETURN(
        cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode));
    KK_LT_RETURN(
        cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode));
  }
  const int8_t fast = a.fast_accumulation ? 1 : 0;
  KK_LT_RETURN(cublaslt().cublasLtMatmulDescSetAttribute(t->op.h, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));

  const int align = std::min({alignment(a.x), alignment(a.w), alignment(a.out), a.bias ? alignment(a.bias) : 256});
  // The FP8 problems' keys: the dtype slot past every DType (the output dtype in it), the epilogue slot the options.
  const AlgoKey key{
      a.m,
      a.n,
      a.k,
      256 + static_cast<int>(a.out_dtype),
      a.x_stride,
      a.w_stride,
      a.out_stride,
      align,
      (a.bias ? 1 : 0) | (static_cast<int>(a.scaling) << 1) | (a.fast_accumulation ? 8 : 0) | (a.accumulate ? 16 : 0),
      false};
  return algorithm_for(h, key, t->op.h, t->a.h, t->b.h, t->d.h, static_cast<uint32_t>(align), h->workspace_bytes, algo);
}

// Problem a run as the padded problem p (fp8_gemm_cuda: p.m > a.m rows, x, its scales and D in scratch): x's rows
// and its [k / 128][m] scales copied into zeroed [p.m, k] and [k / 128][p.m] buffers, out's rows into D when
// accumulating, the matmul, and D's first a.m rows back to out.
Status fp8_gemm_padded(GemmHandle::Impl* h, const detail::Fp8GemmArgs& a, const detail::Fp8GemmArgs& p,
                       const TnMatmul& t, const cublasLtMatmulAlgo_t& algo, Stream stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  const size_t es = dtype_size(a.out_dtype), kb = static_cast<size_t>(a.k / 128);
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t x_bytes = up(p.m * a.k), sx_bytes = up(kb * p.m * 4), d_bytes = up(p.m * p.out_stride * es);
  return cuda::with_stream_scratch(x_bytes + sx_bytes + d_bytes, s, [&](void* scratch) -> Status {
    auto* const x = static_cast<unsigned char*>(scratch);
    auto* const sx = reinterpret_cast<float*>(x + x_bytes);
    void* const d = x + x_bytes + sx_bytes;
    KK_CUDA_RETURN(cudaMemsetAsync(scratch, 0, x_bytes + sx_bytes, s));
    KK_CUDA_RETURN(cudaMemcpy2DAsync(x, a.k, a.x, a.x_stride, a.k, a.m, cudaMemcpyDeviceToDevice, s));
    KK_CUDA_RETURN(cudaMemcpy2DAsync(sx, p.m * 4, a.sx, a.m * 4, a.m * 4, kb, cudaMemcpyDeviceToDevice, s));
    if (a.accumulate)
      KK_CUDA_RETURN(cudaMemcpy2DAsync(d, p.out_stride * es, a.out, a.out_stride * es, a.n * es, a.m,
                                       cudaMemcpyDeviceToDevice, s));
    KK_LT_RETURN(
        cublaslt().cublasLtMatmulDescSetAttribute(t.op.h, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx, sizeof sx));
    KK_RETURN_IF_ERROR(
        run_matmul(h, t.op.h, 1.0f, a.w, t.a.h, x, t.b.h, a.accumulate ? 1.0f : 0.0f, d, t.d.h, algo, stream));
    KK_CUDA_RETURN(
        cudaMemcpy2DAsync(a.out, a.out_stride * es, d, p.out_stride * es, a.n * es, a.m, cudaMemcpyDeviceToDevice, s));
    return Status::Ok();
  });
}

}  // namespace

namespace detail {

Status linear_cuda(const LinearArgs& a, GemmHandle* handle, Stream stream) {
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(a.device.index));
  KK_RETURN_IF_ERROR(cuda::check_dtype_code(a.dtype, a.device.index, "linear"));
  for (auto [p, arg] : {std::pair{static_cast<const void*>(a.x), "x"}, {a.w, "w"}, {a.y, "y"}, {a.bias, "bias"}})
    if (p && !device_pointers_trusted())
      KK_RETURN_IF_ERROR(check_device_pointer(p, a.device.index, (std::string("linear: ") + arg).c_str()));
  GemmHandle::Impl* h = nullptr;
  KK_RETURN_IF_ERROR(handle_for(handle, a.device, &h));

  const cudaDataType_t type = cuda_type(a.dtype);
  const cublasComputeType_t compute = a.options.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasLtEpilogue_t epilogue = a.options.epilogue == LinearEpilogue::bias        ? CUBLASLT_EPILOGUE_BIAS
                                      : a.options.epilogue == LinearEpilogue::bias_gelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                                        : CUBLASLT_EPILOGUE_DEFAULT;
  TnMatmul t;
  KK_RETURN_IF_ERROR(make_tn(compute, CUDA_R_32F, type, type, {a.m, a.n, a.k, a.x_stride, a.w_stride, a.y_stride},
                             epilogue, a.bias, &t));

  const int align = std::min({alignment(a.x), alignment(a.w), alignment(a.y)});
  const AlgoKey key{a.m, a.n, a.k, static_cast<int>(a.dtype), a.x_stride, a.w_stride, a.y_stride,
                    std::min(align, a.bias ? alignment(a.bias) : 256),
                    static_cast<int>(epilogue) * 2 + (a.options.accumulate ? 1 : 0), a.options.allow_tf32};
  const cublasLtMatmulAlgo_t* algo = nullptr;
  KK_RETURN_IF_ERROR(
      algorithm_for(h, key, t.op.h, t.a.h, t.b.h, t.d.h, static_cast<uint32_t>(align), h->workspace_bytes, &algo));
  if (!algo)
    return unsupported("linear: cuBLASLt has no algorithm for m=" + std::to_string(a.m) + " n=" + std::to_string(a.n) +
                       " k=" + std::to_string(a.k) + " " + dt(a.dtype) + " with these strides and alignments");
  const float alpha = 1.0f, beta = a.options.accumulate ? 1.0f : 0.0f;
  return run_matmul(h, t.op.h, alpha, a.w, t.a.h, a.x, t.b.h, beta, a.y, t.d.h, *algo, stream);
}

Status fp8_gemm_cuda(const Fp8GemmArgs& a, Stream stream) {
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(a.device.index));
  GemmHandle::Impl* h = nullptr;
  KK_RETURN_IF_ERROR(handle_for(nullptr, a.device, &h));
  TnMatmul t;
  const cublasLtMatmulAlgo_t* algo = nullptr;
  KK_RETURN_IF_ERROR(fp8_matmul_for(h, a, &t, &algo));
  const float beta = a.accumulate ? 1.0f : 0.0f;  // accumulate: D = (scaled sums) + C with C = D = out
  if (algo) return run_matmul(h, t.op.h, 1.0f, a.w, t.a.h, a.x, t.b.h, beta, a.out, t.d.h, *algo, stream);
  if (a.scaling == Fp8Scaling::block) {
    // cuBLASLt's block-scaled kernels on the H100 / H200 take only some token counts (m 64, 128, 256 have an
    // algorithm, m 1 and 129 none): the others run as the next count that has one, through a copy of x and its scales
    // with zero rows appended and a D of that many rows, whose first m rows are copied out.
    for (const int64_t multiple : {4, 16, 64}) {
      Fp8GemmArgs p = a;
      p.m = (a.m + multiple - 1) / multiple * multiple;
      p.x_stride = a.k;
      p.out_stride = (a.n + 7) / 8 * 8;       // 16-byte rows
      // The scratch's x and D, 256-byte aligned as nullptr reads. The heuristic sees x's own scale pointer until the
      // run sets the padded copy's: with a null one it answered CUBLAS_STATUS_INVALID_VALUE (H100, block scales).
      p.x = nullptr, p.out = nullptr;
      if (p.m == a.m) continue;
      TnMatmul tp;
      KK_RETURN_IF_ERROR(fp8_matmul_for(h, p, &tp, &algo));
      if (algo) return fp8_gemm_padded(h, a, p, tp, *algo, stream);
    }
  }
  return unsupported("linear_fp8: cuBLASLt has no FP8 algorithm for m=" + std::to_string(a.m) +
                     " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k) + " with " +
                     (a.scaling == Fp8Scaling::block          ? "1 x 128 and 128 x 128 block"
                      : a.scaling == Fp8Scaling::outer_vector ? "per-token x per-channel"
                                                              : "per-tensor") +
                     " scales" + (a.bias ? " and a bias" : "") + (a.accumulate ? " accumulating into out" : "") +
                     " on this GPU");
}

Status int8_gemm_cuda(const Device& device, const int8_t* xq, int64_t x_stride, const int8_t* w, int64_t w_stride,
                      int32_t* y, int64_t m, int64_t n, int64_t k, void* workspace, size_t workspace_bytes,
                      Stream stream, bool* ran) {
  *ran = false;
  GemmHandle::Impl* h = nullptr;
  KK_RETURN_IF_ERROR(handle_for(nullptr, device, &h));
  // The same column-major reading as linear, int32 compute and scale (alpha 1, beta 0: the sums exactly).
  TnMatmul t;
  KK_RETURN_IF_ERROR(make_tn(CUBLAS_COMPUTE_32I, CUDA_R_32I, CUDA_R_8I, CUDA_R_32I, {m, n, k, x_stride, w_stride, n},
                             CUBLASLT_EPILOGUE_DEFAULT, nullptr, &t));
  const int align = std::min({alignment(xq), alignment(w), alignment(y)});
  // The workspace size is part of the problem: an algorithm chosen for a larger one must not be reused.
  const AlgoKey key{m, n, k, static_cast<int>(DType::i8), x_stride, w_stride, n, align,
                    -1 - static_cast<int>(std::min<size_t>(workspace_bytes >> 20, 1 << 20)), false};
  const cublasLtMatmulAlgo_t* algo = nullptr;
  KK_RETURN_IF_ERROR(
      algorithm_for(h, key, t.op.h, t.a.h, t.b.h, t.d.h, static_cast<uint32_t>(align), workspace_bytes, &algo));
  if (!algo) return Status::Ok();  // no INT8 algorithm here: the caller runs its own kernel
  const int32_t alpha = 1, beta = 0;
  const cublasStatus_t st =
      cublaslt().cublasLtMatmul(h->lt, t.op.h, &alpha, w, t.a.h, xq, t.b.h, &beta, y, t.d.h, y, t.d.h, algo, workspace,
                                workspace_bytes, reinterpret_cast<cudaStream_t>(stream));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return Status::Ok();  // refused at launch: the caller's kernel instead
  KK_LT_RETURN(st);
  *ran = true;
  return Status::Ok();
}

}  // namespace detail
}  // namespace kernelkit
