// The few runtime facts the core needs from CUDA, behind a framework-free interface.
// In a build without CUDA every query answers "no device".
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

bool built_with_cuda();
int cuda_device_count();  // 0 without a GPU or without a CUDA build

// What the driver reports for a device (the profile merges these over its table entry).
struct DeviceFacts {
  std::string name;
  int sm = 0;
  int sms = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int regs_per_sm = 0;
  int64_t smem_per_sm = 0;
  int64_t smem_per_block_default = 0;
  int64_t smem_per_block_optin = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  std::string driver_version;
};
Status query_device(int index, DeviceFacts* out);

// Checks that `ptr` is device memory usable on CUDA device `device` (not a plain host pointer). `arg` names it in errors.
// Ok without a query inside a TrustedDevicePointers scope.
Status check_device_pointer(const void* ptr, int device, const char* arg);

// Within its scope, on the calling thread, the CUDA ops take every tensor's data pointer as device memory of the
// device its view names and skip check_device_pointer (one cudaPointerGetAttributes driver call per tensor per op).
// For callers that guarantee it, e.g. the PyTorch binding, whose CUDA tensors' storage is an allocation on their
// device. Scopes nest; every other check (dtype, shape, strides, overlap, device agreement between views) still runs.
class TrustedDevicePointers {
 public:
  TrustedDevicePointers();
  ~TrustedDevicePointers();
  TrustedDevicePointers(const TrustedDevicePointers&) = delete;
  TrustedDevicePointers& operator=(const TrustedDevicePointers&) = delete;

 private:
  bool previous_;
};
bool device_pointers_trusted();  // inside a TrustedDevicePointers scope on this thread

// Index values that only the device sees (a paged cache's block_table and seqlens_k, RoPE positions, write_kv_cache's
// slots, linear_weight_only's perm) are checked by the kernels that use them: a kernel never follows an out-of-range
// index (decode skips those keys, RoPE clamps the position into the cache, the act-order gather reads 0) and records
// the first violation, op, argument, index, value and bound, in a fixed per-device record, without stopping the stream
// (so CUDA-graph replay stays valid). check_errors waits for the device, returns that record as an error and clears it;
// Ok when nothing was recorded, and always without a CUDA device. Not while a stream is being captured into a CUDA
// graph (it synchronizes). The quantizers record an inf or NaN input the same way (the activation quantizers: per
// token, per tensor, per token group; the weight quantizers wait and refuse it at the call), and a per-tensor static
// scale that is not finite and > 0.
Status check_errors(int device = 0);
// Debug mode: after each CUDA op, wait for its stream and run check_errors, so the error comes back from the call
// that caused it (skipped while the stream is being captured). Off unless the environment sets KERNELKIT_CHECK=1 (or
// any value but 0); set_debug_checks changes it for the process.
void set_debug_checks(bool on);
bool debug_checks();

// Copies `bytes` of device memory on CUDA device `device` to host memory `dst` on `stream` and waits for that stream
// (a synchronization: used only where an op must see small device values on the host, e.g. varlen cu_seqlens).
Status copy_to_host(void* dst, const void* src, size_t bytes, int device, Stream stream);

// Stream-ordered scratch memory for the kernels' temporaries (split-K partial sums, act-order's gathered x, cuBLASLt's
// workspace inside a CUDA graph capture): cudaMallocAsync from the device's default memory pool unless an allocator
// is installed. allocate(bytes, stream) returns memory of the current CUDA device usable in `stream`'s order (null
// when it has none); release(p, stream) takes it back after the work queued on `stream` so far. The PyTorch op
// library installs torch's caching allocator, so an op's temporaries come from the pool its tensors and CUDA graphs
// use (and count in torch.cuda's memory statistics).
struct ScratchAllocator {
  void* (*allocate)(size_t bytes, Stream stream) = nullptr;
  void (*release)(void* p, Stream stream) = nullptr;
};
// Installs `allocator` for the process (null: cudaMallocAsync again); the struct must outlive its use. Set it
// before ops run, not while they do.
void set_scratch_allocator(const ScratchAllocator* allocator);
const ScratchAllocator* scratch_allocator();  // the installed one, or null

// Memory kernelkit owns for a caller (workspaces, tables): host memory for Device::cpu(), else CUDA device memory on
// that device. Move-only; freed on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  Status alloc(Device device, size_t bytes);
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_{};
};

// Copies `rows` rows of `width` bytes from src (rows `src_pitch` bytes apart) to dst (`dst_pitch` apart), both on
// `device` (or both host memory for Device::cpu(), or host -> device with from_host), ordered on `stream`. With one
// row the pitches are ignored.
Status copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
                 Device device, Stream stream, bool from_host = false);

// Blocks of the planned kernel resident per SM, from cudaOccupancyMaxActiveBlocksPerMultiprocessor (so registers count).
struct LaunchPlan;
enum class OpId : uint8_t;
Status kernel_occupancy(OpId op, DType dtype, const LaunchPlan& plan, int device, int* blocks_per_sm);

// L2 persistence (sm_80+, the A100 guide's access-policy window): accesses by kernels on `stream` to
// [base, base + bytes) are marked persisting (a `hit_ratio` fraction of them), so a small working set that is re-read
// (decode weights, a KV block, a norm weight) survives streaming traffic in L2. Reserves the persisting L2 carve-out
// for this process's context (cudaLimitPersistingL2CacheSize, capped at the device's maximum) — a per-process runtime
// limit, not a device setting. `bytes` is capped at the device's maximum window. Returns the bytes actually covered
// in *window_bytes when given; unsupported on devices without persistence (T4).
Status set_l2_persistence(int device, Stream stream, const void* base, size_t bytes, float hit_ratio = 1.0f,
                          size_t* window_bytes = nullptr);
// Removes the stream's window, returns persisting lines to normal and releases the carve-out.
Status clear_l2_persistence(int device, Stream stream);

}  // namespace kernelkit
