// Quantization on CUDA vs the fp64 reference (GPU not yet run when written): every output element, outputs poisoned,
// fresh random inputs. Linear: W8A16 and W4A16 (group 64 and 128), f16 and bf16, m in {1, 3, 8, 64} (every token tile
// and the tail of one), odd n, with and without bias, strided x. Quantizers: q and scales bit for bit.
#include <cstdlib>

#include <gtest/gtest.h>

#include "expect_case.hpp"
#include "kernelkit/ops.hpp"
#include "ops/quant/quant_plan.hpp"
#include "ops/quant/quant_cases.hpp"

using namespace kernelkit;
using kernelkit::testing::WeightOnlyCase;
using kernelkit::testing::QuantizeCase;

namespace {
struct Variant {
  int bits, group;
};
constexpr Variant kVariants[] = {{8, 0}, {4, 128}, {4, 64}};
}  // namespace

using LinearParam = std::tuple<DType, int, int64_t, std::pair<int64_t, int64_t>>;
class WeightOnlyGrid : public ::testing::TestWithParam<LinearParam> {};

TEST_P(WeightOnlyGrid, MatchesReference) {
  const auto [dt, variant, m, nk] = GetParam();
  const Variant v = kVariants[variant];
  for (bool bias : {true, false}) {
    WeightOnlyCase c{dt, v.bits, v.group, m, nk.first, nk.second, bias, bias ? 0 : 8, static_cast<uint64_t>(m + variant)};
    kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt, c.name());
  }
  if (nk.first > 1) {  // out += (the decoder layer's residual add)
    WeightOnlyCase c{dt, v.bits, v.group, m, nk.first, nk.second, true, 0, static_cast<uint64_t>(m + 5), true};
    kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt, c.name() + " accumulate");
  }
}

// (n, k): odd and tiny n, a k that leaves most warps of a step idle (128), a k whose chunks do not fill the last step
// (640 = 5 x 128), and a decode-sized layer whose n alone fills the GPU.
INSTANTIATE_TEST_SUITE_P(Shapes, WeightOnlyGrid,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(0, 1, 2),
                                            ::testing::Values(1, 3, 8, 64),
                                            ::testing::Values(std::pair<int64_t, int64_t>{1, 128},
                                                              std::pair<int64_t, int64_t>{7, 640},
                                                              std::pair<int64_t, int64_t>{255, 512},
                                                              std::pair<int64_t, int64_t>{1031, 2048})));

// Shapes where the planners' kernels and splits change: small n with long k (the GEMV's k_warps 8 at m = 1; at m = 5
// the tensor-core tiles' 16-way split over grid.z), the decode layer, and a wide n with a partial last block.
TEST(WeightOnlyLarge, SplitKAndDecodeShapes) {
  for (DType dt : {DType::f16, DType::bf16})
    for (const Variant v : kVariants) {
      for (int64_t m : {1, 5}) {
        WeightOnlyCase small_n{dt, v.bits, v.group, m, 64, 8192, true, 0, 11};
        kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(small_n, 0), dt, small_n.name());
      }
      WeightOnlyCase decode{dt, v.bits, v.group, 1, 11008, 4096, false, 0, 12};
      kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(decode, 0), dt, decode.name());
      // A wide n (1026 blocks of 4 rows, a last block of one row: k split 2 ways everywhere) with 1 and 2 tokens,
      // strided x, bias, accumulate; k = 8320 is no multiple of a warp-wide step of chunks (INT8: 4 x 128 + 8),
      // k = 640 less than one step for the block's warps.
      for (int64_t m : {1, 2}) {
        WeightOnlyCase wide{dt, v.bits, v.group, m, 4101, 8320, m == 1, m == 1 ? 0 : 8, static_cast<uint64_t>(13 + m)};
        kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(wide, 0), dt, wide.name());
        WeightOnlyCase acc{dt, v.bits, v.group, m, 4101, 640, true, 0, static_cast<uint64_t>(15 + m), true};
        kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(acc, 0), dt,
                                        acc.name() + " accumulate");
      }
    }
}

