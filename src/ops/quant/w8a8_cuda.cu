// W8A8 linear on INT8 tensor cores: out [m, n] = (xq [m, k] . qweight [n, k]^T, exact int32) * x_scales[m] *
// w_scales[n] (+ bias[n]), converted to fp32 once and rounded once to f16 / bf16.
//   Block: a kW8A8TileM x kW8A8TileN output tile (grid x along n, y along m); k in steps of kW8A8TileK int8 values
//   (64-byte rows), staged by cp.async in kW8A8Stages buffers so two steps load while one is multiplied. 8 warps as
//   2 (m) x 4 (n), each owning a 64 x 32 tile: 4 x 4 MMAs of 16 x 8 x 32 a 32-value k-step (sm_80+: mma.sync
//   m16n8k32.s8; sm_75: four m8n8k16.s8, the quarters of the same fragments). Fragments come from shared memory by
//   ldmatrix (int8 pairs are b16 to it: an 8 x 16-byte matrix gives lane (g, t) the 4 bytes k = 4t..4t+3 of row g,
//   exactly the s8 A and B fragment layouts).
//   Shared rows are four 16-byte chunks; chunk c of row r is stored at c ^ ((r >> 1) & 3), so the 8 rows an ldmatrix
//   phase reads (64-byte stride) fall in 8 different bank groups instead of 2.
//   Rows past m or n and the k tail are zero-filled in shared memory (zeros add nothing to the int32 sums).
// Bytes: m k + n k (i8) + 4 (m + n) scales + E (m n + n); FLOPs 2 m n k (int8 ops).
//
// Dispatch: cuBLASLt's INT8 kernels for m > 16 and n, k multiples of 8 when cuBLASLt has an algorithm, then
// w8a8_scale_kernel (the same epilogue function, so both paths give the same bits); these tiles otherwise. On the H200
// (9 shapes, m 256-4096, n and k 4096-11008) torch._int_mm, i.e. cuBLASLt, is 2.0-2.6x faster than the tiles at every
// shape, and still 1.05-1.7x with torch's three unfused scaling kernels after it. KERNELKIT_W8A8=tiles /
// cublaslt forces a path (the tests run both).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "ops/gemm/gemm.hpp"
#include "ops/quant/quant.hpp"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/vec.cuh"
#include "runtime/runtime_internal.hpp"
#include "kernelkit/planner.hpp"
#include "runtime/plan_rules.hpp"
#include "ops/quant/quant_plan.hpp"

