// Quantization on CUDA vs the fp64 reference: every output element, outputs poisoned, fresh random inputs. Linear:
// W8A16 and W4A16 (group 64 and 128), f16 and bf16, m in {1, 3, 8, 64} (every token tile and the tail of one), odd n,
// with and without bias, strided x; the checkpoint forms (groups of 32, INT8 groups, zero points); the tensor-core
// GEMVs of KERNELKIT_TUNE gemv_mma=1 / fp8_gemv=2. Quantizers (per row, per tensor, per token group, 128 x 128 blocks,
// INT4 groups): q and scales bit for bit; the dynamic per-tensor one in a CUDA graph; inf / NaN records.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "expect_case.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "ops/quant/quant.hpp"
#include "ops/quant/quant_cases.hpp"
#include "ops/quant/quant_plan.hpp"

using namespace kernelkit;
using kernelkit::testing::layout_cols;
using kernelkit::testing::layout_rows;
using kernelkit::testing::QuantizeCase;
using kernelkit::testing::WeightOnlyCase;

namespace {
// FP8 codes need a profile with FP8 (the T4 / A100 profiles refuse them: checked by the grid's cases).
bool case_profile_has_fp8() { return kernelkit::testing::case_profile().supports(DType::f8e4m3); }

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
  const int64_t n = layout_rows(v.bits, nk.first), k = layout_cols(v.bits, nk.second);
  for (bool bias : {true, false}) {
    WeightOnlyCase c{dt, v.bits, v.group, m, n, k, bias, bias ? 0 : 8, static_cast<uint64_t>(m + variant)};
    kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt, c.name());
  }
  if (nk.first > 1) {  // out += (the decoder layer's residual add)
    WeightOnlyCase c{dt, v.bits, v.group, m, n, k, true, 0, static_cast<uint64_t>(m + 5), true};
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
        WeightOnlyCase wide{dt,
                            v.bits,
                            v.group,
                            m,
                            layout_rows(v.bits, 4101),
                            8320,
                            m == 1,
                            m == 1 ? 0 : 8,
                            static_cast<uint64_t>(13 + m)};
        kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(wide, 0), dt, wide.name());
        WeightOnlyCase acc{
            dt, v.bits, v.group, m, layout_rows(v.bits, 4101), 640, true, 0, static_cast<uint64_t>(15 + m), true};
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
  const int64_t n = layout_rows(v.bits, nk.first);
  for (bool bias : {true, false}) {
    WeightOnlyCase c{dt, v.bits, v.group, m, n, k, bias, bias ? 0 : 8, static_cast<uint64_t>(m + 3)};
    kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt, c.name());
  }
  WeightOnlyCase c{dt, v.bits, v.group, m, n, k, true, 0, static_cast<uint64_t>(m + 7), true};
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

// The checkpoint forms (GPTQ / AWQ): groups of 32, INT8 with group scales, zero points; random codes, scales and
// zero points (every 4th 4-bit group's zero anywhere in int8). m 1 / 2 on the GEMV, the rest on tensor cores (17:
// a tail of the 16-token tile; 64: four m-tiles); k = 544 ends in half a 64-wide k tile for INT8 groups of 32 (INT4
// takes 576: whole regions).
struct CheckpointForm {
  int bits, group;
  bool zeros;
};
constexpr CheckpointForm kCheckpointForms[] = {{4, 32, false}, {8, 128, false}, {4, 128, true},
                                               {4, 64, true},  {4, 32, true},   {8, 32, true}};
using FormParam = std::tuple<DType, int, int64_t, std::pair<int64_t, int64_t>>;
class WeightOnlyCheckpointForms : public ::testing::TestWithParam<FormParam> {};