// Weight-only on tensor cores (m >= kLinearTcMinM), W8A16 and W4A16 (groups 128 and 64): tails of the 16- and
// 64-token and 128-feature tiles (and, INT8, of the 64-value k step), strided x, bias, accumulate; k split over grid.z
// (small grids) and not (k = 64: one k tile).
using TcParam = std::tuple<DType, int, int64_t, std::pair<int64_t, int64_t>>;
class WeightOnlyTensorCores : public ::testing::TestWithParam<TcParam> {};

TEST_P(WeightOnlyTensorCores, MatchesReference) {
  const auto [dt, variant, m, nk] = GetParam();
  const Variant v = kVariants[variant];
  const int64_t k = v.bits == 4 && nk.second % v.group ? nk.second / v.group * v.group + v.group : nk.second;
  for (bool bias : {true, false}) {
    WeightOnlyCase c{dt, v.bits, v.group, m, nk.first, k, bias, bias ? 0 : 8, static_cast<uint64_t>(m + 3)};
    kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt, c.name());
  }
  WeightOnlyCase c{dt, v.bits, v.group, m, nk.first, k, true, 0, static_cast<uint64_t>(m + 7), true};
  kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt, c.name() + " accumulate");
}

// k = 528 is 8 full k tiles and a 16-value tail for INT8 (INT4 rounds k up to a multiple of its group).
INSTANTIATE_TEST_SUITE_P(Shapes, WeightOnlyTensorCores,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(0, 1, 2),
                                            ::testing::Values(16, 17, 65, 300),
                                            ::testing::Values(std::pair<int64_t, int64_t>{7, 640},
                                                              std::pair<int64_t, int64_t>{130, 64},
                                                              std::pair<int64_t, int64_t>{255, 528},
                                                              std::pair<int64_t, int64_t>{1031, 2048})));

using QuantizeParam = std::tuple<OpId, DType, int64_t, int64_t>;
class QuantizeGrid : public ::testing::TestWithParam<QuantizeParam> {};

TEST_P(QuantizeGrid, BitForBit) {
  const auto [op, dt, rows, k] = GetParam();
  const bool int4 = op == OpId::quantize_int4_groupwise;
  for (int group : int4 ? std::vector<int>{64, 128} : std::vector<int>{0})
    for (int64_t pad : {int64_t{0}, int64_t{8}}) {
      if (int4 && k % group != 0) continue;
      QuantizeCase c{op, dt, rows, k, group, pad, static_cast<uint64_t>(rows + k)};
      kernelkit::testing::expect_case(kernelkit::testing::run_quantize_case_cuda(c, 0), op, dt, c.name());
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QuantizeGrid,
    ::testing::Combine(::testing::Values(OpId::quantize_int8_per_channel, OpId::quantize_per_token_int8,
                                         OpId::quantize_per_token_fp8, OpId::quantize_int4_groupwise),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16), ::testing::Values(1, 7, 300),
                       ::testing::Values(128, 777, 1024, 4096)));

// W8A8 on INT8 tensor cores: tiles with tails in m, n and k (k not a multiple of the 64-byte stage), one-row and
// one-column outputs, strided xq, a decoder-sized layer; every element against the exact integer sums.
using W8A8Param = std::tuple<DType, int64_t, std::pair<int64_t, int64_t>>;
class W8A8Grid : public ::testing::TestWithParam<W8A8Param> {};

// Both paths: the tiles (KERNELKIT_W8A8=tiles) and the default (cuBLASLt's INT8 sums for m > 16 and n, k multiples
// of 8 where it has an algorithm: the n = 256 shapes; the tiles elsewhere).
TEST_P(W8A8Grid, MatchesExactIntegerSums) {
  const auto [dt, m, nk] = GetParam();
  for (const char* path : {"tiles", "auto"}) {
    setenv("KERNELKIT_W8A8", path, 1);
    for (bool bias : {true, false}) {
      const kernelkit::testing::W8A8Case c{dt, m, nk.first, nk.second, bias, bias ? 0 : 32,
                                           static_cast<uint64_t>(m + nk.first)};
      kernelkit::testing::expect_case(kernelkit::testing::run_w8a8_case(c, 0), dt, c.name() + " " + path);
    }
  }
  unsetenv("KERNELKIT_W8A8");
}

