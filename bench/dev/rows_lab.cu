// Row-kernel lab (an experiment apart from the library, as llm.c keeps dev/cuda/ beside llmc/): register-resident
// variants of rms_norm, fused_add_rms_norm, layer_norm, softmax and silu_and_mul, each a template over its work split,
// timed by rows_lab.py beside Liger-Kernel and torch.compile on the same inputs in one process. What wins here moves
// into src/ops/<family>/ behind the planner.
//
// Row kernels: block = (TPR threads a row, RPC rows a block); thread tx holds vectors tx, tx + TPR, ... (NV of them)
// of its row in registers, loaded at once (one round trip to memory a row); reductions by shuffles, plus one
// shared-memory exchange when a row spans warps. Grid: one block per RPC rows (no persistence: the block scheduler
// refills an SM as blocks finish), or, kPersist, a grid of `blocks` that loops and loads its next rows into a second
// register set before reducing the current ones.
//
// Build: nvcc -O3 -std=c++20 -arch=sm_90a -shared -Xcompiler -fPIC -I src -I include bench/dev/rows_lab.cu -o rows_lab.so
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>

#include "kernels/common/fast_math.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"

namespace lab {
using namespace kernelkit::cuda;

// kHint: 0 plain loads and stores; 1 loads that do not allocate in L1 and evict-first stores (streaming data).
template <int kHint, typename V, typename T>
__device__ __forceinline__ V load(const T* p) {
  if constexpr (kHint == 0) {
    return V::load(p);
  } else {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    V v;
    __builtin_memcpy(&v, &r, 16);
    return v;
  }
}
template <int kHint, typename V, typename T>
__device__ __forceinline__ void store(T* p, const V& v) {
  if constexpr (kHint == 0) {
    v.store(p);
  } else {
    uint4 r;
    __builtin_memcpy(&r, &v, 16);
    asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w)
                 : "memory");
  }
}

// Sum (or max) over the TPR threads of a row. `red`: [RPC][TPR / 32] floats, each use its own array (no reuse, so
// one barrier a reduction).
template <int TPR, typename Op>
__device__ __forceinline__ float row_reduce(float v, float* red) {
  v = warp_reduce<Op>(v, TPR < 32 ? TPR : 32);
  if constexpr (TPR <= 32) {
    return v;
  } else {
    constexpr int W = TPR / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[threadIdx.y * W + warp] = v;
    __syncthreads();
    // Every aligned group of kWidth lanes (W rounded up to a power of two) holds the partials, the identity past
    // the last, so every lane gets the total.
    constexpr int kWidth = W <= 1 ? 1 : W <= 2 ? 2 : W <= 4 ? 4 : W <= 8 ? 8 : W <= 16 ? 16 : 32;
    const int slot = lane & (kWidth - 1);
    v = slot < W ? red[threadIdx.y * W + slot] : Op::identity();
    return warp_reduce<Op>(v, kWidth);
  }
}

template <typename T>
using V8 = Vec<T, 16 / sizeof(T)>;

struct RowArgs {
  void* out;
  const void* x;
  void* res;
  const void* w;
  const void* b;
  int64_t rows;
  int hidden;
  float eps;
};

