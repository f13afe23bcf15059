// Tensor-core building blocks of the attention kernels: ldmatrix fragment loads and one 16x8x16 MMA with fp32
// accumulators, written once per architecture path.
//   sm_80+: mma.sync m16n8k16 for f16 and bf16.
//   sm_75:  the same 16x8x16 step as two mma.sync m16n8k8 (f16 only: Turing has no bf16 MMA; bf16 kernels are never
//           compiled for it, see kDeviceHasType).
// Fragment layouts (PTX ISA, per lane: g = lane / 4, t = lane % 4):
//   A 16x16 (row-major): a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 8+2t..), a[3] = (g+8, 8+2t..)
//   B 16x8  (k x n):     b0 = (k 2t..2t+1, n g), b1 = (k 8+2t.., n g)
//   C 16x8  (fp32):      c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/common/arch.cuh"
#include "kernels/common/vec.cuh"

namespace kernelkit::cuda {

// Four 8x8 b16 matrices from shared memory; lane l supplies the address of row l % 8 of matrix l / 8, and r[i] receives
// this lane's pair (row g, columns 2t, 2t+1) of matrix i (with kTrans: the pair (rows 2t, 2t+1, column g)).
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {  // addr: a shared-space address
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem_row) {
  ldmatrix_x4<kTrans>(r, static_cast<unsigned>(__cvta_generic_to_shared(smem_row)));
}

// The transpose of an 8x8 b16 matrix held a pair a lane (row g, columns 2t, 2t+1): this lane's pair of the transpose,
// i.e. (rows 2t, 2t+1, column g) of the input. With a C fragment's rows as the k of an MMA, that is the B fragment.
__device__ __forceinline__ unsigned movmatrix_trans(unsigned x) {
  unsigned y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// d += a * b for one 16x8x16 step, fp32 accumulation.
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if KK_DEVICE_ARCH >= 800
  if constexpr (std::is_same_v<T, __half>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  static_assert(std::is_same_v<T, __half>, "sm_75 has f16 tensor-core MMA only");
  // k 0..7 uses a[0], a[1] and b0; k 8..15 uses a[2], a[3] and b1 (the m16n8k8 layouts are the halves of m16n8k16's).
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(b0));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

// d += a b on FP8 tensor cores (sm_89+): m16n8k32, e4m3 A and B (4 codes a register), fp32 accumulators. On sm_90
// ptxas lowers it to code conversions (F2FP) and f16 HMMAs: Hopper reaches its FP8 tensor cores through wgmma only;
// sm_89 / sm_120 run it natively.
__device__ __forceinline__ void mma_16x8x32_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if KK_DEVICE_HAS_FP8
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // unreachable: FP8 ops are refused below sm_89
#endif
}

// Shared-memory tile layouts that keep ldmatrix free of bank conflicts (an ldmatrix phase reads one 16-byte chunk
// from each of 8 consecutive rows):
// element (row, col) of a [rows][D] tile of 2-byte values, 16-byte chunks swizzled by row % 8 (col % 8 stays in its
// chunk) ...
template <int D>
__host__ __device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}
// ... and, for a lane that reads row `row` at column 16 kk + 8 h of such a tile in k-step kk, the byte offset of that
// chunk is off[kk % 4] + 128 (kk / 4) with off[j] = 2 D row + ((2 j + h) ^ (row % 8)) 16: the XOR touches the low 3
// bits of the chunk index only, so the kk / 4 part (and any multiple of 8 rows added to `row`) is a constant offset.
// Computed once, the four offsets leave every ldmatrix of an unrolled loop a register + immediate address (swz per
// ldmatrix cost 3-4 integer instructions each, about as many as the MMAs issued in the prefill's loop).
template <int D>
__host__ __device__ __forceinline__ void swz_lane_offsets(int row, int h, unsigned (&off)[4]) {
  for (int j = 0; j < 4; ++j) off[j] = 2 * (row * D + (((2 * j + h) ^ (row & 7)) << 3));  // 4 trips: unrolled
}
template <int D>
__host__ __device__ __forceinline__ unsigned swz_kstep(const unsigned (&off)[4], int kk) {  // kk: unrolled, constant
  return off[kk % 4] + 128 * (kk / 4);
}
// ... and the byte offset of 16-byte chunk `chunk` (0..3) of row `row` in a [rows][64-byte] int8 tile: the chunk is
// swizzled by (row / 2) % 4, so 8 rows of 64 bytes fall in 8 different bank groups instead of 2.
__device__ __forceinline__ int swz_i8x64(int row, int chunk) { return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4); }

// A warp's MT x NT grid of 16 x 8 accumulator tiles (acc[mt][nt][4], the C layout above): f(row, col, value) for each
// element inside [rows, cols) (tile tails skipped), with row / col relative to the warp's tile origin.
template <int MT, int NT, typename A, typename F>
__device__ __forceinline__ void for_each_acc(const A (&acc)[MT][NT][4], int lane, int rows, int cols, F f) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = mt * 16 + g + half * 8;
      if (row >= rows) continue;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = nt * 8 + 2 * t + e;
          if (col < cols) f(row, col, acc[mt][nt][half * 2 + e]);
        }
    }
}

// Two floats rounded to T and packed in one 32-bit register, `lo` in the low half (the element with the lower index).
template <typename T>
__device__ __forceinline__ unsigned pack_rounded(float lo, float hi) {
  return bits16<T>(lo) | (bits16<T>(hi) << 16);
}

}  // namespace kernelkit::cuda