// cuBLASLt forced (KERNELKIT_W8A8=cublaslt: an error, not the tiles, if it had no algorithm) on a model-like shape.
TEST(W8A8Cublaslt, MatchesExactIntegerSums) {
  setenv("KERNELKIT_W8A8", "cublaslt", 1);
  for (DType dt : {DType::f16, DType::bf16}) {
    const kernelkit::testing::W8A8Case c{dt, 96, 256, 512, true, 0, 5};
    kernelkit::testing::expect_case(kernelkit::testing::run_w8a8_case(c, 0), dt, c.name() + " cublaslt");
  }
  unsetenv("KERNELKIT_W8A8");
}

INSTANTIATE_TEST_SUITE_P(Shapes, W8A8Grid,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                            ::testing::Values(1, 17, 128, 300),
                                            ::testing::Values(std::pair<int64_t, int64_t>{1, 16},
                                                              std::pair<int64_t, int64_t>{7, 80},
                                                              std::pair<int64_t, int64_t>{255, 528},
                                                              std::pair<int64_t, int64_t>{256, 1040},
                                                              std::pair<int64_t, int64_t>{1031, 4096})));

// linear_fp8 through cuBLASLt's FP8 matmul: every finite e4m3 code as input, per-token x per-channel and per-tensor
// scales, with and without a bias, strided xq, one-row and decoder-sized layers; fast accumulation on one shape.
using Fp8Param = std::tuple<DType, int64_t, std::pair<int64_t, int64_t>>;
class Fp8LinearGrid : public ::testing::TestWithParam<Fp8Param> {};

TEST_P(Fp8LinearGrid, MatchesTheDotProducts) {
  const auto [dt, m, nk] = GetParam();
  for (bool per_tensor : {false, true})
    for (bool bias : {true, false}) {
      const kernelkit::testing::W8A8Case c{
          dt,        m, nk.first, nk.second, bias, bias ? 0 : 32, static_cast<uint64_t>(m + nk.first), OpId::linear_fp8,
          per_tensor};
      kernelkit::testing::expect_case(kernelkit::testing::run_w8a8_case(c, 0), OpId::linear_fp8, dt, c.name());
    }
  if (m == 128 && nk.first == 256) {
    const kernelkit::testing::W8A8Case c{dt, m, nk.first, nk.second, true, 0, 11, OpId::linear_fp8, false, true};
    kernelkit::testing::expect_case(kernelkit::testing::run_w8a8_case(c, 0), OpId::linear_fp8, dt, c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fp8LinearGrid,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                            ::testing::Values(1, 17, 128, 300),
                                            ::testing::Values(std::pair<int64_t, int64_t>{8, 16},
                                                              std::pair<int64_t, int64_t>{8, 80},
                                                              std::pair<int64_t, int64_t>{256, 528},
                                                              std::pair<int64_t, int64_t>{1032, 4096})));

// The GEMV's alternatives (KERNELKIT_TUNE): the register prefetch and 2- and 3-deep cp.async rings (a synchronous copy
// on sm_75 code), whichever the planner picks for this shape on the profile (its chunks a thread depend on the SM
// count: the ring for INT8 on the A100 profile, the prefetch on the H200's), and forced warps along k (1; 8 with the
// ring: 256 threads), for 1 and 2 tokens, INT8 and INT4, with a k that is no multiple of a warp step and a partial
// last block.
TEST(PlannerAlternatives, TunedGemvMatchesReference) {
  uint64_t seed = 81;
  for (const char* setting : {"gemv_stages=0", "gemv_stages=2", "gemv_stages=3,gemv_kwarps=8", "gemv_kwarps=1"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    for (const auto& [bits, group] : {std::pair{8, 0}, {4, 128}})
      for (int64_t m : {1, 2}) {
        const WeightOnlyCase c{DType::f16, bits, group, m, 4101, 8320, true, m == 2 ? 8 : 0, seed++};
        kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), c.dtype,
                                        c.name() + " " + setting);
      }
  }
}
