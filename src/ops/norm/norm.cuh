// The row-norm kernel family: rms_norm, fused_add_rms_norm, layer_norm, ada_layer_norm, rms_norm_gelu and the norm +
// quantization ops (rms_norm_quant_*, fused_add_rms_norm_quant_*) are one kernel template over (storage type, vector
// width, variant).
//
// Per row of `hidden` elements (E = sizeof(T)):
//   bytes  = E * hidden * (reads + writes of [rows, hidden] tensors) + parameters (op_info.cpp has the formula)
//   FLOPs  = ~4 per element for RMS, ~7 for layer norm (op_info.cpp)
// so every variant is memory-bound on every GPU: the goal is the copy ceiling, i.e. each byte moved once and enough
// bytes in flight to cover DRAM latency.
//
// Work split (planner.cpp decides, this file obeys): block = (threads_per_row, rows_per_block); the grid is at most one
// wave of resident blocks that loops over row groups, or one block a row group (the plan's waves = 0). Thread tx of a
// row owns vectors tx, tx + tpr, tx + 2 tpr, ...
//
// Data path: held rows (`held`, at most 2 vectors a thread) are loaded into registers at once, every pass computed
// from them; where such a row is whole warps, one a block (the plan's `lean`, the default there for rms_norm,
// fused_add_rms_norm and layer_norm), held_row_kernel below runs it with its weights loaded alongside and
// straight-line reductions. Otherwise, when the plan caches rows (`cached`), each row is copied global -> shared memory
// with cp.async (sm_80+) into one of two stages, and the copy of the block's *next* row group is issued before the
// current one is reduced: the bytes in flight are bounded by shared memory, not by registers, and loading overlaps the
// reduction and the stores. Each thread copies and later reads only its own vectors, so the stages need no barrier.
// Rows too long for two stages (`cached` = 0) read global memory in every pass (the second and third reads mostly hit
// L2).
//
// Numerics: fp32 accumulation, statistics from the row values (layer norm: the mean first, then the centred second
// moment; no E[x^2] - E[x]^2 cancellation), one rounding per output. The fused residual is rounded to T before it is
// normalized, because the residual stream stored for the next layer is what the next layer will see.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>

#include <type_traits>

#include "kernelkit/planner.hpp"
#include "kernels/common/activations.cuh"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"
#include "ops/norm/norm.hpp"
#include "ops/quant/quant.hpp"
#include "ops/quant/quant_common.cuh"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

using detail::NormType;

template <typename T>
struct RowNormParams {
  T* out;                 // [rows, hidden], row stride out_stride
  const T* x;             // [rows, hidden], row stride x_stride
  T* residual;            // [rows, hidden] (fused add), row stride residual_stride
  const T* weight;        // [hidden] or null
  const T* bias;          // [hidden] or null
  const T* scale;         // [batch, hidden] or null, row stride mod_stride
  const T* shift;         // [batch, hidden] or null
  int64_t rows, hidden;
  int64_t out_stride, x_stride, residual_stride, mod_stride, rows_per_batch;
  float eps, weight_offset;
  int stage_offset;       // bytes of reduction scratch before the stages (16-byte aligned)
  int8_t* q;              // norm + quantization: [rows, hidden] codes, contiguous
  float* q_scales;        // [rows] written, or [1] read (static_scale)
  bool static_scale;
  OpId op;
  detail::DeviceErrorRecord* err;  // norm + quantization: where a non-finite row or a bad static scale is recorded
};

// The 1-byte output of the norm + quantization ops (none: the norm writes T).
enum class QuantOut : uint8_t { none, int8, fp8 };

// A row's sum of squares and largest |x w| in one reduction (LaunchPlan::one_pass); the values are >= 0 or inf.
struct SumMax {
  float sum, max;
};
struct SumMaxOp {
  using Value = SumMax;
  static __device__ __forceinline__ SumMax identity() { return {0.0f, 0.0f}; }
  static __device__ __forceinline__ SumMax apply(SumMax a, SumMax b) { return {a.sum + b.sum, fmaxf(a.max, b.max)}; }
};

