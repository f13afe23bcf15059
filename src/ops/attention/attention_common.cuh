// What the prefill and decode kernels share: their head tensors as typed pointers with strides, and the log constants
// of the exp2-domain softmax.
#pragma once

#include "ops/attention/attention.hpp"

namespace kernelkit::cuda {

constexpr float kLog2e = 1.4426950408889634f;  // exp(s x) = exp2(s log2(e) x): the scale is folded into exp2's domain
constexpr float kLn2 = 0.6931471805599453f;    // lse = ln2 * max_log2 + ln(sum)

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
