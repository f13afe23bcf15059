// Internal: the parameter block of softmax / causal_softmax, shared by validation, the CPU reference and the CUDA
// launcher.
#pragma once

#include <cstdint>

#include "kernelkit/op_info.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::detail {

struct SoftmaxArgs {
  OpId op = OpId::softmax;
  DType dtype{};
  Device device{};
  int64_t rows = 0, hidden = 0;  // hidden = s_k for causal_softmax
  void* out = nullptr;
  const void* x = nullptr;
  int64_t out_stride = 0, x_stride = 0;
  float scale = 1.0f;
  bool causal = false;
  int64_t s_q = 1;  // causal: row r is query r % s_q; key j is masked when j > r % s_q + hidden - s_q
  int align_bytes = 16;

  OpShape shape() const { return {rows, hidden, 1, align_bytes}; }
};

Status validate_softmax(const SoftmaxArgs& a, const DeviceProfile* profile);
Status softmax_reference(const SoftmaxArgs& a);
Status softmax_cuda(const SoftmaxArgs& a, Stream stream);
// Resident blocks per SM of the kernel that `plan` launches (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
Status softmax_occupancy(OpId op, DType dtype, const LaunchPlan& plan, int* blocks_per_sm);

}  // namespace kernelkit::detail