// Which parts of the family a kernel has. Only what a variant can use is compiled in: an RMS kernel carries no bias
// or modulation code.
template <NormType kNorm, bool kResidual, bool kGelu, bool kModulate, QuantOut kQuant = QuantOut::none,
          bool kOnePass = false>
struct RowVariant {
  static constexpr NormType norm = kNorm;
  static constexpr bool residual = kResidual;    // residual += x first (fused_add_rms_norm)
  static constexpr bool gelu = kGelu;            // tanh-GELU epilogue (rms_norm_gelu)
  static constexpr bool bias = kNorm == NormType::layer;
  static constexpr bool modulate = kModulate;    // * (1 + scale[b]) + shift[b] (ada_layer_norm)
  static constexpr QuantOut quant = kQuant;      // y rounded to T, then quantized into q (rms_norm_quant_*)
  // Quantized RMS norms: y = (x w) rstd, and a dynamic scale's max |y| from the sum of squares' pass, one reduction a
  // row (LaunchPlan::one_pass; held rows).
  static constexpr bool one_pass = kOnePass;
  static_assert(!kOnePass || (kNorm == NormType::rms && kQuant != QuantOut::none), "one_pass: quantized RMS norms");
};

// The fused add of one vector: x + residual rounded to T (the residual stream the next layer sees), stored to `dst`
// (the residual) and returned; f gets its values as floats, what the norm then normalizes.
template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> add_residual(const Vec<T, VEC>& x, const Vec<T, VEC>& r, T* dst,
                                                    float (&f)[VEC]) {
  float g[VEC];
  to_floats(x, f);
  to_floats(r, g);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] += g[j];
  const Vec<T, VEC> sum = from_floats<T>(f);
  sum.store(dst);
  to_floats(sum, f);
  return sum;
}