namespace kernelkit::cuda {
namespace {

template <typename T>
struct W8A8Params {
  const int8_t* x;  // [m, k], row stride x_stride bytes (a multiple of 16)
  const int8_t* w;  // [n, k], contiguous
  const float* sx;  // [m]
  const float* sw;  // [n]
  const T* bias;    // [n] or null
  T* out;           // [m, n], row stride out_stride
  int m, n, k;
  int64_t x_stride, out_stride;
};

// One output from its exact int32 sum: (float(v) * sx) * sw (+ bias), rounded once to T. Both paths (the tiles'
// epilogue and w8a8_scale_kernel after cuBLASLt) call this, with explicit round-to-nearest operations so that the
// compiler cannot fuse a multiply and the add differently in the two kernels: the paths give the same bits.
template <typename T>
__device__ __forceinline__ T w8a8_output(int v, float sx, float sw, const T* bias, int c) {
  float y = __fmul_rn(__fmul_rn(static_cast<float>(v), sx), sw);
  if (bias) y = __fadd_rn(y, to_float(bias[c]));
  return from_float<T>(y);
}

// d += a b for one 16 x 8 x 32 int8 step (layouts: mma.cuh's, with 4 int8 values a register: a[0] = (g, k 4t..),
// a[1] = (g + 8, k 4t..), a[2] = (g, k 16 + 4t..), a[3] = (g + 8, k 16 + 4t..); b0 = (k 4t.., n g), b1 = (k 16 + 4t..,
// n g); d[0..1] = (g, 2t..2t+1), d[2..3] = (g + 8, 2t..)).
__device__ __forceinline__ void mma_s8_16x8x32(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if KK_DEVICE_ARCH >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  // Turing: m8n8k16 (A row g, k 4t..4t+3; B k 4t.., n g; D row g, n 2t..): rows g with a[0] (k 0..15) and a[2]
  // (k 16..31), rows g + 8 with a[1] and a[3].
  asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+r"(d[0]), "+r"(d[1]) : "r"(a[0]), "r"(b0));
  asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+r"(d[0]), "+r"(d[1]) : "r"(a[2]), "r"(b1));
  asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+r"(d[2]), "+r"(d[3]) : "r"(a[1]), "r"(b0));
  asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+r"(d[2]), "+r"(d[3]) : "r"(a[3]), "r"(b1));
#endif
}

template <typename T>
__global__ void __launch_bounds__(kW8A8Threads, 1) w8a8_kernel(const W8A8Params<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    constexpr int BM = kW8A8TileM, BN = kW8A8TileN, BK = kW8A8TileK, S = kW8A8Stages;
    constexpr int kChunks = BK / 16;  // 16-byte chunks a stage row
    static_assert(BK == 64, "64-byte int8 rows (swz_i8x64)");
    extern __shared__ __align__(16) unsigned char smem[];  // [S][BM][64] of xq, then [S][BN][64] of qweight
    unsigned char* const sA = smem;
    unsigned char* const sB = smem + S * BM * BK;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // this warp's 64 x 32 tile in the block's
    const int k_tiles = (p.k + BK - 1) / BK;

    // Stage s: rows bm.. of xq and bn.. of qweight, k tile kt (chunks past k and rows past m / n zero-filled).
    auto load_stage = [&](int kt, int s) {
      const int k0 = kt * BK, chunks = (p.k - k0 + 15) / 16;
      copy_tile_async<BM, kChunks, kW8A8Threads>(
          tid, p.m - bm, chunks,
          [&](int r, int c) { return p.x + static_cast<int64_t>(bm + r) * p.x_stride + k0 + c * 16; },
          [&](int r, int c) { return sA + s * BM * BK + swz_i8x64(r, c); });
      copy_tile_async<BN, kChunks, kW8A8Threads>(
          tid, p.n - bn, chunks, [&](int r, int c) { return p.w + static_cast<int64_t>(bn + r) * p.k + k0 + c * 16; },
          [&](int r, int c) { return sB + s * BN * BK + swz_i8x64(r, c); });
    };

    int acc[4][4][4] = {};  // [m-tile of 16][n-tile of 8][fragment]

    multistage_k_loop<S>(k_tiles, load_stage, [&](int, int stage) {
      const unsigned char* a_st = sA + stage * BM * BK;
      const unsigned char* b_st = sB + stage * BN * BK;
#pragma unroll
      for (int ks = 0; ks < BK / 32; ++ks) {
        unsigned a[4][4], b[2][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)  // matrices: rows 0-7 / 8-15 at k 0-15, then at k 16-31
          ldmatrix_x4<false>(a[mt], a_st + swz_i8x64(wm + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                    ks * 2 + (lane >> 4)));
#pragma unroll
        for (int np = 0; np < 2; ++np)  // matrices: n-tile 2np at k 0-15 / 16-31, then n-tile 2np + 1
          ldmatrix_x4<false>(b[np], b_st + swz_i8x64(wn + np * 16 + (lane & 7) + (lane >> 4) * 8,
                                                    ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
            mma_s8_16x8x32(acc[mt][nt], a[mt], b[nt / 2][(nt % 2) * 2], b[nt / 2][(nt % 2) * 2 + 1]);
      }
    });

    // Epilogue: one fp32 conversion of each exact sum, both scales, the bias, one rounding.
    const int r0 = bm + wm, c0 = bn + wn;
    for_each_acc(acc, lane, p.m - r0, p.n - c0, [&](int r, int c, int v) {
      p.out[static_cast<int64_t>(r0 + r) * p.out_stride + c0 + c] =
          w8a8_output(v, __ldg(p.sx + r0 + r), __ldg(p.sw + c0 + c), p.bias, c0 + c);
    });
  }
}

// out [m, n] = float(sums [m, n]) * sx[m] * sw[n] (+ bias[n]), one rounding: the tiles' epilogue, on cuBLASLt's int32
// sums. A thread an output.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads) w8a8_scale_kernel(const W8A8Params<T> p, const int32_t* sums) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    wait_for_prior_grid();  // cuBLASLt's sums (launched as its programmatic dependent)
    if (i >= static_cast<int64_t>(p.m) * p.n) return;
    const int r = static_cast<int>(i / p.n), c = static_cast<int>(i % p.n);
    p.out[static_cast<int64_t>(r) * p.out_stride + c] =
        w8a8_output(sums[i], __ldg(p.sx + r), __ldg(p.sw + c), p.bias, c);
  }
}

enum class W8A8Path { automatic, tiles, cublaslt };

W8A8Path w8a8_path() {
  const char* v = std::getenv("KERNELKIT_W8A8");
  const std::string s = v ? v : "";
  return s == "tiles" ? W8A8Path::tiles : s == "cublaslt" ? W8A8Path::cublaslt : W8A8Path::automatic;
}

// cuBLASLt's int32 sums for row blocks of at most kW8A8SumsBytes, each block scaled by w8a8_scale_kernel; the sums and
// cuBLASLt's workspace (kW8A8LtWorkspace) in one stream-ordered scratch. *ran: false when cuBLASLt has no INT8
// algorithm for a block (the caller then runs the tiles over the whole output). The shapes cuBLASLt's INT8 kernels
// are known to serve (torch._int_mm's rule): m > 16 and n, k multiples of 8.
constexpr int64_t kW8A8SumsBytes = int64_t{64} << 20, kW8A8LtWorkspace = int64_t{4} << 20;

bool w8a8_cublaslt_shape(const detail::W8A8Args& a) { return a.rows > 16 && a.n % 8 == 0 && a.k % 8 == 0; }

template <typename T>
Status launch_w8a8_cublaslt(const detail::W8A8Args& a, W8A8Params<T> p, cudaStream_t stream, bool* ran) {
  *ran = false;
  // Row blocks: a multiple of 256 rows when there are several, so every block's xq and out views stay as aligned as
  // the first one's.
  int64_t rows_per_block = std::clamp<int64_t>(kW8A8SumsBytes / (4 * a.n), 1, a.rows);
  if (rows_per_block < a.rows) rows_per_block = std::max<int64_t>(256, rows_per_block / 256 * 256);
  const int64_t sums_bytes = (rows_per_block * a.n * 4 + 255) / 256 * 256;
  return with_stream_scratch(static_cast<size_t>(sums_bytes + kW8A8LtWorkspace), stream, [&](void* scratch) -> Status {
    auto* sums = static_cast<int32_t*>(scratch);
    void* workspace = static_cast<char*>(scratch) + sums_bytes;
    for (int64_t r0 = 0; r0 < a.rows; r0 += rows_per_block) {
      const int64_t rows = std::min(rows_per_block, a.rows - r0);
      KK_RETURN_IF_ERROR(detail::int8_gemm_cuda(a.device, a.xq + r0 * a.x_stride, a.x_stride, a.qweight, a.k, sums,
                                                rows, a.n, a.k, workspace, static_cast<size_t>(kW8A8LtWorkspace),
                                                Stream(stream), ran));
      if (!*ran) return Status::Ok();
      W8A8Params<T> q = p;  // these rows
      q.x += r0 * a.x_stride;
      q.sx += r0;
      q.out += r0 * a.out_stride;
      q.m = static_cast<int>(rows);
      // A programmatic dependent of cuBLASLt's last kernel (sm_90 code), as the decode merge is: launched ahead, it
      // waits in wait_for_prior_grid instead of behind the stream's launch gap (cuBLASLt does not trigger early, so
      // that gap is all it can save; at m 256 the whole call takes 26.2 us on the H200 against _int_mm's 19.9).
      KK_RETURN_IF_ERROR(launch_dependent(w8a8_scale_kernel<T>, dim3(one_thread_each(rows * a.n)),
                                          dim3(kElementwiseThreads), 0, stream, q, sums));
    }
    return Status::Ok();
  });
}

template <typename T>
Status launch_w8a8(const detail::W8A8Args& a, const LaunchPlan& plan, cudaStream_t stream) {
  const W8A8Params<T> p{a.xq,
                        a.qweight,
                        a.x_scales,
                        a.w_scales,
                        static_cast<const T*>(a.bias),
                        static_cast<T*>(a.out),
                        static_cast<int>(a.rows),
                        static_cast<int>(a.n),
                        static_cast<int>(a.k),
                        a.x_stride,
                        a.out_stride};
  const W8A8Path path = w8a8_path();
  auto problem = [&] {  // for the errors only
    return "m=" + std::to_string(a.rows) + " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k);
  };
  if (path == W8A8Path::cublaslt && !w8a8_cublaslt_shape(a))
    return unsupported("linear_w8a8: KERNELKIT_W8A8=cublaslt needs m > 16 and n, k multiples of 8, got " + problem());
  if (path == W8A8Path::cublaslt || (path == W8A8Path::automatic && w8a8_cublaslt_shape(a))) {
    bool ran = false;
    KK_RETURN_IF_ERROR(launch_w8a8_cublaslt<T>(a, p, stream, &ran));
    if (ran) return Status::Ok();
    if (path == W8A8Path::cublaslt)
      return unsupported("linear_w8a8: KERNELKIT_W8A8=cublaslt, but cuBLASLt has no INT8 algorithm for " + problem());
  }
  w8a8_kernel<T><<<grid_of(plan), kW8A8Threads, static_cast<size_t>(plan.smem_bytes), stream>>>(p);
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status w8a8_cuda(const W8A8Args& a, Stream stream) {
  return cuda::launch_planned<cuda::KernelTypes::halves>(
      a.op, a.dtype, a.device.index, a.shape(),
      {{a.xq, "xq"}, {a.x_scales, "x_scales"}, {a.qweight, "qweight"}, {a.w_scales, "w_scales"}, {a.bias, "bias"},
       {a.out, "out"}},
      [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
        return cuda::launch_w8a8<decltype(tag)>(a, plan, stream);
      });
}

}  // namespace kernelkit::detail
