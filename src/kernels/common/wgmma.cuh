// Hopper warpgroup MMA (wgmma.mma_async, sm_90a only): the shared-memory matrix descriptor and one m64n64k16 step with
// bf16 / f16 inputs and fp32 accumulators, as building blocks for the sm_90a attention path (docs/attention-sm90.md).
//   A warpgroup is 4 consecutive warps (128 threads). D (64 x 64 fp32) is spread like mma.sync's C fragments: warp w
//   of the group holds rows 16 w .. 16 w + 15, and its lane (g = lane / 4, t = lane % 4) holds, for each 8-column
//   block j, d[j][0..1] = (row g, columns 8 j + 2 t, + 1) and d[j][2..3] = (row g + 8, the same columns).
//   Operands come from shared memory through 64-bit descriptors (PTX ISA, "matrix descriptor"): bits 0-13 the start
//   address >> 4, 16-29 the leading-dimension byte offset >> 4, 32-45 the stride-dimension byte offset >> 4, 49-51 the
//   base offset (0: every swizzle atom 1024-byte aligned), 62-63 the swizzle (1 = 128-byte).
//   Layout used here: tiles whose rows are 64 two-byte elements (128 bytes) in the 128-byte swizzle, which is swz<64>
//   of mma.cuh (16-byte chunk c of row r stored at chunk c ^ (r % 8)): 8-row atoms of 1024 bytes, atoms stacked along
//   the rows. K-major operand (A, or B stored [n][k]): rows are M / N, the 16-element k step advances the start
//   address 32 bytes inside the atom, the stride offset is the atom (1024 bytes), the leading offset unused.
//   MN-major B (stored [k][n], transposed by the instruction's trans-b bit): rows are k, a 16-row k step advances
//   2048 bytes; with n = 64 (one atom wide) only the 8-row stride (1024 bytes) is used.
// The caller orders smem writes before the MMA by cuda::ptx::fence_proxy_async(space_shared) (libcu++) in every
// writing thread (its generic-proxy stores made visible to the async proxy) and then __syncthreads(), calls
// wgmma_fence() before the first MMA that touches the accumulators, and waits with wgmma_commit() + wgmma_wait<0>()
// before reading them.
// For an MN-major B wider than one atom (n = 128: two 64-column blocks), the leading offset is the stride between
// the blocks and the stride offset the 8-row k stride (canonical layout ((8 el, 8, m), (8, k)) : ((1, 8 el, LBO),
// (64 el, SBO))); the probe's n = 64 uses only the latter.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "kernels/common/arch.cuh"

namespace kernelkit::cuda {

// Descriptor of a 128-byte-swizzled tile at shared address `smem_addr` (1024-byte aligned atoms): offsets in bytes.
__host__ __device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t leading_bytes,
                                                              uint32_t stride_bytes) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | uint64_t{1} << 62;
}