// The register cap (kRowNormMaxThreads threads -> at most 64 registers per thread) is what the planner assumes when it
// counts resident blocks (kRowNormRegisters). kStaged: the plan's `cached` (rows through the two shared-memory
// stages); a template parameter so that each kernel has one data path (a runtime flag leaves both paths' unpacking
// in the loop, predicated, and every predicated instruction still issues).
// kHeld > 0 (the plan's `held`, KERNELKIT_TUNE rows_held=1; at most kHeld vectors a thread): each thread loads its
// vectors of the row (and of the residual) into registers at once and computes every pass from registers; the weights
// are read after the reductions, as in the other paths (held before the row loop they cost 8 registers a vector, and
// a block of a held plan has one row group to process: nothing to reuse them for).
// kMinBlocks: __launch_bounds__'s minimum of resident blocks (the plan's min_blocks; 2 caps the kernel at 32 registers).
// Only where the kernel is real: the sm_75 build's bf16 stubs would ask for 2 x 1024 threads of an SM that has 1024.
template <typename T, int VEC, typename Variant, bool kStaged, int kHeld, int kMinBlocks = 1>
__global__ void __launch_bounds__(kRowNormMaxThreads, kDeviceHasType<T> ? kMinBlocks : 1)
    row_norm_kernel(const RowNormParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    static_assert(!(kStaged && kHeld > 0), "a row is staged or held, not both");
    using V = Vec<T, VEC>;
    constexpr int kSlots = kHeld > 0 ? kHeld : 1;  // register arrays of the held path (unused, and removed, else)
    extern __shared__ __align__(16) unsigned char smem[];
    const int tpr = blockDim.x, tx = threadIdx.x;
    RowReducer reducer(tpr, reinterpret_cast<float*>(smem));  // its scratch comes first (the plan's stage_offset)
    // Offsets inside a row are 32-bit (hidden < 2^31 is checked on the host); only row bases are 64-bit.
    const int nvec = static_cast<int>(p.hidden / VEC);  // VEC divides hidden (planner)
    const int slots = Variant::residual ? 2 * nvec : nvec;  // x (and residual) of one row, per stage
    V* stages = reinterpret_cast<V*>(smem + p.stage_offset);
    auto stage = [&](int s) { return stages + static_cast<int64_t>(s * blockDim.y + threadIdx.y) * slots; };
    const float inv_hidden = 1.0f / static_cast<float>(p.hidden);
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    // The affine weight as the norm applies it: weight_offset + w (Gemma's 1 + w), the addition only when needed.
    const bool offset = p.weight_offset != 0.0f;
    auto affine = [&](float w) { return offset ? p.weight_offset + w : w; };

    // Issues the copies of row `row` (nothing past the last row) into stage `s`, and commits them as one group.
    auto prefetch = [&](int64_t row, int s) {
      if (row < p.rows) {
        V* dst = stage(s);
        const T* x = p.x + row * p.x_stride;
        const T* r = Variant::residual ? p.residual + row * p.residual_stride : nullptr;
        for (int i = tx; i < nvec; i += tpr) {
          copy_async<sizeof(V)>(dst + i, x + i * VEC);
          if constexpr (Variant::residual) copy_async<sizeof(V)>(dst + nvec + i, r + i * VEC);
        }
      }
      cp_async_commit();
    };

    // Held path: calls body(c, i) for each vector i of the row this thread holds (its c-th), unrolled over the
    // registers. (The other paths keep plain loops: through a helper lambda, nvcc drops their unroll factor.)
    auto each_held = [&](auto body) {
#pragma unroll
      for (int c = 0; c < kSlots; ++c)
        if (tx + c * tpr < nvec) body(c, tx + c * tpr);
    };

    int s = 0;
    int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y;
    if constexpr (kStaged) prefetch(base + threadIdx.y, 0);
    // The loop bound is uniform across the block, so every thread reaches each reduction (which may sync).
    for (; base < p.rows; base += step, s ^= 1) {
      const int64_t row = base + threadIdx.y;
      const bool active = row < p.rows;
      if constexpr (kStaged) {
        prefetch(row + step, s ^ 1);  // the next row group streams in while this one is processed
        cp_async_wait<1>();           // this thread's copies of the current row have landed
      }
      V* buf = stage(s);
      const T* xr = p.x + row * p.x_stride;
      T* rr = Variant::residual ? p.residual + row * p.residual_stride : nullptr;
      V x_held[kSlots], r_held[kSlots];  // held: this thread's vectors of the row (and of the residual)
      if constexpr (kHeld > 0)
        if (active)
          each_held([&](int c, int i) {
            x_held[c] = V::load(xr + i * VEC);
            if constexpr (Variant::residual) r_held[c] = V::load(rr + i * VEC);
          });
      // This thread's c-th vector (vector i of the row) of x and of the residual, from where the path keeps them.
      auto x_vec = [&](int c, int i) {
        if constexpr (kHeld > 0)
          return x_held[c];
        else
          return kStaged ? buf[i] : V::load(xr + i * VEC);
      };
      auto r_vec = [&](int c, int i) {
        if constexpr (kHeld > 0 && Variant::residual)
          return r_held[c];
        else
          return kStaged ? buf[nvec + i] : V::load(rr + i * VEC);
      };

      // Vector i of the row as the norm sees it, as floats. Fused: pass 1 forms x + residual rounded to T and stores
      // it to the residual and, staged or held, over this thread's own x (no other thread reads it), where later
      // passes read it as the plain norm reads x; re-reading, they re-read the stored residual.
      auto value = [&](int c, int i, bool first, float(&f)[VEC]) {
        if constexpr (Variant::residual) {
          if (!first) return to_floats(kStaged || kHeld > 0 ? x_vec(c, i) : V::load(rr + i * VEC), f);
          const V sum = add_residual<T, VEC>(x_vec(c, i), r_vec(c, i), rr + i * VEC, f);
          if constexpr (kStaged) buf[i] = sum;
          if constexpr (kHeld > 0) x_held[c] = sum;
        } else {
          to_floats(x_vec(c, i), f);
        }
      };
      // This thread's sum over its vectors of g(element).
      auto thread_sum = [&](bool first, auto g) {
        float acc = 0.0f;
        auto add = [&](int c, int i) {
          float f[VEC];
          value(c, i, first, f);
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc += g(f[j]);
        };
        if (active) {
          if constexpr (kHeld > 0) {
            each_held(add);
          } else {
#pragma unroll 4
            for (int i = tx; i < nvec; i += tpr) add(0, i);
          }
        }
        return acc;
      };

      // Calls body(c, i) for each of this thread's vectors of the row.
      auto each_vec = [&](auto body) {
        if constexpr (kHeld > 0) {
          each_held(body);
        } else {
#pragma unroll 2
          for (int i = tx; i < nvec; i += tpr) body(0, i);
        }
      };
      // The affine weights of vector i of the row (ones without a weight).
      [[maybe_unused]] auto weights = [&](int i, float(&w)[VEC]) {
        if (p.weight) to_floats(V::load(p.weight + i * VEC), w);
#pragma unroll
        for (int j = 0; j < VEC; ++j) w[j] = p.weight ? affine(w[j]) : 1.0f;
      };

      float mean = 0.0f, var;
      [[maybe_unused]] float max_xw = 0.0f;  // one_pass with a dynamic scale: the row's largest |x w| (inf: not finite)
      if constexpr (Variant::norm == NormType::layer) {
        // sum * (1 / hidden) and one Newton step on the residual sum - mean hidden (exact in an FMA): the mean is then
        // exact wherever it is representable, as a constant row's is (its sum of 16-bit values is exact). Without the
        // step it is an ulp off at hidden 7, which the normalize would scale by rstd.
        const float sum = reducer.reduce<SumOp>(thread_sum(true, [](float v) { return v; }));
        mean = sum * inv_hidden;
        mean = fmaf(fmaf(-mean, static_cast<float>(p.hidden), sum), inv_hidden, mean);
        var = reducer.reduce<SumOp>(thread_sum(false, [&](float v) { return (v - mean) * (v - mean); })) * inv_hidden;
      } else if (Variant::one_pass && !p.static_scale) {
        float acc = 0.0f;
        unsigned bits = 0;
        if (active)
          each_vec([&](int c, int i) {
            float f[VEC], w[VEC];
            value(c, i, true, f);
            weights(i, w);
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
              acc += f[j] * f[j];
              bits = abs_max_bits(bits, f[j] * w[j]);
            }
          });
        const SumMax t = reducer.reduce<SumMaxOp>(SumMax{acc, nonfinite_as_inf(bits)});
        var = t.sum * inv_hidden;
        max_xw = t.max;
      } else {
        var = reducer.reduce<SumOp>(thread_sum(true, [](float v) { return v * v; })) * inv_hidden;
      }
      const float rstd = rsqrtf(var + p.eps);
      // 16-bit outputs: (v - mean) rstd as one FFMA, v rstd - mean rstd, where that is exact enough. Its extra error,
      // |mean| rstd 2^-24, is at most 2^-18 while |mean| rstd <= 64: under fp16's absolute tolerance (1e-5) even
      // where the output is a bias near 0. A row further from 0 in standard deviations takes the subtraction, as fp32
      // always does: a constant row of 20000 has mean rstd = 6e6, which the FFMA would turn into an error of 0.37.
      // The choice is per row, so uniform over the threads of a row.
      const float neg_mean_rstd = -mean * rstd;
      const bool fma_normalize = fabsf(neg_mean_rstd) <= 64.0f;

      // Output: normalize, apply the affine parameters and the epilogue, round once, store (or quantize).
      constexpr int kOutUnroll = Variant::bias && kStaged ? 1 : 2;
      const T* scale = Variant::modulate ? p.scale + (row / p.rows_per_batch) * p.mod_stride : nullptr;
      const T* shift = Variant::modulate ? p.shift + (row / p.rows_per_batch) * p.mod_stride : nullptr;
      // y = the normalized vector i (this thread's c-th), with the affine parameters and the epilogue.
      // kFma: the FFMA normalize (a type, so that each loop below has one form, not a select per element).
      auto normalized = [&](auto kFma, int c, int i, float(&y)[VEC]) {
        const int col = i * VEC;
        float w[VEC], b[VEC];
        [[maybe_unused]] float sc[VEC], sh[VEC];  // ada_layer_norm's modulation
        value(c, i, false, y);
        if (p.weight) to_floats(V::load(p.weight + col), w);
        if (Variant::bias && p.bias) to_floats(V::load(p.bias + col), b);
        if constexpr (Variant::modulate) {
          to_floats(V::load(scale + col), sc);
          to_floats(V::load(shift + col), sh);
        }
        // one_pass: (x w) rstd, which is monotone in |x w| (the one-pass quantization's max needs it).
        const bool xw_first = Variant::one_pass && p.weight;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          if (xw_first) {
            y[j] = (y[j] * affine(w[j])) * rstd;
          } else {
            y[j] = decltype(kFma)::value ? fmaf(y[j], rstd, neg_mean_rstd) : (y[j] - mean) * rstd;
            if (p.weight) y[j] *= affine(w[j]);
          }
          if (Variant::bias && p.bias) y[j] += b[j];
          if constexpr (Variant::modulate) y[j] = y[j] * (1.0f + sc[j]) + sh[j];
          if constexpr (Variant::gelu) y[j] = GeluTanh::template apply<kFastMath<T>>(y[j]);
        }
      };
      if constexpr (Variant::quant != QuantOut::none) {
        // y as rms_norm stores it (rounded to T), so q and s are quantize_per_token(rms_norm(x)) bit for bit. The
        // dynamic scale takes one more row reduction (max |y|); held or staged, that pass leaves y over this thread's
        // own vectors of the row (no other thread reads them), and the codes pass reads it back instead of forming y
        // again (from L2, it does).
        static_assert(Variant::norm == NormType::rms, "RMS norms have mean 0: the FFMA normalize is exact");
        constexpr bool kFp8 = Variant::quant == QuantOut::fp8;
        constexpr bool kKeep = kHeld > 0 || kStaged;
        auto rounded = [&](int c, int i, float(&y)[VEC]) {
          normalized(std::bool_constant<kFastMath<T>>{}, c, i, y);
          const V v = from_floats<T>(y);
          to_floats(v, y);
          return v;
        };
        float qs;
        if (p.static_scale) {
          qs = *p.q_scales;
          if (base == static_cast<int64_t>(blockIdx.x) * blockDim.y) check_static_scale(p.err, p.op, qs);
        } else if (Variant::one_pass) {
          // max |y| = round_T(max |x w| rstd): both steps are monotone in |x w|. A non-finite product (inf x 0 where
          // the sum of squares overflowed, a NaN or inf input) is inf, as the other path's max would be.
          float m[1] = {max_xw * rstd};
          to_floats(from_floats<T>(m), m);
          qs = (m[0] <= FLT_MAX ? m[0] : INFINITY) / static_cast<float>(detail::code_max(kFp8));
          if (active && tx == 0) {
            p.q_scales[row] = qs;
            if (isinf(qs)) record_device_error(p.err, p.op, detail::DeviceCheck::finite_x, row, -1, 0, 0);
          }
        } else {
          unsigned amax_bits = 0;
          if (active)
            each_vec([&](int c, int i) {
              float y[VEC];
              const V v = rounded(c, i, y);
              if constexpr (kHeld > 0)
                x_held[c] = v;
              else if constexpr (kStaged)
                buf[i] = v;
#pragma unroll
              for (int j = 0; j < VEC; ++j) amax_bits = abs_max_bits(amax_bits, y[j]);
            });
          // IEEE division: the quantizers' (and the reference's) fp32 scale.
          qs = reducer.reduce<MaxOp>(nonfinite_as_inf(amax_bits)) / static_cast<float>(detail::code_max(kFp8));
          if (active && tx == 0) {
            p.q_scales[row] = qs;
            if (isinf(qs)) record_device_error(p.err, p.op, detail::DeviceCheck::finite_x, row, -1, 0, 0);
          }
        }
        if (active) {
          int8_t* qr = p.q + row * p.hidden;
          const SpanScale scale(qs);
          const bool kept = kKeep && !p.static_scale && !Variant::one_pass;
          each_vec([&](int c, int i) {
            float y[VEC];
            if (kept)
              to_floats(x_vec(c, i), y);
            else
              rounded(c, i, y);
            store_codes<kFp8, VEC>(qr + i * VEC, y, scale);
          });
        }
      } else if (active) {
        T* outr = p.out + row * p.out_stride;
        auto output = [&](auto kFma, int c, int i) {
          float y[VEC];
          normalized(kFma, c, i, y);
          store_rounded<T, VEC>(outr + i * VEC, y);
        };
        // Plain loops here (not each_vec): through the helper lambda nvcc drops their unroll factor.
        auto output_all = [&](auto kFma) {
          if constexpr (kHeld > 0) {
            each_held([&](int c, int i) { output(kFma, c, i); });
          } else {
#pragma unroll(kOutUnroll)
            for (int i = tx; i < nvec; i += tpr) output(kFma, 0, i);
          }
        };
        // RMS norms have mean 0, where the FFMA is exact, and fp32 always subtracts: one loop each.
        if constexpr (Variant::norm == NormType::rms || !kFastMath<T>)
          output_all(std::bool_constant<kFastMath<T>>{});
        else if (fma_normalize)
          output_all(std::true_type{});
        else
          output_all(std::false_type{});
      }
    }
    if constexpr (kStaged) cp_async_wait<0>();  // no copy may outlive the block (the last prefetch group is empty)
  }
}

