// The online-softmax step and the P fragment shared by the tensor-core attention kernels (flash_prefill_kernel,
// decode_tc_kernel): one 16-row MMA tile whose scores sit in C fragments (mma.cuh), rows g and g + 8 of the lane's
// quad.
#pragma once

#include "kernels/common/mma.cuh"
#include "ops/attention/attention_common.cuh"

namespace kernelkit::cuda {

// O's rows g and g + 8 times corr (online_softmax_factors), skipped when no row of the warp moved its max.
template <int D8>
__device__ __forceinline__ void rescale_rows(float (&acc)[D8][4], const float (&corr)[2]) {
  if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
    for (int i = 0; i < D8; ++i) {
      acc[i][0] *= corr[0];
      acc[i][1] *= corr[0];
      acc[i][2] *= corr[1];
      acc[i][3] *= corr[1];
    }
  }
}

// s: the tile's NB x 8 scores of this lane, already scaled into the log2 domain and masked to -inf; tile_max: the
// running max of rows g, g + 8 combined with this lane's scores. The quad (4 lanes) shares each row: the new max is
// reduced over it, O (acc) and this lane's part of the sum l are rescaled by exp2(m_old - m_new), and s becomes P
// (fp32: l adds the unrounded values, only the P V operand is rounded to T).
// kLean (the prefill): exp2 as exp2_ftz, and O's rescale (D8 x 4 multiplies, as many as the tile's P V MMAs issue
// instructions) skipped when no row of the warp has a new max (the factor is then exactly 1; past the first tiles a
// row's max rarely moves, so most tiles skip it, a warp-uniform branch). Measured on the H200 (bf16): the
// instruction-bound prefill takes 628.7 us with it against 781.6 without (b1 h32 s4096 d128 causal), but the
// tensor-core decode, bound by memory, 148.8 against 131.9 us at b32 h32/8 s4096 (10.6 against 10.5 at b1), so the
// decode keeps exp2f and the unconditional rescale (kLean = false).
// kHalves 1 (the decode, whose rows are rows 0..7 of the tile): only row g is computed; row g + 8's scores are left as
// the MMA gave them (zeros: its q row is zeros), so P's row g + 8 is zeros and nothing of O's row g + 8 is used.
template <bool kLean, int NB, int D8, int kHalves = 2>
__device__ __forceinline__ void online_softmax_step(float (&s)[NB][4], float (&tile_max)[2], float (&m_run)[2],
                                                    float (&l_run)[2], float (&acc)[D8][4]) {
  static_assert(kHalves == 1 || kHalves == 2, "rows g, or g and g + 8");
  auto exp2 = [](float x) { return kLean ? exp2_ftz(x) : exp2f(x); };
  float m_use[2] = {0.0f, 0.0f}, corr[2] = {1.0f, 1.0f};
#pragma unroll
  for (int r = 0; r < kHalves; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    // A row with nothing visible yet keeps max -inf: subtract 0 instead (exp2(-inf - 0) = 0, never -inf - -inf).
    m_use[r] = tile_max[r] == -INFINITY ? 0.0f : tile_max[r];
    corr[r] = kLean && m_run[r] == m_use[r] ? 1.0f : exp2(m_run[r] - m_use[r]);
    m_run[r] = tile_max[r];
    l_run[r] *= corr[r];
    if constexpr (!kLean) {
#pragma unroll
      for (int i = 0; i < D8; ++i) {
        acc[i][2 * r] *= corr[r];
        acc[i][2 * r + 1] *= corr[r];
      }
    }
  }
  if constexpr (kLean) rescale_rows(acc, corr);
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int e = 0; e < 2 * kHalves; ++e) {
      s[nb][e] = exp2(s[nb][e] - m_use[e / 2]);
      l_run[e / 2] += s[nb][e];
    }
}

// How many independent chains a row's max and sum over NB 8-key blocks are split into (block nb into chain
// nb % kRowChains, combined at the end): one chain over a 128-key tile's 32 scores a row is 32 dependent
// instructions, four are 8 (and 2 to combine them).
template <int NB>
constexpr int kRowChains = NB % 4 == 0 ? 4 : 1;

// The kLean step for a kernel whose O is still being read by an asynchronous MMA when the step runs (the
// warp-specialized sm_90a prefill: O += P V of the previous tile overlaps this tile's softmax): O is left alone and
// its rescale factors come back in corr, for rescale_rows once that MMA is done. tile_max: the max of this lane's
// scores of each row in the tile (not combined with m_run); `scale` (> 0) takes the scores into the log2 domain,
// folded into the exponent (1 for scores already there). slack (>= 0, kAttnMaxRescaleSlack at most): a row keeps its
// running max while the tile's exceeds it by at most that (0: the exact running max).
template <int NB>
__device__ __forceinline__ void online_softmax_factors(float (&s)[NB][4], float (&tile_max)[2], float scale,
                                                       float slack, float (&m_run)[2], float (&l_run)[2],
                                                       float (&corr)[2]) {
  float m_use[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    float m_new = fmaxf(m_run[r], tile_max[r] * scale);
    if (m_run[r] != -INFINITY && m_new - m_run[r] <= slack) m_new = m_run[r];  // kept (slack 0: unchanged)
    m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // as in online_softmax_step
    corr[r] = m_run[r] == m_use[r] ? 1.0f : exp2_ftz(m_run[r] - m_use[r]);
    m_run[r] = m_new;
    l_run[r] *= corr[r];
  }
  // Each row's sum in kChains FADD chains, each started from its first exponential (not from 0: an instruction a
  // chain and row).
  constexpr int kChains = kRowChains<NB>;
  float part[kChains][2];
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nb][e] = exp2_ftz(fmaf(s[nb][e], scale, -m_use[e / 2]));
      float& sum = part[nb % kChains][e / 2];
      sum = nb < kChains && e % 2 == 0 ? s[nb][e] : sum + s[nb][e];
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = part[0][r];
#pragma unroll
    for (int c = 1; c < kChains; ++c) sum += part[c][r];
    l_run[r] += sum;
  }
}

// P's C fragments of keys 16 kk .. 16 kk + 15 rounded to T: exactly the A fragment of that P V k-step.
template <typename T, int NB>
__device__ __forceinline__ void p_fragment(const float (&s)[NB][4], int kk, unsigned (&a)[4]) {
  a[0] = pack_rounded<T>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack_rounded<T>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack_rounded<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack_rounded<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

}  // namespace kernelkit::cuda