// The descriptor of the operand `bytes` past the one `desc` describes (the same offsets and swizzle): the start
// address is the low field, in 16-byte units, and shared addresses stay under 256 KB, so the sum never carries out of
// it. One add on the low word where wgmma_desc_sw128 takes five uniform instructions: the MMA loops build one
// descriptor a tile and step from it with compile-time offsets (tests/primitives/test_wgmma_desc.cu checks the two
// agree over shared memory).
__host__ __device__ __forceinline__ uint64_t wgmma_desc_add(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

__device__ __forceinline__ void wgmma_fence() {
#if KK_DEVICE_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if KK_DEVICE_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if KK_DEVICE_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Pins registers an asynchronous MMA reads or writes at this point of the program: the compiler sees the asm
// statements of wgmma.mma_async as producing their accumulators at issue, so without a pin it may move ordinary
// arithmetic on them across wgmma.fence / wait_group (CUTLASS's warpgroup_fence_operand). Call it on the
// accumulators before the fence that precedes an MMA and after the wait that completes it, and on register operands
// (A from registers) before the fence.
template <int N>
__device__ __forceinline__ void wgmma_pin(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_pin(unsigned (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
}

// Ends ptxas's scheduling block here, so that a wgmma.wait_group after this point stays after the code before it:
// ptxas hoists a WARPGROUP.DEPBAR to the top of its basic block (in the warp-specialized prefill it placed the P V
// wait above the whole softmax meant to overlap that P V; wgmma_pin orders the PTX only). A branch that is never
// taken splits the block: `never` must be false at run time but not provably so to the compiler (e.g. a sum of
// exponentials below zero); the cost is a compare and a branch.
__device__ __forceinline__ void wgmma_schedule_fence(bool never) {
  if (never) __nanosleep(1);
}

// Warp specialization: a warpgroup gives registers back (setmaxnreg.dec, the producer) or takes them (.inc, the
// consumers); every thread of the warpgroup executes the same one. ptxas then compiles the code after an .inc for the
// granted count, not the launch bounds' (unless that code holds a __trap()).
template <int kRegs>
__device__ __forceinline__ void warpgroup_reg_dealloc() {
#if KK_DEVICE_HAS_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void warpgroup_reg_alloc() {
#if KK_DEVICE_HAS_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// Named block barriers (ids 1 .. 15; 0 is __syncthreads'): `threads` (a multiple of 32) take part, those calling
// sync wait for the count to complete, those calling arrive only count. Used to order two warpgroups' MMA issue.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Accumulator operand lists: d[j][e] is the C-fragment layout above (8-column block j); 32 registers for n = 64,
// 40 for n = 80, 48 for n = 96, 64 for n = 128, 96 for n = 192, 128 for n = 256, numbered from %0.
#define KK_WGMMA_D4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define KK_WGMMA_D64                                                                                                 \
  KK_WGMMA_D4(0), KK_WGMMA_D4(1), KK_WGMMA_D4(2), KK_WGMMA_D4(3), KK_WGMMA_D4(4), KK_WGMMA_D4(5), KK_WGMMA_D4(6),   \
      KK_WGMMA_D4(7)
#define KK_WGMMA_D80 KK_WGMMA_D64, KK_WGMMA_D4(8), KK_WGMMA_D4(9)
#define KK_WGMMA_D96 KK_WGMMA_D80, KK_WGMMA_D4(10), KK_WGMMA_D4(11)
#define KK_WGMMA_D128                                                                                                \
  KK_WGMMA_D64, KK_WGMMA_D4(8), KK_WGMMA_D4(9), KK_WGMMA_D4(10), KK_WGMMA_D4(11), KK_WGMMA_D4(12), KK_WGMMA_D4(13), \
      KK_WGMMA_D4(14), KK_WGMMA_D4(15)
#define KK_WGMMA_D192                                                                                                  \
  KK_WGMMA_D128, KK_WGMMA_D4(16), KK_WGMMA_D4(17), KK_WGMMA_D4(18), KK_WGMMA_D4(19), KK_WGMMA_D4(20), KK_WGMMA_D4(21), \
      KK_WGMMA_D4(22), KK_WGMMA_D4(23)
#define KK_WGMMA_D256                                                                                                  \
  KK_WGMMA_D192, KK_WGMMA_D4(24), KK_WGMMA_D4(25), KK_WGMMA_D4(26), KK_WGMMA_D4(27), KK_WGMMA_D4(28), KK_WGMMA_D4(29), \
      KK_WGMMA_D4(30), KK_WGMMA_D4(31)
#define KK_WGMMA_D64_LIST                                                                                            \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                            \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KK_WGMMA_D64_REGS "{" KK_WGMMA_D64_LIST "}"
#define KK_WGMMA_D80_LIST KK_WGMMA_D64_LIST ", %32, %33, %34, %35, %36, %37, %38, %39"
#define KK_WGMMA_D80_REGS "{" KK_WGMMA_D80_LIST "}"
#define KK_WGMMA_D96_REGS "{" KK_WGMMA_D80_LIST ", %40, %41, %42, %43, %44, %45, %46, %47}"
#define KK_WGMMA_D128_REGS                                                                                           \
  "{" KK_WGMMA_D64_LIST ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define KK_WGMMA_D192_LIST                                                             \
  KK_WGMMA_D64_LIST                                                                    \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "   \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "   \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define KK_WGMMA_D192_REGS "{" KK_WGMMA_D192_LIST "}"
#define KK_WGMMA_D256_REGS                                                                       \
  "{" KK_WGMMA_D192_LIST                                                                         \
  ", "                                                                                           \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// One wgmma form's asm with T's PTX type name, a literal inside the instruction string ("f16" or "bf16").
#define KK_WGMMA_FOR_TYPE(T, FORM)          \
  if constexpr (std::is_same_v<T, __half>) \
    FORM("f16");                           \
  else                                     \
    FORM("bf16")

// d (+)= A B for one 64 x 64 x 16 step: A from desc_a (K-major), B from desc_b (K-major, or MN-major with kTransB);
// accumulate = false overwrites d. T: __nv_bfloat16 or __half.
template <typename T, bool kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_SS(TYPE)                                                                                             \
  asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %34, 0;\n"                                                      \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " " KK_WGMMA_D64_REGS                     \
               ", %32, %33, acc, 1, 1, 0, %35;\n}\n"                                                                  \
               : KK_WGMMA_D64                                                                                         \
               : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB ? 1 : 0))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_SS);
#undef KK_WGMMA_SS
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  __trap();  // never launched: the host dispatches here only for builds with sm_90a code on a 9.0 device
#endif
}

// The same for 64 x 128 x 16 (B's descriptor spans 128 rows of N: 16 atoms at the 1024-byte stride): one A read from
// shared memory serves twice the columns (attention's S over 128-key tiles).
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_SS128(TYPE)                                                                                          \
  asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %66, 0;\n"                                                      \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " KK_WGMMA_D128_REGS                   \
               ", %64, %65, acc, 1, 1, 0, 0;\n}\n"                                                                    \
               : KK_WGMMA_D128                                                                                        \
               : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_SS128);
#undef KK_WGMMA_SS128
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}

// The same for 64 x 80 x 16 and 64 x 96 x 16 (B's descriptor spans 80 or 96 rows of N: 10 or 12 atoms): attention's S
// over the 80- and 96-key tiles of head_dim 256 and 192 (attn_ws_keys).
template <typename T>
__device__ __forceinline__ void wgmma_m64n80k16(float (&d)[10][4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_SS80(TYPE)                                                             \
  asm volatile(                                                                         \
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %42, 0;\n"                                  \
      "wgmma.mma_async.sync.aligned.m64n80k16.f32." TYPE "." TYPE " " KK_WGMMA_D80_REGS \
      ", %40, %41, acc, 1, 1, 0, 0;\n}\n"                                               \
      : KK_WGMMA_D80                                                                    \
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_SS80);
#undef KK_WGMMA_SS80
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}
template <typename T>
__device__ __forceinline__ void wgmma_m64n96k16(float (&d)[12][4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_SS96(TYPE)                                                             \
  asm volatile(                                                                         \
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %50, 0;\n"                                  \
      "wgmma.mma_async.sync.aligned.m64n96k16.f32." TYPE "." TYPE " " KK_WGMMA_D96_REGS \
      ", %48, %49, acc, 1, 1, 0, 0;\n}\n"                                               \
      : KK_WGMMA_D96                                                                    \
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_SS96);
#undef KK_WGMMA_SS96
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}

// d += A B for one 64 x 64 x 16 step with A from registers: each warp of the group supplies its 16 rows as the
// mma.sync m16n8k16 A fragment (a[0]: row g, k 2t..2t+1; a[1]: row g + 8; a[2], a[3]: k + 8), which is what
// p_fragment makes of two 8-column blocks of C fragments (attention's P). B from desc_b as above.
template <typename T, bool kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[8][4], const unsigned (&a)[4], uint64_t desc_b) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_RS(TYPE)                                                                                             \
  asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %38, 0;\n"                                                      \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " " KK_WGMMA_D64_REGS                     \
               ", {%32, %33, %34, %35}, %36, acc, 1, 1, %37;\n}\n"                                                    \
               : KK_WGMMA_D64                                                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(kTransB ? 1 : 0), "r"(1))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_RS);
#undef KK_WGMMA_RS
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}
// The same for 64 x 128 x 16 (O's 128 columns in one MMA a k-step): B's descriptor spans two 64-column blocks, the
// leading offset being the stride between them (see above).
template <typename T, bool kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[16][4], const unsigned (&a)[4], uint64_t desc_b) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_RS128(TYPE)                                                              \
  asm volatile(                                                                           \
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %70, 0;\n"                                    \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " KK_WGMMA_D128_REGS \
      ", {%64, %65, %66, %67}, %68, acc, 1, 1, %69;\n}\n"                                 \
      : KK_WGMMA_D128                                                                     \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(kTransB ? 1 : 0), "r"(1))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_RS128);