// The lean held kernel (LaunchPlan::lean; rms_norm, fused_add_rms_norm and layer_norm: Variant's norm, residual and
// bias): one row a block of whole warps (blockDim = (threads_per_row, 1), threads_per_row a multiple of 32), each
// thread's vectors of x, of the residual, of the weight and of the bias loaded at once before anything waits on
// them, straight-line reductions (shuffles over the warp, one barrier, every warp then reducing all warps' partials;
// each reduction its own scratch), no row loop. The general kernel above serves any block shape and row count per
// block: its reduction width is a runtime value (a branch per shuffle level) and it reads the weights after the
// reductions, so a block waits on two rounds of loads where this one waits on one. Same numerics as the general
// kernel, except that layer norm always normalizes as (v - mean) rstd.
// kMinBlocks: __launch_bounds__'s minimum of resident kRowHeldMaxThreads-thread blocks (the plan's lean), where an SM
// holds that many (sm_75 holds 2).
template <typename T, int VEC, typename Variant, int kMinBlocks>
__global__ void __launch_bounds__(kRowHeldMaxThreads,
                                  kMinBlocks* kRowHeldMaxThreads <= KK_DEVICE_MAX_THREADS_PER_SM ? kMinBlocks : 1)
    held_row_kernel(const RowNormParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    static_assert(!Variant::gelu && !Variant::modulate && Variant::quant == QuantOut::none, "the plain norms only");
    constexpr bool kLayer = Variant::norm == NormType::layer;
    using V = Vec<T, VEC>;
    constexpr int kWarps = kRowHeldMaxThreads / kWarpSize;
    __shared__ float scratch[kLayer ? 2 : 1][kWarps];
    const int tx = threadIdx.x, tpr = blockDim.x;
    const int nvec = static_cast<int>(p.hidden / VEC);
    const int64_t row = blockIdx.x;
    const float inv_hidden = 1.0f / static_cast<float>(p.hidden);  // while the loads are in flight
    const T* xr = p.x + row * p.x_stride;
    T* rr = Variant::residual ? p.residual + row * p.residual_stride : nullptr;
    V x[kRowHeldVecs], r[kRowHeldVecs], w[kRowHeldVecs], b[kRowHeldVecs];
#pragma unroll
    for (int c = 0; c < kRowHeldVecs; ++c) {
      const int i = tx + c * tpr;
      if (i < nvec) {
        x[c] = V::load(xr + i * VEC);
        if constexpr (Variant::residual) r[c] = V::load(rr + i * VEC);
        if (p.weight) w[c] = V::load(p.weight + i * VEC);
        if (Variant::bias && p.bias) b[c] = V::load(p.bias + i * VEC);
      }
    }
    // [x + residual, rounded to T and stored as the next layer's residual, in place of x]. Each pass converts the
    // vectors to fp32 again (one integer instruction an element for bf16): kept as floats, they would take twice the
    // registers across the reductions.
    float acc = 0.0f;
#pragma unroll
    for (int c = 0; c < kRowHeldVecs; ++c) {
      const int i = tx + c * tpr;
      if (i < nvec) {
        float f[VEC];
        if constexpr (Variant::residual)
          x[c] = add_residual<T, VEC>(x[c], r[c], rr + i * VEC, f);
        else
          to_floats(x[c], f);
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc = kLayer ? acc + f[j] : fmaf(f[j], f[j], acc);
      }
    }
    float mean = 0.0f;
    acc = block_reduce_fresh<SumOp>(acc, scratch[0]);
    if constexpr (kLayer) {
      // The mean as the general kernel takes it (one Newton step), then the centred second moment.
      mean = acc * inv_hidden;
      mean = fmaf(fmaf(-mean, static_cast<float>(p.hidden), acc), inv_hidden, mean);
      acc = 0.0f;
#pragma unroll
      for (int c = 0; c < kRowHeldVecs; ++c)
        if (tx + c * tpr < nvec) {
          float f[VEC];
          to_floats(x[c], f);
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc = fmaf(f[j] - mean, f[j] - mean, acc);
        }
      acc = block_reduce_fresh<SumOp>(acc, scratch[1]);
    }
    const float rstd = rsqrtf(acc * inv_hidden + p.eps);
    T* outr = p.out + row * p.out_stride;
#pragma unroll
    for (int c = 0; c < kRowHeldVecs; ++c) {
      const int i = tx + c * tpr;
      if (i < nvec) {
        float y[VEC], g[VEC], h[VEC];
        to_floats(x[c], y);
        if (p.weight) to_floats(w[c], g);
        if (Variant::bias && p.bias) to_floats(b[c], h);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          y[j] = (kLayer ? y[j] - mean : y[j]) * rstd;
          if (p.weight) y[j] *= p.weight_offset + g[j];
          if (Variant::bias && p.bias) y[j] += h[j];
        }
        store_rounded<T, VEC>(outr + i * VEC, y);
      }
    }
  }
}