TEST_P(WeightOnlyCheckpointForms, MatchesReference) {
  const auto [dt, form, m, nk] = GetParam();
  const CheckpointForm f = kCheckpointForms[form];
  const int64_t k =
      layout_cols(f.bits, (nk.second + f.group - 1) / f.group * f.group);  // INT8 keeps 544 (groups of 32)
  for (bool accumulate : {false, true}) {
    WeightOnlyCase c{dt,
                     f.bits,
                     f.group,
                     m,
                     layout_rows(f.bits, nk.first),
                     k,
                     !accumulate,
                     accumulate ? 0 : 8,
                     static_cast<uint64_t>(m + form + 31),
                     accumulate,
                     f.zeros};
    kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt,
                                    c.name() + (accumulate ? " accumulate" : ""));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, WeightOnlyCheckpointForms,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                            ::testing::Range(0, static_cast<int>(std::size(kCheckpointForms))),
                                            ::testing::Values(1, 2, 17, 64),
                                            ::testing::Values(std::pair<int64_t, int64_t>{7, 544},
                                                              std::pair<int64_t, int64_t>{255, 2048},
                                                              std::pair<int64_t, int64_t>{4101, 1024})));

namespace {
// The tensor-core GEMV's forms: W4A16 with groups of 32 / 64 / 128, W8A16 per channel or with groups, symmetric or with
// zero points.
constexpr CheckpointForm kTunedGemvForms[] = {{4, 128, false}, {4, 64, false},  {4, 128, true},
                                              {4, 64, true},   {4, 32, false},  {4, 32, true},
                                              {8, 0, false},   {8, 128, false}, {8, 32, true}};

// The tensor-core GEMV's cases of one dtype and form at `ms` tokens under the KERNELKIT_TUNE setting `tune_value`; the
// largest n only at the first and last token counts.
void expect_tensor_core_gemv(const char* tune_value, DType dt, CheckpointForm f, std::initializer_list<int64_t> ms,
                             uint64_t seed) {
  const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", tune_value);
  for (int64_t m : ms)
    for (const auto [n, k] : {std::pair<int64_t, int64_t>{7, 128}, {255, 2048}, {4101, 8192}}) {
      if (n == 4101 && m != *ms.begin() && m != *std::prev(ms.end())) continue;
      WeightOnlyCase c{
          dt,     f.bits, f.group, m, layout_rows(f.bits, n), layout_cols(f.bits, k), m != 2, m == 2 ? 8 : 0,
          seed++, m == 3, f.zeros};
      kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), dt,
                                      c.name() + (m == 3 ? " accumulate " : " ") + tune_value);
    }
}
}  // namespace

class WeightOnlyTuned : public ::testing::TestWithParam<std::tuple<DType, int>> {};

// The tensor-core GEMV of KERNELKIT_TUNE gemv_mma=1 / 2 / 3 (up to 16 / 32 tokens in tiles of 8; two tiles in
// batches of four / two regions) and gemv_mma_mtiles (2 and 4 row tiles a warp), one dtype and form a test: one and
// several row blocks with a partial last one, k of 2 to 128 regions (more warps than batches and fewer), one, two and
// four token tiles, full and partial; the checkpoint forms and the quantizers' weights alike.
TEST_P(WeightOnlyTuned, TensorCoreGemvMatchesReference) {
  const auto [dt, form] = GetParam();
  const uint64_t seed = 71 + 100 * static_cast<uint64_t>(form) + (dt == DType::bf16 ? 5000 : 0);
  expect_tensor_core_gemv("gemv_mma=1", dt, kTunedGemvForms[form], {1, 2, 3, 5, 8, 9, 16}, seed);
  expect_tensor_core_gemv("gemv_mma=2", dt, kTunedGemvForms[form], {17, 24, 32}, seed + 50);
  expect_tensor_core_gemv("gemv_mma=3", dt, kTunedGemvForms[form], {9, 16}, seed + 75);
  // Two and four row tiles a warp (INT4 with groups of 64 or more): every batch form the launcher instantiates.
  if (kTunedGemvForms[form].bits == 4 && kTunedGemvForms[form].group >= 64) {
    expect_tensor_core_gemv("gemv_mma=1,gemv_mma_mtiles=2", dt, kTunedGemvForms[form], {1, 5, 9, 16}, seed + 100);
    expect_tensor_core_gemv("gemv_mma=3,gemv_mma_mtiles=2", dt, kTunedGemvForms[form], {9, 16, 17, 32}, seed + 125);
    expect_tensor_core_gemv("gemv_mma=1,gemv_mma_mtiles=4", dt, kTunedGemvForms[form], {1, 8, 9, 16}, seed + 150);
  }
}
INSTANTIATE_TEST_SUITE_P(Forms, WeightOnlyTuned,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                            ::testing::Range(0, static_cast<int>(std::size(kTunedGemvForms)))));

