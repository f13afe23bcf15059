// What the prefill and decode kernels share: their head tensors as typed pointers with strides, and how a score
// enters the exp2-domain softmax.
#pragma once

#include "kernels/common/fast_math.cuh"
#include "ops/attention/attention.hpp"

namespace kernelkit::cuda {

// How a raw score s = q . k enters the exp2-domain softmax: scale log2(e) s, or with a soft-cap (Gemma 2)
// cap log2(e) tanh(scale s / cap). Host side: score_transform below.
struct ScoreTransform {
  float scale_in;  // scale log2(e); with a soft-cap scale / cap
  float cap_log2;  // cap log2(e); 0: no soft-cap
  __device__ __forceinline__ float operator()(float s) const {
    return cap_log2 != 0.0f ? cap_log2 * tanh_fast(s * scale_in) : s * scale_in;
  }
  // A tile of C fragments at once: one warp-uniform branch for the tile, not one per score. kElems 2: row g only (the
  // decode's, see online_softmax_step).
  template <int kElems = 4, int NB>
  __device__ __forceinline__ void apply(float (&s)[NB][4]) const {
    if (cap_log2 != 0.0f) {
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < kElems; ++e) s[nb][e] = cap_log2 * tanh_fast(s[nb][e] * scale_in);
    } else {
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < kElems; ++e) s[nb][e] *= scale_in;
    }
  }
};

inline ScoreTransform score_transform(float scale, float softcap) {
  return softcap > 0.0f ? ScoreTransform{scale / softcap, softcap * kLog2e} : ScoreTransform{scale * kLog2e, 0.0f};
}

// ALiBi (BLOOM, MPT): the score of the query at position pos and key j gets -slope |pos - j|, in the log2 domain
// -slope log2(e) |pos - j| (exact in fp32 while |pos - j| < 2^24). Slopes of head h of sequence b at
// slopes[b * batch_stride + h] (batch_stride 0: one per head); null: none.
struct AlibiSlopes {
  const float* slopes;
  int64_t batch_stride;
  // The log2-domain slope of (b, h); 0 without ALiBi.
  __device__ __forceinline__ float log2_slope(int b, int h) const {
    return slopes ? slopes[b * batch_stride + h] * kLog2e : 0.0f;
  }
};
__device__ __forceinline__ float alibi_biased(float x, float log2_slope, int pos, int key) {
  return fmaf(-log2_slope, fabsf(static_cast<float>(pos - key)), x);
}

// The kernels' sliding window: a window that hides nothing (at least s_k keys back, s_k the longest sequence's) is
// none (-1), which also keeps their 32-bit position arithmetic in range.
inline int kernel_window(int64_t window_left, int64_t s_k) {
  return window_left < 0 || window_left >= s_k ? -1 : static_cast<int>(window_left);
}

template <typename T>
struct AttnTensors {
  const T* q;  // element (b, token, head, i) at b * qs.batch + token * qs.token + head * qs.head + i
  const T* k;
  const T* v;
  T* out;
  float* lse;  // optional
  detail::HeadStrides qs, ks, vs, os;
};

// From AttentionArgs or DecodeArgs.
template <typename T, typename Args>
AttnTensors<T> attn_tensors(const Args& a) {
  return {static_cast<const T*>(a.q),
          static_cast<const T*>(a.k),
          static_cast<const T*>(a.v),
          static_cast<T*>(a.out),
          a.lse,
          a.q_st,
          a.k_st,
          a.v_st,
          a.o_st};
}

}  // namespace kernelkit::cuda