// kOp: 0 rms_norm, 1 fused_add_rms_norm (res = x + res, out = norm(res)), 2 layer_norm, 3 softmax, 4 copy (the same
// loads and stores with no reduction: the split's own ceiling).
template <typename T, int kOp, int TPR, int NV, int RPC, int kHint, bool kPersist>
__global__ void __launch_bounds__(TPR* RPC) row_kernel(const RowArgs a) {
  using V = V8<T>;
  constexpr int E = 16 / sizeof(T);
  constexpr int W = TPR > 32 ? TPR / 32 : 1;
  __shared__ float red[4][RPC * W];
  const int tx = threadIdx.x;
  const int nvec = a.hidden / E;
  const float inv_h = 1.0f / a.hidden;
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  T* res = static_cast<T*>(a.res);
  const T* w = static_cast<const T*>(a.w);
  const T* b = static_cast<const T*>(a.b);

  V cur[NV], rv[NV];
  auto load_row = [&](int64_t row, V (&dst)[NV], V (&rdst)[NV]) {
    if (row >= a.rows) return;
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      const int i = tx + c * TPR;
      if (i < nvec) {
        dst[c] = load<kHint, V>(x + row * a.hidden + i * E);
        if constexpr (kOp == 1) rdst[c] = load<kHint, V>(res + row * a.hidden + i * E);
      }
    }
  };
  const int64_t step = static_cast<int64_t>(gridDim.x) * RPC;
  int64_t row = static_cast<int64_t>(blockIdx.x) * RPC + threadIdx.y;
  load_row(row, cur, rv);
  int parity = 0;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * RPC; base < a.rows; base += step) {
    row = base + threadIdx.y;
    const bool active = row < a.rows;
    V nxt[NV], nrv[NV];
    if constexpr (kPersist) load_row(row + step, nxt, nrv);
    float f[NV][E];
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      const int i = tx + c * TPR;
      if (active && i < nvec) {
        to_floats(cur[c], f[c]);
        if constexpr (kOp == 1) {
          float r[E];
          to_floats(rv[c], r);
#pragma unroll
          for (int j = 0; j < E; ++j) f[c][j] += r[j];
          const V s = from_floats<T>(f[c]);
          store<kHint>(res + row * a.hidden + i * E, s);
          to_floats(s, f[c]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < E; ++j) f[c][j] = kOp == 3 ? -INFINITY : 0.0f;
      }
    }
    float* r0 = red[parity * 2];
    float* r1 = red[parity * 2 + 1];
    parity ^= 1;
    float scale = 1.0f, shift = 0.0f;
    if constexpr (kOp <= 1) {
      float ss = 0.0f;
#pragma unroll
      for (int c = 0; c < NV; ++c)
#pragma unroll
        for (int j = 0; j < E; ++j) ss = fmaf(f[c][j], f[c][j], ss);
      scale = rsqrtf(row_reduce<TPR, SumOp>(ss, r0) * inv_h + a.eps);
    } else if constexpr (kOp == 2) {
      float s = 0.0f;
#pragma unroll
      for (int c = 0; c < NV; ++c)
#pragma unroll
        for (int j = 0; j < E; ++j) s += f[c][j];
      const float mean = row_reduce<TPR, SumOp>(s, r0) * inv_h;
      float m2 = 0.0f;
#pragma unroll
      for (int c = 0; c < NV; ++c)
        if (tx + c * TPR < nvec)
#pragma unroll
          for (int j = 0; j < E; ++j) m2 = fmaf(f[c][j] - mean, f[c][j] - mean, m2);
      scale = rsqrtf(row_reduce<TPR, SumOp>(m2, r1) * inv_h + a.eps);
      shift = -mean * scale;
    } else if constexpr (kOp == 3) {
      float m = -INFINITY;
#pragma unroll
      for (int c = 0; c < NV; ++c)
#pragma unroll
        for (int j = 0; j < E; ++j) m = fmaxf(m, f[c][j]);
      m = row_reduce<TPR, MaxOp>(m, r0) * kLog2e;
      float s = 0.0f;
#pragma unroll
      for (int c = 0; c < NV; ++c)
#pragma unroll
        for (int j = 0; j < E; ++j) {
          f[c][j] = exp2_ftz(fmaf(f[c][j], kLog2e, -m));
          s += f[c][j];
        }
      scale = 1.0f / row_reduce<TPR, SumOp>(s, r1);
    }
    if (active) {
#pragma unroll
      for (int c = 0; c < NV; ++c) {
        const int i = tx + c * TPR;
        if (i < nvec) {
          float y[E];
          if constexpr (kOp >= 3) {
#pragma unroll
            for (int j = 0; j < E; ++j) y[j] = f[c][j] * scale;
          } else {
            float wf[E];
            to_floats(V::load(w + i * E), wf);
            if constexpr (kOp == 2) {
              float bf[E];
              to_floats(V::load(b + i * E), bf);
#pragma unroll
              for (int j = 0; j < E; ++j) y[j] = fmaf(fmaf(f[c][j], scale, shift), wf[j], bf[j]);
            } else {
#pragma unroll
              for (int j = 0; j < E; ++j) y[j] = f[c][j] * scale * wf[j];
            }
          }
          store<kHint>(out + row * a.hidden + i * E, from_floats<T>(y));
        }
      }
    }
    if constexpr (!kPersist) break;
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      cur[c] = nxt[c];
      if constexpr (kOp == 1) rv[c] = nrv[c];
    }
  }
}