using QuantizeParam = std::tuple<OpId, DType, int64_t, int64_t>;
class QuantizeGrid : public ::testing::TestWithParam<QuantizeParam> {};

// Every quantizer; group spans in groups of 64 and 128 (k a multiple), the per-token-group ones also with
// column-major scales (ld = rows rounded up to 4, the padding left poisoned); per tensor dynamic and static (1.5 /
// qmax: saturating); blocks with partial edges (k 777, rows 7 and 300), also with the scales' rows padded as
// linear_fp8's block scales need them (fp8_block_scales_ld(k), the padding left poisoned).
TEST_P(QuantizeGrid, BitForBit) {
  const auto [op, dt, rows, k] = GetParam();
  const detail::ScaleSpan span = detail::scale_span(op);
  const bool groups = span == detail::ScaleSpan::group;
  for (int group : groups ? std::vector<int>{64, 128} : std::vector<int>{0})
    for (int64_t pad : {int64_t{0}, int64_t{8}})
      for (int variant : {0, 1}) {  // static scale (per tensor) / column-major scales (per-token-group)
        if (groups && k % group != 0) continue;
        QuantizeCase c{op, dt, rows, k, group, pad, static_cast<uint64_t>(rows + k + variant)};
        if (op == OpId::quantize_int4_groupwise) c.rows = layout_rows(4, rows);
        if (variant == 1 && span == detail::ScaleSpan::tensor)
          c.static_scale = true;
        else if (variant == 1 && groups && op != OpId::quantize_int4_groupwise)
          c.scales_ld = (rows + 3) / 4 * 4;
        else if (variant == 1 && span == detail::ScaleSpan::block)
          c.scales_ld = fp8_block_scales_ld(k);
        else if (variant == 1)
          continue;
        kernelkit::testing::expect_case(kernelkit::testing::run_quantize_case_cuda(c, 0), op, dt, c.name());
      }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QuantizeGrid,
    ::testing::Combine(::testing::Values(OpId::quantize_int8_per_channel, OpId::quantize_per_token_int8,
                                         OpId::quantize_per_token_fp8, OpId::quantize_int4_groupwise,
                                         OpId::quantize_per_tensor_int8, OpId::quantize_per_tensor_fp8,
                                         OpId::quantize_per_token_group_int8, OpId::quantize_per_token_group_fp8,
                                         OpId::quantize_blockwise_int8, OpId::quantize_blockwise_fp8),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16), ::testing::Values(1, 7, 300),
                       ::testing::Values(128, 777, 1024, 4096)));

// Shapes where the span kernels' loops and edges change: 128 x 128 blocks of one element, partial in both dims, a
// wave of blocks and more, odd row strides (scalar accesses); per tensor over more row groups than a wave (every block
// adds its max by the atomic) and over a few very long rows; groups over more words than a wave.
TEST(SpanQuantizers, EdgeShapesBitForBit) {
  struct Shape {
    OpId op;
    int64_t rows, k, pad;
    int group;
  };
  const Shape shapes[] = {
      {OpId::quantize_blockwise_fp8, 1, 1, 0, 0},
      {OpId::quantize_blockwise_fp8, 129, 129, 3, 0},
      {OpId::quantize_blockwise_int8, 257, 1000, 0, 0},
      {OpId::quantize_blockwise_fp8, 300, 4099, 1, 0},
      {OpId::quantize_blockwise_int8, 4100, 2048, 0, 0},
      {OpId::quantize_per_tensor_fp8, 70000, 16, 0, 0},
      {OpId::quantize_per_tensor_int8, 70000, 16, 0, 0},
      {OpId::quantize_per_tensor_fp8, 3, 100000, 5, 0},
      {OpId::quantize_per_tensor_int8, 4096, 4096, 8, 0},
      {OpId::quantize_per_token_group_fp8, 65537, 256, 0, 128},
      {OpId::quantize_per_token_group_int8, 4097, 704, 8, 64},
  };
  uint64_t seed = 91;
  for (const Shape& sh : shapes)
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      const QuantizeCase c{sh.op, dt, sh.rows, sh.k, sh.group, sh.pad, seed++};
      kernelkit::testing::expect_case(kernelkit::testing::run_quantize_case_cuda(c, 0), c.op, dt, c.name());
    }
}

