// kernelkit built without CUDA: no device, and every CUDA op reports that plainly.
#include "ops/attention/attention.hpp"
#include "ops/activation/activation.hpp"
#include "ops/gemm/gemm.hpp"
#include "runtime/device_errors.hpp"
#include "runtime/memory.hpp"
#include "ops/quant/quant.hpp"
#include "ops/rope/rope.hpp"
#include "ops/norm/norm.hpp"
#include "ops/softmax/softmax.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit {

namespace {
Status no_cuda() {
  return Status(StatusCode::no_device, "kernelkit was built without CUDA (no CUDA compiler was found at configure time)");
}
}  // namespace

bool built_with_cuda() { return false; }
int cuda_device_count() { return 0; }
Status query_device(int, DeviceFacts*) { return no_cuda(); }
Status check_device_pointer(const void*, int, const char*) { return no_cuda(); }
Status kernel_occupancy(OpId, DType, const LaunchPlan&, int, int*) { return no_cuda(); }
Status set_l2_persistence(int, Stream, const void*, size_t, float, size_t*) { return no_cuda(); }
Status clear_l2_persistence(int, Stream) { return no_cuda(); }
Status copy_to_host(void*, const void*, size_t, int, Stream) { return no_cuda(); }
Status check_errors(int) { return Status::Ok(); }  // no device, nothing recorded

namespace cuda {
Status device_error_record(int, detail::DeviceErrorRecord**) { return no_cuda(); }
}  // namespace cuda

namespace detail {
Status debug_check(int, Stream) { return Status::Ok(); }
Status device_alloc(int, size_t, void** out) {
  *out = nullptr;
  return no_cuda();
}
void device_free(int, void*) {}
Status device_copy_rows(int, void*, size_t, const void*, size_t, size_t, size_t, Stream, bool) { return no_cuda(); }
Status row_norm_cuda(const RowNormArgs&, Stream) { return no_cuda(); }
Status elementwise_cuda(const ElementwiseArgs&, Stream) { return no_cuda(); }
Status rope_cuda(const RopeArgs&, Stream) { return no_cuda(); }
Status softmax_cuda(const SoftmaxArgs&, Stream) { return no_cuda(); }
Status linear_cuda(const LinearArgs&, GemmHandle*, Stream) { return no_cuda(); }
Status attention_cuda(const AttentionArgs&, Stream) { return no_cuda(); }
Status decode_attention_cuda(const DecodeArgs&, Stream) { return no_cuda(); }
Status write_kv_cache_cuda(const KvWriteArgs&, Stream) { return no_cuda(); }
Status quantize_cuda(const QuantizeArgs&, Stream) { return no_cuda(); }
Status weight_only_cuda(const WeightOnlyArgs&, Stream) { return no_cuda(); }
Status w8a8_cuda(const W8A8Args&, Stream) { return no_cuda(); }
Status fp8_linear_cuda(const W8A8Args&, Stream) { return no_cuda(); }
}  // namespace detail

struct GemmHandle::Impl {};
GemmHandle::GemmHandle() = default;
GemmHandle::~GemmHandle() = default;
GemmHandle::GemmHandle(GemmHandle&&) noexcept = default;
GemmHandle& GemmHandle::operator=(GemmHandle&&) noexcept = default;
Status GemmHandle::init(int, size_t) { return no_cuda(); }
int GemmHandle::device() const { return -1; }
size_t GemmHandle::cached_algorithms() const { return 0; }

}  // namespace kernelkit