// The one place an op maps to its kernel: calls f(kernel) with the instantiation for (op, vector width, staged or
// held).
template <typename T, typename F>
Status with_row_norm_kernel(OpId op, const LaunchPlan& plan, F&& f) {
  return dispatch_vec<16 / sizeof(T)>(plan.vec, [&](auto v) -> Status {
    constexpr int V = decltype(v)::value;
    auto pick = [&](auto variant) {
      using Variant = decltype(variant);
      if constexpr (Variant::quant != QuantOut::none) {
        using OnePass = RowVariant<NormType::rms, Variant::residual, false, false, Variant::quant, true>;
        if (plan.held > 0 && plan.one_pass)  // KERNELKIT_TUNE rows_onepass=1 (see plan_rows)
          return row_norm_kernel<T, V, OnePass, false, kRowHeldVecs>;
        if constexpr (std::is_same_v<T, __nv_bfloat16>)
          if (plan.held > 0 && plan.min_blocks == 2)  // KERNELKIT_TUNE rows_cap=2
            return row_norm_kernel<T, V, Variant, false, kRowHeldVecs, 2>;
      }
      return plan.held > 0 ? row_norm_kernel<T, V, Variant, false, kRowHeldVecs>
             : plan.cached ? row_norm_kernel<T, V, Variant, true, 0>
                           : row_norm_kernel<T, V, Variant, false, 0>;
    };
    // The lean kernel (plan.lean: its __launch_bounds__ minimum of blocks), full 16-byte vectors only.
    auto lean = [&](auto variant) -> Status {
      using Variant = decltype(variant);
      if constexpr (V == 16 / sizeof(T)) {
        switch (plan.lean) {
          case 1:
            return f(held_row_kernel<T, V, Variant, 1>);
          case 2:
            return f(held_row_kernel<T, V, Variant, 2>);
          case 3:
            return f(held_row_kernel<T, V, Variant, 3>);
          case 4:
            return f(held_row_kernel<T, V, Variant, 4>);
          default:
            break;
        }
      }
      return Status(StatusCode::internal, "no lean row-norm kernel for this plan");
    };
    if (plan.lean > 0) {
      if (op == OpId::rms_norm) return lean(RowVariant<NormType::rms, false, false, false>{});
      if (op == OpId::fused_add_rms_norm) return lean(RowVariant<NormType::rms, true, false, false>{});
      if (op == OpId::layer_norm) return lean(RowVariant<NormType::layer, false, false, false>{});
    }
    switch (op) {
      case OpId::rms_norm:  // the one variant with a register-capped held kernel (the planner's min_blocks)
        if constexpr (std::is_same_v<T, __nv_bfloat16>)
          if (plan.held > 0 && plan.min_blocks == 2)
            return f(row_norm_kernel<T, V, RowVariant<NormType::rms, false, false, false>, false, kRowHeldVecs, 2>);
        return f(pick(RowVariant<NormType::rms, false, false, false>{}));
      case OpId::fused_add_rms_norm:
        return f(pick(RowVariant<NormType::rms, true, false, false>{}));
      case OpId::rms_norm_gelu:
        return f(pick(RowVariant<NormType::rms, false, true, false>{}));
      case OpId::layer_norm:
        return f(pick(RowVariant<NormType::layer, false, false, false>{}));
      // Norm + quantization: f16 / bf16 activations only (the registry's dtypes).
      case OpId::rms_norm_quant_int8:
        if constexpr (sizeof(T) == 2) return f(pick(RowVariant<NormType::rms, false, false, false, QuantOut::int8>{}));
        break;
      case OpId::rms_norm_quant_fp8:
        if constexpr (sizeof(T) == 2) return f(pick(RowVariant<NormType::rms, false, false, false, QuantOut::fp8>{}));
        break;
      case OpId::fused_add_rms_norm_quant_int8:
        if constexpr (sizeof(T) == 2) return f(pick(RowVariant<NormType::rms, true, false, false, QuantOut::int8>{}));
        break;
      case OpId::fused_add_rms_norm_quant_fp8:
        if constexpr (sizeof(T) == 2) return f(pick(RowVariant<NormType::rms, true, false, false, QuantOut::fp8>{}));
        break;
      case OpId::ada_layer_norm:
        return f(pick(RowVariant<NormType::layer, false, false, true>{}));
      default:
        break;
    }
    return Status(StatusCode::internal, "no row-norm kernel for this op");
  });
}