// The dynamic per-tensor quantizer captured in a CUDA graph (the scale zeroed, the max and the codes on the stream:
// no synchronization, no allocation) and replayed on new inputs: each replay's scale and codes equal the reference's.
TEST(SpanQuantizers, DynamicPerTensorReplaysInACudaGraph) {
  if (!case_profile_has_fp8()) GTEST_SKIP() << "profile without FP8";
  const int64_t rows = 37, k = 1000;
  kernelkit::testing::DeviceBuffer x, q, s;
  ASSERT_TRUE(x.alloc(rows * k * 2).ok() && q.alloc(rows * k).ok() && s.alloc(4).ok());
  const Device d = Device::cuda(0);
  const TensorView xv = TensorView::contiguous(x.data(), DType::bf16, {rows, k}, d),
                   qv = TensorView::contiguous(q.data(), DType::f8e4m3, {rows, k}, d),
                   sv = TensorView::contiguous(s.data(), DType::f32, {1}, d);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(x.upload(kernelkit::testing::random_host(DType::bf16, rows * k, 1)).ok());
  ASSERT_TRUE(quantize_per_tensor_fp8(qv, sv, xv, false, stream).ok());  // warm-up outside the capture (plans)
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  const Status captured = quantize_per_tensor_fp8(qv, sv, xv, false, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint64_t seed : {2, 3}) {
    // Each input's largest magnitude differs (seed 3's values are 4x), so a scale left from the last run would show.
    const kernelkit::testing::HostBuffer h =
        kernelkit::testing::random_host(DType::bf16, rows * k, seed, 1.0 + 3.0 * (seed == 3));
    ASSERT_TRUE(x.upload(h).ok());
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    kernelkit::testing::HostBuffer q_got(DType::f8e4m3, rows * k), s_got(DType::f32, 1), q_want = q_got, s_want = s_got;
    ASSERT_TRUE(q.download(&q_got).ok() && s.download(&s_got).ok());
    ASSERT_TRUE(quantize_per_tensor_fp8(TensorView::contiguous(q_want.data(), DType::f8e4m3, {rows, k}),
                                        TensorView::contiguous(s_want.data(), DType::f32, {1}),
                                        TensorView::contiguous(const_cast<void*>(h.data()), DType::bf16, {rows, k}))
                    .ok());
    EXPECT_EQ(s_got.get(0), s_want.get(0)) << seed;
    EXPECT_EQ(std::memcmp(q_got.data(), q_want.data(), q_got.bytes()), 0) << seed;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// inf / NaN inputs and bad static scales: the activation quantizers record them (check_errors names the row, or the
// scale), the block weight quantizer waits and refuses at the call.
TEST(SpanQuantizers, NonFiniteInputsAndBadStaticScalesAreRecorded) {
  if (!case_profile_has_fp8()) GTEST_SKIP() << "profile without FP8";
  const Device d = Device::cuda(0);
  const int64_t rows = 6, k = 256;
  kernelkit::testing::DeviceBuffer w, q, s;
  ASSERT_TRUE(q.alloc(rows * k).ok() && s.alloc(rows * 2 * 4).ok());
  const TensorView qv = TensorView::contiguous(q.data(), DType::f8e4m3, {rows, k}, d);
  ASSERT_TRUE(check_errors(0).ok()) << "a record left over from an earlier test";
  const bool debug = debug_checks();
  set_debug_checks(false);
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    SCOPED_TRACE(bad);
    kernelkit::testing::HostBuffer h = kernelkit::testing::random_host(DType::f16, rows * k, 10);
    h.set(2 * k + 172, bad);
    ASSERT_TRUE(w.alloc(h.bytes()).ok() && w.upload(h).ok());
    const TensorView wv = TensorView::contiguous(w.data(), DType::f16, {rows, k}, d);
    const auto recorded = [](const Status& call, const std::string& want) {
      ASSERT_TRUE(call.ok()) << call.to_string();
      const Status found = check_errors(0);
      EXPECT_NE(found.message().find(want), std::string::npos) << found.to_string() << "\nwanted: " << want;
    };
    const TensorView s1 = TensorView::contiguous(s.data(), DType::f32, {1}, d);
    recorded(quantize_per_tensor_fp8(qv, s1, wv), "quantize_per_tensor_fp8: x row 2 holds inf or NaN");
    ASSERT_TRUE(s.upload([] {
                   kernelkit::testing::HostBuffer one(DType::f32, 1);
                   one.set(0, 0.01);
                   return one;
                 }())
                    .ok());
    recorded(quantize_per_tensor_fp8(qv, s1, wv, true), "quantize_per_tensor_fp8: x row 2 holds inf or NaN");
    recorded(quantize_per_token_group_fp8(qv, TensorView::contiguous(s.data(), DType::f32, {rows, 2}, d), wv),
             "quantize_per_token_group_fp8: x row 2 (scale group 1) holds inf or NaN");
    const Status refused = quantize_blockwise_fp8(qv, TensorView::contiguous(s.data(), DType::f32, {1, 2}, d), wv);
    EXPECT_NE(refused.message().find("quantize_blockwise_fp8: w row 2 holds inf or NaN"), std::string::npos)
        << refused.to_string();
    EXPECT_TRUE(check_errors(0).ok());
  }
  kernelkit::testing::HostBuffer h = kernelkit::testing::random_host(DType::f16, rows * k, 11);
  ASSERT_TRUE(w.upload(h).ok());
  const TensorView wv = TensorView::contiguous(w.data(), DType::f16, {rows, k}, d);
  for (double bad : {0.0, -1.0, HUGE_VAL, std::nan("")}) {
    kernelkit::testing::HostBuffer one(DType::f32, 1);
    one.set(0, bad);
    ASSERT_TRUE(s.upload(one).ok());
    ASSERT_TRUE(quantize_per_tensor_fp8(qv, TensorView::contiguous(s.data(), DType::f32, {1}, d), wv, true).ok());
    const Status found = check_errors(0);
    EXPECT_NE(found.message().find("quantize_per_tensor_fp8: scale = "), std::string::npos) << found.to_string();
    EXPECT_NE(found.message().find("must be finite and > 0 (a static scale)"), std::string::npos) << found.to_string();
  }
  set_debug_checks(debug);
}

// The ops fused with quantization record a static scale that is not finite and > 0 as the quantizers do (INT8
// codes: every profile).
TEST(FusedQuantizers, BadStaticScalesAreRecorded) {
  const Device d = Device::cuda(0);
  const int64_t rows = 5, k = 512;
  kernelkit::testing::DeviceBuffer x, res, q, s;
  const kernelkit::testing::HostBuffer h = kernelkit::testing::random_host(DType::f16, rows * k, 12);
  ASSERT_TRUE(x.alloc(h.bytes()).ok() && x.upload(h).ok() && res.alloc(h.bytes()).ok() && res.upload(h).ok());
  ASSERT_TRUE(q.alloc(rows * k).ok() && s.alloc(4).ok());
  const TensorView xv = TensorView::contiguous(x.data(), DType::f16, {rows, k}, d);
  const TensorView rv = TensorView::contiguous(res.data(), DType::f16, {rows, k}, d);
  const TensorView qv = TensorView::contiguous(q.data(), DType::i8, {rows, k}, d);
  const TensorView qg = TensorView::contiguous(q.data(), DType::i8, {rows, k / 2}, d);
  const TensorView sv = TensorView::contiguous(s.data(), DType::f32, {1}, d);
  ASSERT_TRUE(check_errors(0).ok()) << "a record left over from an earlier test";
  const bool debug = debug_checks();
  set_debug_checks(false);
  for (double bad : {0.0, -1.0, HUGE_VAL, std::nan("")}) {
    SCOPED_TRACE(bad);
    kernelkit::testing::HostBuffer one(DType::f32, 1);
    one.set(0, bad);
    ASSERT_TRUE(s.upload(one).ok());
    const auto recorded = [](const Status& call, const std::string& op) {
      ASSERT_TRUE(call.ok()) << call.to_string();
      const Status found = check_errors(0);
      EXPECT_NE(found.message().find(op + ": scale = "), std::string::npos) << found.to_string();
      EXPECT_NE(found.message().find("must be finite and > 0 (a static scale)"), std::string::npos)
          << found.to_string();
    };
    recorded(rms_norm_quant(qv, sv, xv, std::nullopt, 1e-6f, true), "rms_norm_quant_int8");
    recorded(fused_add_rms_norm_quant(qv, sv, xv, rv, std::nullopt, 1e-6f, true), "fused_add_rms_norm_quant_int8");
    recorded(silu_and_mul_quant(qg, sv, xv, true), "silu_and_mul_quant_int8");
  }
  set_debug_checks(debug);
}

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
// scales, with and without a bias, strided xq, one-row and decoder-sized layers; out += (beta = 1: the decoder layer's
// residual add) with both scalings; fast accumulation on one shape.
using Fp8Param = std::tuple<DType, int64_t, std::pair<int64_t, int64_t>>;
class Fp8LinearGrid : public ::testing::TestWithParam<Fp8Param> {};

TEST_P(Fp8LinearGrid, MatchesTheDotProducts) {
  const auto [dt, m, nk] = GetParam();
  for (bool per_tensor : {false, true}) {
    for (bool bias : {true, false}) {
      const kernelkit::testing::W8A8Case c{
          dt,        m, nk.first, nk.second, bias, bias ? 0 : 32, static_cast<uint64_t>(m + nk.first), OpId::linear_fp8,
          per_tensor};
      kernelkit::testing::expect_case(kernelkit::testing::run_w8a8_case(c, 0), OpId::linear_fp8, dt, c.name());
    }
    kernelkit::testing::W8A8Case acc{
        dt, m, nk.first, nk.second, !per_tensor, 0, static_cast<uint64_t>(m + 3), OpId::linear_fp8, per_tensor};
    acc.accumulate = true;
    kernelkit::testing::expect_case(kernelkit::testing::run_w8a8_case(acc, 0), OpId::linear_fp8, dt, acc.name());
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

namespace {
// linear_fp8 in `dt` under KERNELKIT_TUNE `setting` against the dot products: for each token count and (n, k), both
// scalings (row-wise with a bias; per tensor on a strided xq), then accumulating into out.
void expect_fp8_gemv(const char* setting, DType dt, std::initializer_list<int64_t> ms,
                     std::initializer_list<std::pair<int64_t, int64_t>> shapes, uint64_t seed) {
  const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
  for (int64_t m : ms)
    for (const auto [n, k] : shapes)
      for (bool per_tensor : {false, true}) {
        kernelkit::testing::W8A8Case c{
            dt,        m, n, k, !per_tensor, per_tensor ? 32 : 0, static_cast<uint64_t>(m + n) + seed, OpId::linear_fp8,
            per_tensor};
        for (bool accumulate : {false, true}) {
          c.accumulate = accumulate;
          kernelkit::testing::expect_case(kernelkit::testing::run_w8a8_case(c, 0), OpId::linear_fp8, dt,
                                          c.name() + " " + setting);
        }
      }
}
}  // namespace

class Fp8Gemv : public ::testing::TestWithParam<DType> {};

// fp8_gemv=1, one and two tokens on the weight-only GEMV over e4m3 codes: one 16-byte chunk a row (k 16), an odd
// number of chunks, and a decoder-sized layer.
TEST_P(Fp8Gemv, FmaGemvMatchesTheDotProducts) {
  expect_fp8_gemv("fp8_gemv=1", GetParam(), {1, 2}, {{8, 16}, {88, 528}, {4104, 4096}}, 0);
}

// fp8_gemv=2, up to 16 tokens on the FP8 tensor-core GEMV (m16n8k32 e4m3): one and two token tiles, full and partial;
// k with a partial last 128-value region (544), one region (128) and 4096; a partial last block of 16 rows. Profiles
// without FP8 refuse it (as expect_case knows).
TEST_P(Fp8Gemv, TensorCoreGemvMatchesTheDotProducts) {
  expect_fp8_gemv("fp8_gemv=2", GetParam(), {1, 2, 5, 8, 9, 16}, {{8, 128}, {88, 544}, {4104, 4096}}, 3);
}
INSTANTIATE_TEST_SUITE_P(Dtypes, Fp8Gemv, ::testing::Values(DType::f16, DType::bf16));

// linear_fp8 with block scales (linear_fp8_blockwise: cuBLASLt's VEC128_32F x BLK128x128_32F FP8 matmul) against the
// dot products of each 128-wide k block: every finite e4m3 code as input, x_scales token-major [k / 128][m] and
// w_scales in rows of fp8_block_scales_ld(k) (the layouts cuBLASLt reads), m 1 (decode), 16 and 129 (a partial tile),
// n 256 and 4096 + 64 (a partial last 128-row block), k 128 (one block: weight-scale rows padded from 1 to 4) and 4096;
// with a bias, without one on a strided xq, and out += with a bias. Profiles without FP8 refuse it (skipped), and so do
// FP8 profiles other than sm_90 (cuBLASLt has the block-scaled modes on Hopper only).
using Fp8BlockParam = std::tuple<DType, int64_t, std::pair<int64_t, int64_t>>;
class Fp8BlockwiseGrid : public ::testing::TestWithParam<Fp8BlockParam> {};

TEST_P(Fp8BlockwiseGrid, MatchesTheBlockDotProducts) {
  const auto [dt, m, nk] = GetParam();
  for (int variant : {0, 1, 2}) {  // with a bias; without one on a strided xq; out += with a bias
    const bool bias = variant != 1;
    kernelkit::testing::W8A8Case c{dt,
                                   m,
                                   nk.first,
                                   nk.second,
                                   bias,
                                   bias ? 0 : 32,
                                   static_cast<uint64_t>(m + nk.first + variant / 2),
                                   OpId::linear_fp8_blockwise};
    c.accumulate = variant == 2;
    const kernelkit::testing::CaseResult r = kernelkit::testing::run_w8a8_case(c, 0);
    const DeviceProfile& prof = kernelkit::testing::case_profile();
    if (prof.supports(DType::f8e4m3) && prof.sm != 90) {
      EXPECT_EQ(r.status.code(), StatusCode::unsupported) << c.name() << ": " << r.status.to_string();
      GTEST_SKIP() << c.name() << ": profile " << prof.key << " is not an sm_90 one (refused: " << r.status.message()
                   << ")";
    }
    kernelkit::testing::expect_case(r, OpId::linear_fp8_blockwise, dt, c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fp8BlockwiseGrid,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(1, 16, 129),
                                            ::testing::Values(std::pair<int64_t, int64_t>{256, 128},
                                                              std::pair<int64_t, int64_t>{256, 4096},
                                                              std::pair<int64_t, int64_t>{4160, 128},
                                                              std::pair<int64_t, int64_t>{4160, 4096})));

// The DeepSeek-V3 path on the GPU end to end: activations through quantize_per_token_group_fp8 (column-major scales,
// ld = m) and weights through quantize_blockwise_fp8 (scale rows padded to fp8_block_scales_ld(k)) on the GPU, then
// linear_fp8 with those block scales; the output against the CPU reference of linear_fp8 on the same codes and scales
// (copied back), within the FP8 sums' bound per block (as run_w8a8_case applies it).
TEST(Fp8BlockwiseLinear, QuantizersThenLinearOnTheGpu) {
  const DeviceProfile& prof = kernelkit::testing::case_profile();
  if (!prof.supports(DType::f8e4m3) || prof.sm != 90)
    GTEST_SKIP() << "profile " << prof.key << " has no block-scaled FP8 matmul (sm_90 only)";
  const int64_t m = 7, n = 4160, k = 1152, kb = k / 128, nb = (n + 127) / 128, w_ld = fp8_block_scales_ld(k);
  kernelkit::testing::HostBuffer x(DType::bf16, m * k), w(DType::bf16, n * k), bias(DType::bf16, n);
  std::mt19937_64 rng(101);
  std::uniform_real_distribution<double> ux(-3.0, 3.0), uw(-0.05, 0.05), ub(-0.5, 0.5);
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, ux(rng));
  for (int64_t i = 0; i < w.size(); ++i) w.set(i, uw(rng));
  for (int64_t i = 0; i < n; ++i) bias.set(i, ub(rng));
  kernelkit::testing::HostBuffer xq(DType::f8e4m3, m * k), wq(DType::f8e4m3, n * k), xs(DType::f32, kb * m),
      ws(DType::f32, nb * w_ld), got(DType::bf16, m * n), want(DType::bf16, m * n);
  const auto views = [&](const std::vector<void*>& p, Device d) {
    struct V {
      TensorView x, w, bias, xq, wq, xs, ws, out;
    };
    return V{TensorView::contiguous(p[0], DType::bf16, {m, k}, d),
             TensorView::contiguous(p[1], DType::bf16, {n, k}, d),
             TensorView::contiguous(p[2], DType::bf16, {n}, d),
             TensorView::contiguous(p[3], DType::f8e4m3, {m, k}, d),
             TensorView::contiguous(p[4], DType::f8e4m3, {n, k}, d),
             TensorView::contiguous(p[5], DType::f32, {kb, m}, d),
             TensorView::strided(p[6], DType::f32, {nb, kb}, {w_ld, 1}, d),
             TensorView::contiguous(p[7], DType::bf16, {m, n}, d)};
  };
  using kernelkit::testing::Role;
  // On the GPU: both quantizers, then the linear layer on their outputs (token-major x_scales: the transposed view).
  ASSERT_TRUE(kernelkit::testing::run_under_test(
                  {{&x, Role::in},
                   {&w, Role::in},
                   {&bias, Role::in},
                   {&xq, Role::out},
                   {&wq, Role::out},
                   {&xs, Role::out},
                   {&ws, Role::out},
                   {&got, Role::out}},
                  [&](const std::vector<void*>& p, Device d) -> Status {
                    const auto v = views(p, d);
                    KK_RETURN_IF_ERROR(quantize_per_token_group_fp8(v.xq, v.xs, v.x, 128, true));
                    KK_RETURN_IF_ERROR(quantize_blockwise_fp8(v.wq, v.ws, v.w));
                    const TensorView xs_t = TensorView::strided(p[5], DType::f32, {m, kb}, {1, m}, d);
                    return linear_fp8(v.out, v.xq, xs_t, v.wq, v.ws, v.bias);
                  },
                  0)
                  .ok());
  // The CPU reference on the codes and scales the GPU wrote.
  ASSERT_TRUE(linear_fp8(TensorView::contiguous(want.data(), DType::bf16, {m, n}),
                         TensorView::contiguous(xq.data(), DType::f8e4m3, {m, k}),
                         TensorView::strided(xs.data(), DType::f32, {m, kb}, {1, m}),
                         TensorView::contiguous(wq.data(), DType::f8e4m3, {n, k}),
                         TensorView::strided(ws.data(), DType::f32, {nb, kb}, {w_ld, 1}),
                         TensorView::contiguous(bias.data(), DType::bf16, {n}))
                  .ok());
  const Tolerance tol = output_tolerance(DType::bf16);
  const auto* xb = static_cast<const uint8_t*>(xq.data());
  const auto* wb = static_cast<const uint8_t*>(wq.data());
  int64_t bad = 0;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t r = 0; r < n; ++r) {
      double scaled_l1 = 0, scaled = 0;  // sum over blocks of s_b sum |products|, and of s_b sum products
      for (int64_t b = 0; b < kb; ++b) {
        double l1 = 0, dot = 0;
        for (int64_t j = b * 128; j < (b + 1) * 128; ++j) {
          const double p = static_cast<double>(e4m3_bits_to_float(xb[t * k + j])) * e4m3_bits_to_float(wb[r * k + j]);
          l1 += std::fabs(p);
          dot += p;
        }
        const double s = xs.get(b * m + t) * ws.get(r / 128 * w_ld + b);
        scaled_l1 += l1 * s;
        scaled += dot * s;
      }
      const double g = got.get(t * n + r), wv = want.get(t * n + r);
      const double allowed = tol.atol + tol.rtol * std::fabs(wv) +
                             std::ldexp(1.0, -22) * (std::fabs(scaled) + std::fabs(wv)) +
                             (std::ldexp(1.0, -13) * 4 + k * std::ldexp(1.0, -24)) * scaled_l1;
      if (!(std::fabs(g - wv) <= allowed) && bad++ < 5)
        ADD_FAILURE() << "out[" << t << ", " << r << "] = " << g << ", want " << wv << " (allowed " << allowed << ")";
    }
  EXPECT_EQ(bad, 0);
}

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
        const WeightOnlyCase c{DType::f16, bits, group, m, layout_rows(bits, 4101), 8320, true, m == 2 ? 8 : 0, seed++};
        kernelkit::testing::expect_case(kernelkit::testing::run_weight_only_case_cuda(c, 0), c.dtype,
                                        c.name() + " " + setting);
      }
  }
}
