// kernelkit built without CUDA: no device, and every CUDA op reports that plainly.
#include "core/elementwise.hpp"
#include "core/quant.hpp"
#include "core/rope.hpp"
#include "core/row_norm.hpp"
#include "core/softmax.hpp"
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

namespace detail {
Status row_norm_cuda(const RowNormArgs&, Stream) { return no_cuda(); }
Status elementwise_cuda(const ElementwiseArgs&, Stream) { return no_cuda(); }
Status rope_cuda(const RopeArgs&, Stream) { return no_cuda(); }
Status softmax_cuda(const SoftmaxArgs&, Stream) { return no_cuda(); }
Status quantize_cuda(const QuantizeArgs&, Stream) { return no_cuda(); }
Status weight_only_cuda(const WeightOnlyArgs&, Stream) { return no_cuda(); }
}  // namespace detail

}  // namespace kernelkit
