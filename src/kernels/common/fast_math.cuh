// Single-instruction fp32 math (MUFU) for kernels whose results do not need IEEE-exact exp / reciprocal: sums that
// hold at least 1, softmax probabilities, and activations stored in 16-bit types, where a few fp32 ulps vanish in
// the final rounding.
#pragma once

namespace kernelkit::cuda {

constexpr float kLog2e = 1.4426950408889634f;  // exp(s x) = exp2(s log2(e) x): the scale is folded into exp2's domain
constexpr float kLn2 = 0.6931471805599453f;    // lse = ln2 * max_log2 + ln(sum)

// 2^x as one MUFU.EX2 (relative error about 2^-22): exp2f adds a range test and two predicated multiplies around it
// to keep results below 2^-126 (denormals); flushed to 0 instead. 2^-inf = +0, 2^inf = inf.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1 / x as one MUFU.RCP (about 1 ulp); 1 / inf = 0.
__device__ __forceinline__ float rcp_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// tanh x = 1 - 2 / (e^2x + 1) on MUFU.EX2 and MUFU.RCP (+-1 where e^2x over- or underflows): absolute error about
// 3e-7, so a soft-capped logit cap tanh(x) is off by 3e-7 cap (1.5e-5 at Gemma 2's 50, under the fp32 error of a
// 128-term q . k). tanhf is exact to an ulp but about 20 instructions with a branch, and its registers took the
// prefill from 186 to 251 a thread (H200: b1 h32 s4096 d128 causal 489 against 420 us, with no soft-cap in use).
__device__ __forceinline__ float tanh_fast(float x) {
  return 1.0f - 2.0f * rcp_ftz(exp2_ftz(x * (2.0f * kLog2e)) + 1.0f);
}

// erfc z from the Chebyshev fit of Numerical Recipes (Press et al., 6.2: erfc |z| = t exp(-z^2 + P(t)),
// t = 1 / (1 + |z| / 2), fractional error under 1.2e-7 in exact arithmetic; erfc(-z) = 2 - erfc z): about 15
// instructions against erfcf's 40. Evaluated in fp32 its relative error stays under 2e-5 where erfc > 1e-30, and
// under 2e-6 for GELU's x erfc(-x / sqrt 2) wherever that exceeds 1e-3 (checked against fp64 over |x| <= 14).
__device__ __forceinline__ float erfc_fast(float z) {
  const float a = fabsf(z);
  const float t = rcp_ftz(fmaf(0.5f, a, 1.0f));
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  const float r = t * exp2_ftz(fmaf(-a, a, fmaf(t, p, -1.26551223f)) * kLog2e);
  return z >= 0.0f ? r : 2.0f - r;
}

}  // namespace kernelkit::cuda
