// The launch planner: pure functions from (profile, op, shape, dtype) to a launch configuration, as data.
// No CUDA calls here: every plan can be printed and unit-tested on a CPU for every profile.
#pragma once

#include <cstdint>
#include <string>

#include "kernelkit/op_info.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit {

// Registers one row-norm thread holds its slice of the row in: 64 bytes of data (four 16-byte vectors), between 4 and 8
// accesses. Kernels and planner share this so the plan's `vecs_per_thread` is exactly the kernel's register cache.
constexpr int row_cache_vecs(int vec_elems, int elem_bytes) {
  int v = 64 / (vec_elems * elem_bytes);
  return v < 4 ? 4 : (v > 8 ? 8 : v);
}
// Row-norm kernels are compiled with __launch_bounds__(kRowNormMaxThreads), which caps them at kRowNormRegisters
// registers per thread (65536 / 1024); the planner counts blocks per SM with that register budget.
constexpr int kRowNormMaxThreads = 1024;
constexpr int kRowNormRegisters = 64;

struct LaunchPlan {
  OpId op{};
  DType dtype{};
  std::string profile;   // profile key the plan was made for
  int vec = 1;           // elements per vector access (16 bytes when hidden and alignment allow: the gcd rule)
  int threads_per_row = 0;  // block.x: threads cooperating on one row
  int rows_per_block = 0;   // block.y
  int block_threads = 0;    // block.x * block.y
  int64_t grid = 0;         // blocks; a multiple of the SM count whenever the work fills more than one wave
  int vecs_per_thread = 0;  // register cache per thread, in vectors
  int chunks = 0;           // passes over a row: 1 = the row stays in registers between reduction and output
  int64_t smem_bytes = 0;   // dynamic shared memory per block
  bool smem_optin = false;  // needs cudaFuncSetAttribute (smem above the 48 KB default)
  int blocks_per_sm = 0;    // resident blocks per SM by threads / smem / block limits
  double occupancy = 0;     // expected warps resident / max warps per SM
  std::string to_string() const;
};

Status plan_op(const DeviceProfile& profile, OpId op, const OpShape& shape, DType dtype, LaunchPlan* out);

// Tiles of the compute-bound families, from the seeds' per-arch table (attention 128x64 / 128x64 / 64x32 and
// matmul 128x128 / 128x128 / 64x64 on H100 / A100 / T4), shrunk until they fit the profile's shared memory.
struct TilePlan {
  int block_m = 0, block_n = 0, block_k = 0;
  int stages = 0;  // K/V (or A/B) pipeline depth
  int warps = 0;
  int64_t smem_bytes = 0;
  bool smem_optin = false;
  std::string to_string() const;
};
enum class TileFamily : uint8_t { attention, matmul };
Status plan_tile(const DeviceProfile& profile, TileFamily family, DType dtype, int head_dim, TilePlan* out);

// Blocks of `threads` threads using `smem` bytes and `regs` registers per thread that fit on one SM of the profile.
int blocks_per_sm(const DeviceProfile& profile, int threads, int64_t smem, int regs);

}  // namespace kernelkit