// out[r, j] = silu(x[r, j]) * x[r, d + j]; x [rows, 2d]. Thread t of block blk handles vectors
// (blk * U + u) * blockDim + t, u < U, of the [rows, d / E] output vectors.
template <typename T, int U, int kHint>
__global__ void __launch_bounds__(256) silu_mul_kernel(T* out, const T* x, int64_t rows, int d) {
  using V = V8<T>;
  constexpr int E = 16 / sizeof(T);
  const int dv = d / E;
  const int64_t total = rows * dv;
  V av[U], bv[U];
  int64_t idx[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    idx[u] = (static_cast<int64_t>(blockIdx.x) * U + u) * blockDim.x + threadIdx.x;
    if (idx[u] < total) {
      const int64_t r = idx[u] / dv;
      const int c = static_cast<int>(idx[u] - r * dv);
      av[u] = load<kHint, V>(x + r * 2 * d + c * E);
      bv[u] = load<kHint, V>(x + r * 2 * d + d + c * E);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (idx[u] < total) {
      float fa[E], fb[E];
      to_floats(av[u], fa);
      to_floats(bv[u], fb);
#pragma unroll
      for (int j = 0; j < E; ++j) fa[j] = fa[j] * rcp_ftz(1.0f + exp2_ftz(-fa[j] * kLog2e)) * fb[j];
      const int64_t r = idx[u] / dv;
      const int c = static_cast<int>(idx[u] - r * dv);
      store<kHint>(out + r * d + c * E, from_floats<T>(fa));
    }
  }
}

}  // namespace lab

// ---- the variant table -------------------------------------------------------------------------------------------
using lab::RowArgs;
using bf16 = __nv_bfloat16;

struct RowVariant {
  const char* name;
  int op, tpr, nv, rpc, hint, persist;
  void (*kernel)(const RowArgs);
};

#define ROW(T, OP, TPR, NV, RPC, H, P) \
  {#T " op" #OP " tpr" #TPR " nv" #NV " rpc" #RPC " h" #H " p" #P, OP, TPR, NV, RPC, H, P, \
   lab::row_kernel<T, OP, TPR, NV, RPC, H, P>}
// The splits for hidden 2048 .. 14336 (bf16: 8 elements a vector; hidden 4096 = 512 vectors).
#define SPLITS(T, OP)                                                                                                \
  ROW(T, OP, 256, 1, 1, 0, 0), ROW(T, OP, 128, 2, 1, 0, 0), ROW(T, OP, 256, 2, 1, 0, 0),                            \
      ROW(T, OP, 256, 2, 1, 1, 0), ROW(T, OP, 512, 1, 1, 0, 0), ROW(T, OP, 128, 4, 1, 0, 0),                        \
      ROW(T, OP, 128, 4, 2, 0, 0), ROW(T, OP, 64, 8, 4, 0, 0), ROW(T, OP, 32, 16, 4, 0, 0),                         \
      ROW(T, OP, 256, 2, 1, 0, 1), ROW(T, OP, 128, 4, 2, 0, 1), ROW(T, OP, 256, 3, 1, 0, 0),                        \
      ROW(T, OP, 128, 5, 1, 0, 0), ROW(T, OP, 160, 4, 1, 0, 0), ROW(T, OP, 320, 2, 1, 0, 0),                        \
      ROW(T, OP, 512, 4, 1, 0, 0), ROW(T, OP, 256, 7, 1, 0, 0), ROW(T, OP, 448, 4, 1, 0, 0),                        \
      ROW(T, OP, 1024, 2, 1, 0, 0), ROW(T, OP, 256, 4, 1, 0, 0)