// Host side: fill the parameter block and launch with the plan's geometry on the caller's stream.
template <typename T>
Status launch_row_norm(const detail::RowNormArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  RowNormParams<T> p{};
  p.out = static_cast<T*>(a.out);
  p.x = static_cast<const T*>(a.x);
  p.residual = static_cast<T*>(a.residual);
  p.weight = static_cast<const T*>(a.weight);
  p.bias = static_cast<const T*>(a.bias);
  p.scale = static_cast<const T*>(a.scale);
  p.shift = static_cast<const T*>(a.shift);
  p.rows = a.rows;
  p.hidden = a.hidden;
  p.out_stride = a.out_stride;
  p.x_stride = a.x_stride;
  p.residual_stride = a.residual_stride;
  p.mod_stride = a.mod_stride;
  p.rows_per_batch = a.rows_per_batch;
  p.eps = a.eps;
  p.weight_offset = a.weight_offset;
  p.stage_offset = static_cast<int>(plan.stage_offset);
  p.q = static_cast<int8_t*>(a.q);
  p.q_scales = a.q_scales;
  p.static_scale = a.static_scale;
  p.op = a.op;
  if (op_quant_out_dtype(a.op)) KK_RETURN_IF_ERROR(device_error_record(a.device.index, &p.err));
  return with_row_norm_kernel<T>(a.op, plan, [&](auto kernel) -> Status {
    if (plan.smem_optin)
      KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(plan.smem_bytes)));
    kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

// Resident blocks per SM of the planned kernel, as the runtime computes it (registers included).
template <typename T>
Status row_norm_occupancy(OpId op, const LaunchPlan& plan, int* blocks) {
  return with_row_norm_kernel<T>(op, plan, [&](auto kernel) -> Status {
    if (plan.smem_optin)
      KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(plan.smem_bytes)));
    KK_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, plan.block_threads,
                                                                 static_cast<size_t>(plan.smem_bytes)));
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda
