// Host helpers shared by the CUDA launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/common/dispatch.cuh"
#include "kernelkit/dtype.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit::cuda {

// Makes `device` current for the scope and restores the caller's device afterwards.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard();
  Status set(int device);

 private:
  int previous_ = -1;
};

// Lets this thread make the calls a stream capture forbids (cudaMalloc, creating a library handle) for the scope, as
// PyTorch's allocator does: state made once and kept, such as the default cuBLASLt handle and its workspace, is made by
// whichever call comes first, and that can be the first call inside a CUDA graph capture (torch.cuda.graph's default
// "global" mode would otherwise fail it, and invalidate the capture).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;
  ~RelaxedCaptureMode();

 private:
  int previous_;  // cudaStreamCaptureMode
};

// The PTX architecture (x10) of the kernel code this binary runs on `device`: 75 for a 75-virtual build JIT-compiled
// on an H200, 90 for an sm_90 build. -1 when it cannot be read.
int code_arch(int device);

// The device half of prepare_launch (no plan): for the tile-planned families (attention).
Status prepare_device(OpId op, DType dtype, int device,
                      std::initializer_list<std::pair<const void*, const char*>> pointers, DeviceGuard* guard,
                      DeviceProfile* profile);

// What every CUDA launcher does first: make the device current (for the guard's scope), resolve the active profile,
// refuse dtypes the loaded code lacks, check that every non-null pointer is device memory of that device, and plan.
// The planner counts a row kernel's registers at its cap; this re-sizes the grid to the compiled kernel's residency
// (kernel_occupancy), and fails when the planned block cannot be resident at all.
Status refine_to_residency(OpId op, DType dtype, int device, const DeviceProfile& profile, int64_t rows,
                           LaunchPlan* plan);

Status prepare_launch(OpId op, DType dtype, int device, const OpShape& shape,
                      std::initializer_list<std::pair<const void*, const char*>> pointers, DeviceGuard* guard,
                      DeviceProfile* profile, LaunchPlan* plan);

// bf16 needs code compiled for sm_80+; a binary whose code for this device is sm_75 has none (KK_DEVICE_HAS_BF16).
// FP8 storage read by kernels that trap below sm_89 (an e4m3 KV cache: KK_DEVICE_HAS_FP8) needs code for sm_89+.
Status check_dtype_code(DType dtype, int device, std::string_view op);

// The element types a family's kernels are compiled for.
enum class KernelTypes : uint8_t { floats, halves };  // f32 / f16 / bf16, or f16 / bf16 only

// The host entry of a family planned by plan_op: prepare_launch (the device made current until return, the profile,
// the dtype and pointer checks, the plan), then launch(T{}, plan, profile) with T the element type of `dtype`
// (float, __half or __nv_bfloat16; dispatch_float / dispatch_half), whose Status it returns.
template <KernelTypes kTypes = KernelTypes::floats, typename Launch>
Status launch_planned(OpId op, DType dtype, int device, const OpShape& shape,
                      std::initializer_list<std::pair<const void*, const char*>> pointers, Launch&& launch) {
  DeviceGuard guard;
  DeviceProfile profile;
  LaunchPlan plan;
  KK_RETURN_IF_ERROR(prepare_launch(op, dtype, device, shape, pointers, &guard, &profile, &plan));
  const auto typed = [&](auto tag) { return launch(tag, plan, profile); };
  if constexpr (kTypes == KernelTypes::halves) return dispatch_half(op_info(op).name.data(), dtype, typed);
  else return dispatch_float(dtype, typed);
}

}  // namespace kernelkit::cuda