static const RowVariant kRowVariants[] = {SPLITS(bf16, 0), SPLITS(bf16, 1), SPLITS(bf16, 2), SPLITS(bf16, 3),
                                          ROW(bf16, 4, 256, 2, 1, 0, 0), ROW(bf16, 4, 128, 4, 1, 0, 0),
                                          ROW(bf16, 4, 512, 1, 1, 0, 0), ROW(bf16, 4, 256, 2, 1, 1, 0),
                                          ROW(bf16, 4, 256, 3, 1, 0, 0), ROW(bf16, 4, 256, 7, 1, 0, 0),
                                          ROW(bf16, 4, 512, 2, 1, 0, 0), ROW(bf16, 4, 128, 2, 1, 0, 0)};

struct ActVariant {
  const char* name;
  int u, hint;
  void (*kernel)(bf16*, const bf16*, int64_t, int);
};
#define ACT(U, H) {"silu_mul u" #U " h" #H, U, H, lab::silu_mul_kernel<bf16, U, H>}
static const ActVariant kActVariants[] = {ACT(1, 0), ACT(2, 0), ACT(4, 0), ACT(1, 1), ACT(2, 1), ACT(4, 1)};

extern "C" {
int lab_row_count() { return sizeof(kRowVariants) / sizeof(kRowVariants[0]); }
// name, op, tpr, nv, rpc, persist (for the Python side to pick the variants that fit a hidden size)
const char* lab_row_info(int i, int* op, int* tpr, int* nv, int* rpc, int* persist) {
  const RowVariant& v = kRowVariants[i];
  *op = v.op, *tpr = v.tpr, *nv = v.nv, *rpc = v.rpc, *persist = v.persist;
  return v.name;
}
int lab_row_launch(int i, void* out, const void* x, void* res, const void* w, const void* b, int64_t rows, int hidden,
                   float eps, int persist_blocks, void* stream) {
  const RowVariant& v = kRowVariants[i];
  RowArgs a{out, x, res, w, b, rows, hidden, eps};
  const int64_t groups = (rows + v.rpc - 1) / v.rpc;
  const int64_t grid = v.persist ? (groups < persist_blocks ? groups : persist_blocks) : groups;
  v.kernel<<<static_cast<unsigned>(grid), dim3(v.tpr, v.rpc), 0, static_cast<cudaStream_t>(stream)>>>(a);
  return static_cast<int>(cudaGetLastError());
}
// Resident blocks an SM of variant i (for the persistent grid).
int lab_row_occupancy(int i) {
  const RowVariant& v = kRowVariants[i];
  int blocks = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.kernel, v.tpr * v.rpc, 0);
  return blocks;
}
int lab_row_registers(int i) {
  cudaFuncAttributes attr{};
  cudaFuncGetAttributes(&attr, kRowVariants[i].kernel);
  return attr.numRegs;
}
int lab_act_count() { return sizeof(kActVariants) / sizeof(kActVariants[0]); }
const char* lab_act_name(int i) { return kActVariants[i].name; }
int lab_act_launch(int i, void* out, const void* x, int64_t rows, int d, void* stream) {
  const ActVariant& v = kActVariants[i];
  const int64_t total = rows * (d / 8);
  const int64_t per_block = 256LL * v.u;
  const int64_t grid = (total + per_block - 1) / per_block;
  v.kernel<<<static_cast<unsigned>(grid), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<bf16*>(out), static_cast<const bf16*>(x), rows, d);
  return static_cast<int>(cudaGetLastError());
}
}
