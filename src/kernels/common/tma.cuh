// Hopper's tensor memory accelerator (sm_90+): box loads from a TMA descriptor into shared memory, completed through
// an mbarrier's transaction count, on libcu++'s cuda::ptx wrappers. Used by the sm_90a kernels (the families' SM90A sources); the
// host encodes the descriptors (src/kernels/common/tma_desc.hpp: TmaOperand, make_tma_operand).
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "kernels/common/tma_desc.hpp"

namespace kernelkit::cuda {

namespace tma {
namespace ptx = ::cuda::ptx;

// How long an mbarrier wait may take before it gives up (wall time, %globaltimer ns): far past any real phase.
constexpr uint64_t kWaitLimitNs = 10'000'000'000ull;
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Waits for phase `parity` of an mbarrier, trapping after kWaitLimitNs instead of hanging: a wrong transaction count
// or a copy that never lands would otherwise hang the process (and a device call with it); a trap is a launch error
// the caller reports. (A debugger stopped at a breakpoint meanwhile can trip it.) The clock is read only once a first
// try has failed: in a steady pipeline the phase has usually completed already.
__device__ __forceinline__ void wait_or_trap(uint64_t* bar, uint32_t parity) {
  if (ptx::mbarrier_try_wait_parity(bar, parity)) return;
  const uint64_t start = globaltimer_ns();
  while (!ptx::mbarrier_try_wait_parity(bar, parity))
    if (globaltimer_ns() - start > kWaitLimitNs) __trap();
}

// wait_or_trap for code after setmaxnreg.inc, where a __trap() on the path makes ptxas keep the register cap of the
// launch bounds instead of the granted count (and spill): after kWaitLimitNs it sets `timed_out` and returns, and once
// that is set later waits return at once, so a lost phase ends the kernel (the caller poisons its output) instead of
// hanging.
__device__ __forceinline__ void wait_or_flag(uint64_t* bar, uint32_t parity, bool& timed_out) {
  if (timed_out || ptx::mbarrier_try_wait_parity(bar, parity)) return;
  const uint64_t start = globaltimer_ns();
  while (!timed_out && !ptx::mbarrier_try_wait_parity(bar, parity))
    if (globaltimer_ns() - start > kWaitLimitNs) timed_out = true;
}

// One arrival on an mbarrier (release, CTA scope): a consumer's "this buffer is free".
__device__ __forceinline__ void arrive(uint64_t* bar) {
  (void)ptx::mbarrier_arrive(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar);
}

// One thread: mbarriers initialised with `count` arrivals each (a buffer's consumers), made visible to the async proxy.
__device__ __forceinline__ void init_counted(uint64_t* bars, int n, uint32_t count) {
  for (int i = 0; i < n; ++i) ptx::mbarrier_init(&bars[i], count);
  ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
}

// One thread: mbarriers initialised with one arrival each, made visible to the async proxy (then a block barrier).
__device__ __forceinline__ void init(uint64_t* bars, int n) { init_counted(bars, n, 1); }

// One thread: the barrier's phase completes when `bytes` have landed (whole boxes: out-of-bounds parts count too).
__device__ __forceinline__ void expect(uint64_t* bar, uint32_t bytes) {
  ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar, bytes);
}

// One thread: the box at (column, token, head, batch) of `op` into `dst` (1024-byte aligned), completing on `bar`.
__device__ __forceinline__ void load(const TmaOperand& op, void* dst, uint64_t* bar, int col, int token, int head,
                                     int batch) {
  // Each coordinate picked by compare and select: an array written at the runtime positions op.pos would live in
  // local memory (a stack frame, and spills in the 24-register producer warpgroup of the warp-specialized prefill).
  int32_t c[4] = {col, 0, 0, 0};
#pragma unroll
  for (int j = 1; j < 4; ++j) c[j] = op.pos[0] == j ? token : op.pos[1] == j ? head : op.pos[2] == j ? batch : 0;
  if (op.rank == 2) {
    const int32_t c2[2] = {c[0], c[1]};
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, &op.map, c2, bar);
  } else if (op.rank == 3) {
    const int32_t c3[3] = {c[0], c[1], c[2]};
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, &op.map, c3, bar);
  } else {
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, &op.map, c, bar);
  }
}

}  // namespace tma
}  // namespace kernelkit::cuda
