// The CUDA runtime behind kernelkit/runtime.hpp: device queries and pointer checks.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>

#include "kernelkit/op_info.hpp"
#include "kernelkit/runtime.hpp"
#include "kernels/common/check.cuh"
#include "ops/norm/norm.hpp"
#include "ops/softmax/softmax.hpp"
#include "runtime/device_errors.hpp"
#include "runtime/runtime_internal.hpp"

namespace kernelkit {

bool built_with_cuda() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: clear the sticky error, report none
    return 0;
  }
  return n;
}

Status query_device(int index, DeviceFacts* f) {
  const int n = cuda_device_count();
  if (n == 0) return Status(StatusCode::no_device, "no CUDA device is available");
  if (index < 0 || index >= n)
    return invalid_argument("CUDA device index " + std::to_string(index) + " is out of range (" + std::to_string(n) +
                            " devices)");
  cudaDeviceProp prop{};
  KK_CUDA_RETURN(cudaGetDeviceProperties(&prop, index));
  f->name = prop.name;
  f->sm = prop.major * 10 + prop.minor;
  f->sms = prop.multiProcessorCount;
  f->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  f->max_blocks_per_sm = prop.maxBlocksPerMultiProcessor;
  f->regs_per_sm = prop.regsPerMultiprocessor;
  f->smem_per_sm = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
  f->smem_per_block_default = static_cast<int64_t>(prop.sharedMemPerBlock);
  f->smem_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  f->l2_bytes = prop.l2CacheSize;
  f->memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess)
    f->driver_version = std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10);
  return Status::Ok();
}

Status check_device_pointer(const void* ptr, int device, const char* arg) {
  if (device_pointers_trusted()) return Status::Ok();
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return invalid_argument(std::string(arg) + " is not a pointer the CUDA runtime knows (" + cudaGetErrorString(err) +
                            "); expected device memory on cuda:" + std::to_string(device));
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      if (attr.device != device)
        return invalid_argument(std::string(arg) + " is memory of cuda:" + std::to_string(attr.device) +
                                " but the op runs on cuda:" + std::to_string(device));
      return Status::Ok();
    case cudaMemoryTypeManaged: return Status::Ok();
    case cudaMemoryTypeHost:  // pinned host memory: reachable, but almost surely a mistake for a device op
    case cudaMemoryTypeUnregistered:
    default:
      return invalid_argument(std::string(arg) + " is a host pointer; expected device memory on cuda:" +
                              std::to_string(device));
  }
}

Status copy_to_host(void* dst, const void* src, size_t bytes, int device, Stream stream) {
  if (cuda_device_count() == 0) return Status(StatusCode::no_device, "no CUDA device is available");
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  KK_RETURN_IF_ERROR(check_device_pointer(src, device, "device tensor read back"));
  KK_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  KK_CUDA_RETURN(cudaStreamSynchronize(stream));
  return Status::Ok();
}

Status kernel_occupancy(OpId op, DType dtype, const LaunchPlan& plan, int device, int* blocks_per_sm) {
  // Cached: the answer depends only on the kernel (op, dtype, vector width, the vectors a thread handles, staged or
  // held rows), the block and the shared memory (and the device).
  using Key = std::tuple<int, int, int, int, int, int, bool, int, int, int64_t>;
  static std::mutex mu;
  static std::map<Key, int> cache;
  const Key key{device,
                static_cast<int>(op),
                static_cast<int>(dtype),
                plan.vec,
                plan.vecs_per_thread,
                plan.block_threads,
                plan.cached,
                plan.held,
                plan.min_blocks,
                plan.smem_bytes};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) {
      *blocks_per_sm = it->second;
      return Status::Ok();
    }
  }
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  const Status s = [&] {
    switch (op_info(op).family) {
      case OpFamily::norm:
        return detail::row_norm_occupancy(op, dtype, plan, blocks_per_sm);
      case OpFamily::softmax:
        return detail::softmax_occupancy(op, dtype, plan, blocks_per_sm);
      default:
        return Status(StatusCode::unsupported, std::string(op_info(op).name) +
                                                   ": no occupancy query (only the norm and softmax kernels have one)");
    }
  }();
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu);
    cache[key] = *blocks_per_sm;
  }
  return s;
}

namespace {
// The index check's record: one per device (each context has its own copy of a module's globals), zero at load.
__device__ detail::DeviceErrorRecord kk_device_error_record;
}  // namespace

Status check_errors(int device) {
  const int n = cuda_device_count();
  if (n == 0) return Status::Ok();
  if (device < 0 || device >= n)
    return invalid_argument("check_errors: device " + std::to_string(device) + " is out of range (" +
                            std::to_string(n) + " CUDA devices)");
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  detail::DeviceErrorRecord* rec = nullptr;
  KK_RETURN_IF_ERROR(cuda::device_error_record(device, &rec));
  // Every stream's kernels first (the record may come from any of them); a failed kernel reports here as well.
  KK_CUDA_RETURN(cudaDeviceSynchronize());
  detail::DeviceErrorRecord got{};
  KK_CUDA_RETURN(cudaMemcpy(&got, rec, sizeof got, cudaMemcpyDeviceToHost));
  if (got.set == 0) return Status::Ok();
  const detail::DeviceErrorRecord empty{};
  KK_CUDA_RETURN(cudaMemcpy(rec, &empty, sizeof empty, cudaMemcpyHostToDevice));
  KK_CUDA_RETURN(cudaDeviceSynchronize());
  const auto check = static_cast<detail::DeviceCheck>(got.arg);
  return invalid_argument(detail::device_check_message(static_cast<OpId>(got.op), check, got.i, got.j, got.value,
                                                      got.bound) +
                          " (found on cuda:" + std::to_string(device) +
                          " by the kernel; that call's output is not valid)");
}

