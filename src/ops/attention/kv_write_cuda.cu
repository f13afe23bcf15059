// write_kv_cache on CUDA: one thread per VEC-element vector of one head row. A token's rows are its q heads (RoPE
// only: rotated into q_out), its k heads (rotated with RoPE) and its v heads; k and v go to the token's cache slot,
// copied, or into e4m3 caches quantized by their head's scale (the quantizers' SpanScale quotient and e4m3 rounding).
// A copy: bytes = E tokens (4 h_kv d [k, v read, cache rows written] + with RoPE 2 h d [q, q_out]), no reuse; e4m3
// caches: E tokens 2 h_kv d + tokens 2 h_kv d (+ RoPE's q).
#include <cuda_runtime.h>

#include <algorithm>

#include "ops/attention/attention.hpp"
#include "ops/quant/quant_common.cuh"
#include "ops/rope/rope.cuh"
#include "runtime/runtime_internal.hpp"

namespace kernelkit::cuda {
namespace {

// Threads a block: x spans one head's vectors (head_dim / VEC <= 256), y as many rows as fit.
constexpr int kKvWriteThreads = 256;

template <typename T>
struct KvWriteParams {
  const T *k, *v;  // [tokens, kv_heads, head_dim]
  int64_t k_tok, k_head, v_tok, v_head;
  T *k_cache, *v_cache;  // slot s, head h at (s / block) * blk + (s % block) * row + h * head
  int64_t kc_blk, kc_row, kc_head, vc_blk, vc_row, vc_head;
  int64_t block, slots;
  const void* slot_mapping;  // [tokens] i32 / i64
  int slots_i64;
  int tokens, q_heads, kv_heads, head_dim;  // q_heads: 0 without RoPE
  RopeParams<T> rope;                       // with RoPE: q -> q_out, the table and positions (its k / k_out unused)
  detail::DeviceErrorRecord* err;  // where a slot outside [-1, slots) (or a bad scale) is recorded (device_check.cuh)
  // e4m3 caches (kFp8): k_cache / v_cache hold 1-byte codes (the pointers above, as bytes), quantized by the f32 scale
  // of KV head h at k_scale[h * ks_stride] / v_scale[h * vs_stride]; k_scales / v_scales of them, each checked.
  const float *k_scale, *v_scale;
  int64_t ks_stride, vs_stride;
  int k_scales, v_scales;
};

// The codes of N values (fp32 of T values) at scale s into an e4m3 cache row at `dst` (aligned to N bytes).
template <int N>
__device__ __forceinline__ void store_e4m3(uint8_t* dst, const float (&f)[N], const SpanScale& s) {
  store_codes<true, N>(reinterpret_cast<int8_t*>(dst), f, s);
}

template <typename T, int VEC, bool kRope, bool kNeox, bool kFp8>
__global__ void __launch_bounds__(kKvWriteThreads) kv_write_kernel(const KvWriteParams<T> p) {
  if constexpr (!kDeviceHasType<T> || (kFp8 && !KK_DEVICE_HAS_FP8)) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75, e4m3 caches below sm_89
  } else {
    using V = Vec<T, VEC>;
    constexpr int kElems = kRopeItemElems<VEC, kNeox>;
    const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // this thread's vector of a head
    if (x * VEC >= p.head_dim) return;
    if constexpr (kFp8) {  // the grid's first thread records a scale that is not finite and > 0 (check_errors)
      if (x == 0 && blockIdx.y == 0 && threadIdx.y == 0) {
        for (int i = 0; i < p.k_scales; ++i)
          if (const float k = p.k_scale[i * p.ks_stride]; !(k > 0.0f && isfinite(k)))
            record_device_error(p.err, OpId::write_kv_cache, detail::DeviceCheck::k_scale, i, -1, __float_as_uint(k),
                                0);
        for (int i = 0; i < p.v_scales; ++i)
          if (const float v = p.v_scale[i * p.vs_stride]; !(v > 0.0f && isfinite(v)))
            record_device_error(p.err, OpId::write_kv_cache, detail::DeviceCheck::v_scale, i, -1, __float_as_uint(v),
                                0);
      }
    }
    // A rotated row's items: [0, rot_items) rotate pairs (rope_item), the next (head_dim - rot_dim) / VEC copy the
    // unrotated tail; together at most head_dim / VEC.
    const int rot_items = kRope ? static_cast<int>((kNeox ? p.rope.rot_dim / 2 : p.rope.rot_dim) / kElems) : 0;
    const unsigned heads_total = static_cast<unsigned>(p.q_heads + 2 * p.kv_heads);
    const unsigned rows = static_cast<unsigned>(p.tokens) * heads_total;  // < 2^31 (host)
    for (unsigned r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y) {
      const int t = static_cast<int>(r / heads_total), h = static_cast<int>(r - t * heads_total);
      const T* src;
      T* dst;
      if (h < p.q_heads) {
        src = p.rope.q + t * p.rope.q_tok + h * p.rope.q_head;
        dst = p.rope.q_out + t * p.rope.qo_tok + h * p.rope.qo_head;
      } else {
        const int64_t slot =
            p.slots_i64 ? static_cast<const int64_t*>(p.slot_mapping)[t] : static_cast<const int*>(p.slot_mapping)[t];
        if (slot < 0 || slot >= p.slots) {  // -1: padding; anything else outside the cache is recorded, not written
          if (slot != -1 && x == 0 && h == p.q_heads)
            record_device_error(p.err, OpId::write_kv_cache, detail::DeviceCheck::slot_mapping, t, -1, slot, p.slots);
          continue;
        }
        const bool is_k = h < p.q_heads + p.kv_heads;
        const int hh = h - p.q_heads - (is_k ? 0 : p.kv_heads);
        const int64_t blk = slot / p.block, in = slot - blk * p.block;
        src = is_k ? p.k + t * p.k_tok + hh * p.k_head : p.v + t * p.v_tok + hh * p.v_head;
        if constexpr (kFp8) {
          uint8_t* const codes =
              is_k ? reinterpret_cast<uint8_t*>(p.k_cache) + blk * p.kc_blk + in * p.kc_row + hh * p.kc_head
                   : reinterpret_cast<uint8_t*>(p.v_cache) + blk * p.vc_blk + in * p.vc_row + hh * p.vc_head;
          const SpanScale s(is_k ? p.k_scale[hh * p.ks_stride] : p.v_scale[hh * p.vs_stride]);
          auto quantize_vec = [&](auto i) {  // elements i.. of the row, as they are
            float f[VEC];
            to_floats(V::load(src + i), f);
            store_e4m3(codes + i, f, s);
          };
          if (!kRope || !is_k) {
            quantize_vec(x * VEC);
          } else if (x < rot_items) {
            // k rotated and rounded to T (the CPU's rotated copy), then quantized: both neox halves rounded first, so
            // that only their packed T values stay live across the quotients' division fallback (8 fp32 values
            // there spilled around its calls).
            constexpr int kParts = kNeox ? 2 : 1;
            Vec<T, kElems> part[kParts];
            int64_t at[kParts];
            int n = 0;
            const int64_t cs = rope_row(p.rope, t, false, OpId::write_kv_cache) * p.rope.cs_row;
            rope_item<T, VEC, kNeox>(p.rope, src, cs, static_cast<int64_t>(x) * kElems,
                                     [&](int64_t i, const float(&y)[kElems]) {
                                       part[n] = from_floats<T>(y);
                                       at[n++] = i;
                                     });
#pragma unroll
            for (int k = 0; k < kParts; ++k) {
              float f[kElems];
              to_floats(part[k], f);
              store_e4m3(codes + at[k], f, s);
            }
          } else {  // the unrotated tail
            const int64_t i = p.rope.rot_dim + static_cast<int64_t>(x - rot_items) * VEC;
            if (i < p.head_dim) quantize_vec(i);
          }
          continue;
        } else {
          dst = is_k ? p.k_cache + blk * p.kc_blk + in * p.kc_row + hh * p.kc_head
                     : p.v_cache + blk * p.vc_blk + in * p.vc_row + hh * p.vc_head;
          if (!kRope || !is_k) {
            V::load(src + x * VEC).store(dst + x * VEC);
            continue;
          }
        }
      }
      if constexpr (kRope) {  // a q or k row: rotated pairs, then the unrotated tail (in place: already there)
        if (x < rot_items) {
          const int64_t cs = rope_row(p.rope, t, x == 0 && h == 0, OpId::write_kv_cache) * p.rope.cs_row;
          rope_item<T, VEC, kNeox>(p.rope, src, dst, cs, static_cast<int64_t>(x) * kElems);
        } else {
          const int64_t i = p.rope.rot_dim + static_cast<int64_t>(x - rot_items) * VEC;
          if (i < p.head_dim && src != dst) V::load(src + i).store(dst + i);
        }
      }
    }
  }
}

// The widest vector (<= 16 bytes) that divides every row segment the kernel touches and every pointer and stride
// (16-byte rows for k, v and the caches: validate_kv_write; q / q_out: the rope args' alignment).
template <typename T>
int kv_write_vec(const detail::KvWriteArgs& a) {
  int vec = 16 / static_cast<int>(sizeof(T));
  auto fits = [&](int v) {
    if (!a.rope) return true;
    const int64_t rotated = a.r.style == RopeStyle::neox ? a.r.rot_dim / 2 : a.r.rot_dim;
    return rotated % std::max(v, a.r.style == RopeStyle::neox ? 1 : 2) == 0 && (a.head_dim - a.r.rot_dim) % v == 0 &&
           a.r.align_bytes >= v * static_cast<int>(sizeof(T));
  };
  while (vec > 1 && !fits(vec)) vec /= 2;
  return vec;
}

template <typename T>
Status launch_kv_write(const detail::KvWriteArgs& a, detail::DeviceErrorRecord* err, cudaStream_t stream) {
  const bool fp8 = a.cache_dtype != a.dtype;
  KvWriteParams<T> p{static_cast<const T*>(a.k),
                     static_cast<const T*>(a.v),
                     a.k_st.token,
                     a.k_st.head,
                     a.v_st.token,
                     a.v_st.head,
                     static_cast<T*>(a.k_cache),
                     static_cast<T*>(a.v_cache),
                     a.kc_st.batch,
                     a.kc_st.token,
                     a.kc_st.head,
                     a.vc_st.batch,
                     a.vc_st.token,
                     a.vc_st.head,
                     a.block,
                     a.slots,
                     a.slot_mapping,
                     a.slot_dtype == DType::i64 ? 1 : 0,
                     static_cast<int>(a.tokens),
                     static_cast<int>(a.rope ? a.r.heads : 0),
                     static_cast<int>(a.kv_heads),
                     static_cast<int>(a.head_dim),
                     a.rope ? rope_params<T>(a.r, err) : RopeParams<T>{},
                     err,
                     a.scales.k,
                     a.scales.v,
                     a.scales.k_stride,
                     a.scales.v_stride,
                     static_cast<int>(a.k_scales),
                     static_cast<int>(a.v_scales)};
  const int vec = kv_write_vec<T>(a);
  const int64_t rows = detail::kv_write_rows(a);
  const int bx = static_cast<int>(a.head_dim / vec), by = std::max(1, kKvWriteThreads / bx);
  const dim3 block(static_cast<unsigned>(bx), static_cast<unsigned>(by));
  const dim3 grid(1, static_cast<unsigned>(std::min<int64_t>((rows + by - 1) / by, 65535)));
  return dispatch_vec<16 / sizeof(T)>(vec, [&](auto v) -> Status {
    constexpr int VEC = decltype(v)::value;
    const auto pick = [&](auto fp8_tag) {
      constexpr bool kFp8 = decltype(fp8_tag)::value;
      return !a.rope                        ? kv_write_kernel<T, VEC, false, true, kFp8>
             : a.r.style == RopeStyle::neox ? kv_write_kernel<T, VEC, true, true, kFp8>
                                            : kv_write_kernel<T, VEC, true, false, kFp8>;
    };
    const auto kernel = fp8 ? pick(std::true_type{}) : pick(std::false_type{});
    kernel<<<grid, block, 0, stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

}  // namespace
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status write_kv_cache_cuda(const KvWriteArgs& a, Stream stream) {
  const int64_t rows = detail::kv_write_rows(a);
  if (rows >= (int64_t{1} << 31))  // the kernel indexes (token, head) rows in 32 bits
    return unsupported("write_kv_cache: tokens x (heads + 2 kv_heads) = " + std::to_string(rows) +
                       " is above the kernel's limit of 2^31 - 1 rows; split the call");
  cuda::DeviceGuard guard;
  DeviceProfile prof;
  KK_RETURN_IF_ERROR(cuda::prepare_device(a.op, a.dtype, a.device.index,
                                          {{a.k, "k"},
                                           {a.v, "v"},
                                           {a.k_cache, "k_cache"},
                                           {a.v_cache, "v_cache"},
                                           {a.slot_mapping, "slot_mapping"},
                                           {a.rope ? a.r.q : nullptr, "q"},
                                           {a.rope ? a.r.q_out : nullptr, "q_out"},
                                           {a.rope ? a.r.positions : nullptr, "positions"},
                                           {a.rope ? a.r.cos : nullptr, "cos_sin_cache"},
                                           {a.scales.k, "k_scale"},
                                           {a.scales.v, "v_scale"}},
                                          &guard, &prof));
  if (a.cache_dtype != a.dtype)
    KK_RETURN_IF_ERROR(cuda::check_dtype_code(a.cache_dtype, a.device.index, "write_kv_cache"));
  DeviceErrorRecord* err = nullptr;
  KK_RETURN_IF_ERROR(cuda::device_error_record(a.device.index, &err));
  return cuda::dispatch_half("write_kv_cache", a.dtype,
                             [&](auto tag) { return cuda::launch_kv_write<decltype(tag)>(a, err, stream); });
}

}  // namespace kernelkit::detail
