// Host side of the sm_90a code (sm90a.hpp): availability, the primitives' probes, and their refusal in builds without
// them.
#include "runtime/sm90a.hpp"

#include <string>
#include <utility>

namespace kernelkit::cuda {

#if KERNELKIT_HAS_SM90A
Status wgmma_probe_launch(const void* a, const void* b, float* c, bool f16, bool b_mn_major, cudaStream_t stream);
Status tma_probe_launch(const TmaOperand& map, int row0, int col0, void* out, cudaStream_t stream);
#endif

Status need_sm90a(const char* what) {
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess && sm90a_available(device)) return Status::Ok();
  (void)cudaGetLastError();
  return unsupported(std::string(what) + ": needs a build with sm_90a code (arch list with 90 or native) on a "
                     "compute capability 9.0 device");
}

bool sm90a_available(int device) {
#if KERNELKIT_HAS_SM90A
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
#else
  (void)device;
  return false;
#endif
}

Status wgmma_probe(const void* a, const void* b, float* c, bool f16, bool b_mn_major, cudaStream_t stream) {
  KK_RETURN_IF_ERROR(need_sm90a("wgmma_probe"));
#if KERNELKIT_HAS_SM90A
  return wgmma_probe_launch(a, b, c, f16, b_mn_major, stream);
#else
  (void)a, (void)b, (void)c, (void)f16, (void)b_mn_major, (void)stream;
  return unsupported("wgmma_probe: not built");
#endif
}

Status tma_layout(int64_t cols, const TmaDim (&outer)[3], TmaLayout* out) {
  *out = TmaLayout{};
  if (cols < 1) return invalid_argument("tma descriptor: cols must be >= 1, got " + std::to_string(cols));
  int kept[3], n = 0;  // the outer dimensions TMA sees: the token's always, head and batch unless they move nothing
  for (int role = 0; role < 3; ++role) {
    const TmaDim& d = outer[role];
    if (d.extent < 1 || d.box < 1 || d.box > 256)
      return invalid_argument("tma descriptor: dimension " + std::to_string(role + 1) + " needs extent >= 1 and a box "
                              "of 1 to 256, got extent " + std::to_string(d.extent) + ", box " + std::to_string(d.box));
    if (role == 0 || (d.extent > 1 && d.stride != 0)) kept[n++] = role;
  }
  auto stride_of = [&](int role) {  // an extent-1 token dimension's stride is never used: any valid one
    return role == 0 && outer[0].extent == 1 ? (cols + 7) / 8 * 8 : outer[role].stride;
  };
  for (int i = 1; i < n; ++i)  // insertion sort of at most 3, stable: TMA takes them innermost first
    for (int j = i; j > 0 && stride_of(kept[j]) < stride_of(kept[j - 1]); --j) std::swap(kept[j], kept[j - 1]);
  out->rank = n + 1;
  out->dims[0] = static_cast<uint64_t>(cols);
  out->box[0] = 64;
  for (int i = 0; i < n; ++i) {
    const int role = kept[i];
    const int64_t stride = stride_of(role);
    if (stride < 1 || stride % 8 != 0)
      return invalid_argument("tma descriptor: dimension " + std::to_string(role + 1) + "'s stride must be a "
                              "positive multiple of 8 elements (16 bytes), got " + std::to_string(stride));
    out->dims[i + 1] = static_cast<uint64_t>(outer[role].extent);
    out->strides[i] = static_cast<uint64_t>(stride) * 2;  // bytes
    out->box[i + 1] = static_cast<uint32_t>(outer[role].box);
    out->pos[role] = static_cast<int8_t>(i + 1);
  }
  return Status::Ok();
}

namespace {
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encode_tiled() {  // the driver's cuTensorMapEncodeTiled, or null; looked up once
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t got =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t got = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &found);
#endif
    if (got != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}
}  // namespace

Status make_tma_operand(TmaOperand* op, const void* base, bool f16, int64_t cols, const TmaDim (&outer)[3]) {
  *op = TmaOperand{};
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return invalid_argument("tma descriptor: the tensor's address must be 16-byte aligned");
  TmaLayout l;
  KK_RETURN_IF_ERROR(tma_layout(cols, outer, &l));
  const EncodeTiled encode = encode_tiled();
  if (!encode) return unsupported("tma descriptor: the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or later)");
  static_assert(sizeof(cuuint64_t) == sizeof(uint64_t) && sizeof(cuuint32_t) == sizeof(uint32_t));
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode(&op->map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                            static_cast<cuuint32_t>(l.rank), const_cast<void*>(base),
                            reinterpret_cast<const cuuint64_t*>(l.dims), reinterpret_cast<const cuuint64_t*>(l.strides),
                            reinterpret_cast<const cuuint32_t*>(l.box), element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return invalid_argument("tma descriptor: cuTensorMapEncodeTiled refused it (CUresult " + std::to_string(r) + ")");
  op->rank = l.rank;
  for (int i = 0; i < 3; ++i) op->pos[i] = l.pos[i];
  return Status::Ok();
}

Status tma_probe(const void* src, int64_t rows, int64_t cols, int row0, int col0, void* out, cudaStream_t stream) {
  KK_RETURN_IF_ERROR(need_sm90a("tma_probe"));
  TmaOperand map;  // [rows][cols]: rows are the token role, boxes of 64 rows
  KK_RETURN_IF_ERROR(make_tma_operand(&map, src, false, cols, {TmaDim{rows, cols, 64}, TmaDim{}, TmaDim{}}));
#if KERNELKIT_HAS_SM90A
  return tma_probe_launch(map, row0, col0, out, stream);
#else
  (void)row0, (void)col0, (void)out, (void)stream;
  return unsupported("tma_probe: not built");
#endif
}

}  // namespace kernelkit::cuda