namespace detail {
Status debug_check(int device, Stream stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  KK_CUDA_RETURN(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return Status::Ok();  // no waiting inside a graph capture
  return check_errors(device);  // which waits for the whole device, this stream included
}
}  // namespace detail

namespace cuda {

Status device_error_record(int device, detail::DeviceErrorRecord** out) {
  static std::mutex mu;
  static std::map<int, detail::DeviceErrorRecord*> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(device); it != cache.end()) {
    *out = it->second;
    return Status::Ok();
  }
  void* addr = nullptr;
  const RelaxedCaptureMode relaxed;  // the first call may come inside a graph capture, and may load the module
  KK_CUDA_RETURN(cudaGetSymbolAddress(&addr, kk_device_error_record));  // the current device's copy
  *out = cache[device] = static_cast<detail::DeviceErrorRecord*>(addr);
  return Status::Ok();
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

RelaxedCaptureMode::RelaxedCaptureMode() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);  // cannot fail for a valid mode
  previous_ = static_cast<int>(mode);
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  cudaStreamCaptureMode mode = static_cast<cudaStreamCaptureMode>(previous_);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
}

Status DeviceGuard::set(int device) {
  int current = 0;
  KK_CUDA_RETURN(cudaGetDevice(&current));
  if (current != device) {
    KK_CUDA_RETURN(cudaSetDevice(device));
    previous_ = current;
  }
  return Status::Ok();
}

namespace {
__global__ void arch_probe_kernel() {}
}  // namespace

int code_arch(int device) {
  static std::mutex mu;
  static std::map<int, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(device); it != cache.end()) return it->second;
  cudaFuncAttributes attr{};
  int arch = -1;
  if (cudaFuncGetAttributes(&attr, arch_probe_kernel) == cudaSuccess) arch = attr.ptxVersion;
  else (void)cudaGetLastError();
  cache[device] = arch;
  return arch;
}

Status check_dtype_code(DType dtype, int device, std::string_view op) {
  const int arch = code_arch(device);
  if (dtype == DType::bf16 && arch > 0 && arch < 80)
    return unsupported(std::string(op) + ": bf16 is not supported: the kernels running on cuda:" +
                       std::to_string(device) + " were built for sm_" + std::to_string(arch) +
                       " (no bf16 code); use f16");
  if (is_fp8(dtype) && arch > 0 && arch < 89)
    return unsupported(std::string(op) + ": " + std::string(dtype_name(dtype)) +
                       " is not supported: the kernels running on cuda:" + std::to_string(device) +
                       " were built for sm_" + std::to_string(arch) + " (no FP8 code)");
  return Status::Ok();
}

Status prepare_device(OpId op, DType dtype, int device,
                      std::initializer_list<std::pair<const void*, const char*>> pointers, DeviceGuard* guard,
                      DeviceProfile* profile) {
  const std::string_view name = op_info(op).name;
  KK_RETURN_IF_ERROR(guard->set(device));
  KK_RETURN_IF_ERROR(active_profile(device, profile));
  KK_RETURN_IF_ERROR(check_dtype_code(dtype, device, name));
  if (device_pointers_trusted()) return Status::Ok();  // no per-call message strings either
  for (const auto& [ptr, arg] : pointers)
    if (ptr) KK_RETURN_IF_ERROR(check_device_pointer(ptr, device, (std::string(name) + ": " + arg).c_str()));
  return Status::Ok();
}

Status refine_to_residency(OpId op, DType dtype, int device, const DeviceProfile& profile, int64_t rows,
                           LaunchPlan* plan) {
  int resident = 0;
  KK_RETURN_IF_ERROR(kernel_occupancy(op, dtype, *plan, device, &resident));
  if (resident == 0)
    return Status(StatusCode::internal,
                  std::string(op_info(op).name) + ": the planned block (" + plan->to_string() + ") cannot be resident");
  refine_plan_occupancy(profile, resident, rows, plan);
  return Status::Ok();
}

Status prepare_launch(OpId op, DType dtype, int device, const OpShape& shape,
                      std::initializer_list<std::pair<const void*, const char*>> pointers, DeviceGuard* guard,
                      DeviceProfile* profile, LaunchPlan* plan) {
  KK_RETURN_IF_ERROR(prepare_device(op, dtype, device, pointers, guard, profile));
  return plan_op(*profile, op, shape, dtype, plan);
}

}  // namespace cuda
}  // namespace kernelkit