#undef KK_WGMMA_RS128
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}
// The same for 64 x 192 x 16 (head_dim 192: O's 192 columns in one MMA a k-step, B's descriptor spanning three
// 64-column blocks at the leading offset).
template <typename T, bool kTransB>
__device__ __forceinline__ void wgmma_m64n192k16_rs(float (&d)[24][4], const unsigned (&a)[4], uint64_t desc_b) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_RS192(TYPE)                                                              \
  asm volatile(                                                                           \
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %102, 0;\n"                                   \
      "wgmma.mma_async.sync.aligned.m64n192k16.f32." TYPE "." TYPE " " KK_WGMMA_D192_REGS \
      ", {%96, %97, %98, %99}, %100, acc, 1, 1, %101;\n}\n"                               \
      : KK_WGMMA_D192                                                                     \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(kTransB ? 1 : 0), "r"(1))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_RS192);
#undef KK_WGMMA_RS192
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}
// The same for 64 x 256 x 16 (head_dim 256: O's 256 columns in one MMA a k-step, B's descriptor spanning four
// 64-column blocks at the leading offset).
template <typename T, bool kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[32][4], const unsigned (&a)[4], uint64_t desc_b) {
#if KK_DEVICE_HAS_WGMMA
#define KK_WGMMA_RS256(TYPE)                                                              \
  asm volatile(                                                                           \
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %134, 0;\n"                                   \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " " KK_WGMMA_D256_REGS \
      ", {%128, %129, %130, %131}, %132, acc, 1, 1, %133;\n}\n"                           \
      : KK_WGMMA_D256                                                                     \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(kTransB ? 1 : 0), "r"(1))
  KK_WGMMA_FOR_TYPE(T, KK_WGMMA_RS256);
#undef KK_WGMMA_RS256
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}
#undef KK_WGMMA_FOR_TYPE
#undef KK_WGMMA_D4
#undef KK_WGMMA_D64
#undef KK_WGMMA_D80
#undef KK_WGMMA_D96
#undef KK_WGMMA_D128
#undef KK_WGMMA_D192
#undef KK_WGMMA_D256
#undef KK_WGMMA_D64_LIST
#undef KK_WGMMA_D192_LIST
#undef KK_WGMMA_D64_REGS
#undef KK_WGMMA_D80_LIST
#undef KK_WGMMA_D80_REGS
#undef KK_WGMMA_D96_REGS
#undef KK_WGMMA_D128_REGS
#undef KK_WGMMA_D192_REGS
#undef KK_WGMMA_D256_REGS

}  // namespace kernelkit::cuda
