// Host helpers shared by the CUDA launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "kernelkit/dtype.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit::cuda {

// Calls f(T{}) with T = __half or __nv_bfloat16 for the f16 / bf16 kernels (validation refused every other dtype
// before a launch; `op` names the refusal if one gets here).
template <typename F>
Status dispatch_half(const char* op, DType dtype, F&& f) {
  if (dtype == DType::f16) return f(__half{});
  if (dtype == DType::bf16) return f(__nv_bfloat16{});
  return invalid_argument(std::string(op) + ": dtype " + std::string(dtype_name(dtype)) +
                          " has no kernel (expected f16, bf16)");
}

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
Status prepare_launch(OpId op, DType dtype, int device, const OpShape& shape,
                      std::initializer_list<std::pair<const void*, const char*>> pointers, DeviceGuard* guard,
                      DeviceProfile* profile, LaunchPlan* plan);

// bf16 needs code compiled for sm_80+; a binary whose code for this device is sm_75 has none (KK_DEVICE_HAS_BF16).
Status check_dtype_code(DType dtype, int device, const std::string& op);

}  // namespace kernelkit::cuda
