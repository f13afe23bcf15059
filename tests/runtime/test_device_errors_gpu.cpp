// What the kernels check on the device. Index values only the device sees (a paged cache's block_table, seqlens_k,
// RoPE positions, write_kv_cache's slots, linear_weight_only's perm): a bad one is never followed, it is recorded and
// comes back from check_errors (or, in debug mode, from the call itself) naming the op, the argument, the index, the
// value and the bound; the record is then clear. Negative, == bound and huge values on each, both decode kernels, one
// split and several, and a CUDA-graph replay; packed varlen cu_seqlens given max_seqlen (not read back), on both
// prefill kernels. The quantizers' inputs: inf or NaN is refused at the call for weights, recorded for per-token
// activations. memcheck runs these too (gpu-check).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "expect_case.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;
using kernelkit::testing::DeviceBuffer;
using kernelkit::testing::HostBuffer;
using kernelkit::testing::random_host;
using kernelkit::testing::upload;

namespace {

// Debug mode for the scope (the GPU test binary runs with it on; these tests need it both ways).
class ScopedDebugChecks {
 public:
  explicit ScopedDebugChecks(bool on) : previous_(debug_checks()) { set_debug_checks(on); }
  ~ScopedDebugChecks() { set_debug_checks(previous_); }
  ScopedDebugChecks(const ScopedDebugChecks&) = delete;
  ScopedDebugChecks& operator=(const ScopedDebugChecks&) = delete;

 private:
  bool previous_;
};

// `call` runs an op with one bad index: with debug checks off it returns Ok and check_errors reports `want` once
// (then the record is clear); with them on the call itself reports it. Either way the next valid work is unaffected.
void expect_index_error(const std::function<Status()>& call, const std::string& want) {
  ASSERT_TRUE(check_errors(0).ok()) << "a record left over from an earlier test";
  {
    ScopedDebugChecks off(false);
    const Status s = call();
    ASSERT_TRUE(s.ok()) << s.to_string();
    const Status found = check_errors(0);
    EXPECT_EQ(found.code(), StatusCode::invalid_argument) << found.to_string();
    EXPECT_NE(found.message().find(want), std::string::npos) << found.message() << "\nwanted: " << want;
    EXPECT_NE(found.message().find("found on cuda:0"), std::string::npos) << found.message();
    EXPECT_TRUE(check_errors(0).ok()) << "check_errors did not clear the record";
  }
  {
    ScopedDebugChecks on(true);
    const Status s = call();
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message() << "\nwanted: " << want;
    EXPECT_TRUE(check_errors(0).ok());
  }
}

// A fresh random f16 [rows, k] tensor on the GPU holding `bad` at element `at`.
DeviceBuffer f16_with(int64_t rows, int64_t k, uint64_t seed, int64_t at, double bad) {
  HostBuffer h = random_host(DType::f16, rows * k, seed);
  h.set(at, bad);
  return upload(h);
}

HostBuffer ints(DType dt, const std::vector<int64_t>& v) {
  HostBuffer h(dt, static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::i64) static_cast<int64_t*>(h.data())[i] = v[i];
    else static_cast<int32_t*>(h.data())[i] = static_cast<int32_t>(v[i]);
  }
  return h;
}

// A paged decode problem: batch 2, 1 query token, 4 heads over 2 KV heads, head_dim 64, 4 pages of 16 keys, two
// pages a sequence (capacity 32), f16.
struct PagedDecode {
  static constexpr int64_t kBatch = 2, kHeads = 4, kKvHeads = 2, kDim = 64, kPages = 4, kMaxPages = 2;
  DeviceBuffer q = upload(random_host(DType::f16, kBatch * kHeads * kDim, 1));
  DeviceBuffer k = upload(random_host(DType::f16, kPages * 16 * kKvHeads * kDim, 2));
  DeviceBuffer v = upload(random_host(DType::f16, kPages * 16 * kKvHeads * kDim, 3));
  DeviceBuffer out, table, lens;
  PagedDecode() {
    EXPECT_TRUE(out.alloc(kBatch * kHeads * kDim * 2).ok());
    EXPECT_TRUE(table.alloc(kBatch * kMaxPages * 4).ok());
    EXPECT_TRUE(lens.alloc(kBatch * 4).ok());
  }

  Status run(const std::vector<int64_t>& block_table, const std::vector<int64_t>& seqlens, Stream stream = nullptr) {
    set_table(block_table);
    EXPECT_TRUE(lens.upload(ints(DType::i32, seqlens)).ok());
    return launch(stream);
  }
  void set_table(const std::vector<int64_t>& block_table) {
    EXPECT_TRUE(table.upload(ints(DType::i32, block_table)).ok());
  }
  Status launch(Stream stream = nullptr) const {
    const Device d = Device::cuda(0);
    const KvCache cache{TensorView::contiguous(k.data(), DType::f16, {kPages, 16, kKvHeads, kDim}, d),
                        TensorView::contiguous(v.data(), DType::f16, {kPages, 16, kKvHeads, kDim}, d),
                        TensorView::contiguous(table.data(), DType::i32, {kBatch, kMaxPages}, d),
                        TensorView::contiguous(lens.data(), DType::i32, {kBatch}, d)};
    return decode_attention(TensorView::contiguous(out.data(), DType::f16, {kBatch, 1, kHeads, kDim}, d),
                            std::nullopt, TensorView::contiguous(q.data(), DType::f16, {kBatch, 1, kHeads, kDim}, d),
                            cache, {}, stream);
  }
  std::vector<uint16_t> sequence_out(int64_t b) const {
    HostBuffer h(DType::f16, kBatch * kHeads * kDim);
    EXPECT_TRUE(out.download(&h).ok());
    const auto* p = static_cast<const uint16_t*>(h.data()) + b * kHeads * kDim;
    return {p, p + kHeads * kDim};
  }
};

// The decode kernels the planner can pick: tensor cores or CUDA cores, one split or several.
constexpr const char* kDecodeKernels[] = {"decode_tc=1", "decode_tc=0", "decode_tc=1,decode_splits=1",
                                          "decode_tc=0,decode_splits=7"};

}  // namespace

TEST(GpuIndexCheck, PagedBlockTableOutsideTheCache) {
  for (const char* tune : kDecodeKernels) {
    SCOPED_TRACE(tune);
    const kernelkit::testing::ScopedEnv env("KERNELKIT_TUNE", tune);
    PagedDecode p;
    ASSERT_TRUE(p.run({0, 1, 2, 3}, {20, 30}).ok());
    ASSERT_TRUE(check_errors(0).ok());
    const std::vector<uint16_t> first = p.sequence_out(0);
    for (int64_t bad : {int64_t{99}, int64_t{-1}, int64_t{4}, int64_t{std::numeric_limits<int32_t>::max()},
                        int64_t{std::numeric_limits<int32_t>::min()}}) {
      expect_index_error([&] { return p.run({0, 1, 2, bad}, {20, 30}); },
                         "decode_attention: cache.block_table[1, 1] = " + std::to_string(bad) +
                             " must be a page in [0, 4)");
      EXPECT_EQ(p.sequence_out(0), first) << "the other sequence's output changed";
    }
    // An entry past the sequence's length is never read, so it may hold anything.
    ASSERT_TRUE(p.run({0, 1, 2, 99}, {20, 16}).ok());
    EXPECT_TRUE(check_errors(0).ok());
  }
}

TEST(GpuIndexCheck, SeqlensOutsideTheCapacity) {
  for (const char* tune : kDecodeKernels) {
    SCOPED_TRACE(tune);
    const kernelkit::testing::ScopedEnv env("KERNELKIT_TUNE", tune);
    PagedDecode paged;
    for (int64_t bad : {int64_t{33}, int64_t{-1}, int64_t{std::numeric_limits<int32_t>::max()}})
      expect_index_error([&] { return paged.run({0, 1, 2, 3}, {20, bad}); },
                         "decode_attention: cache.seqlens_k[1] = " + std::to_string(bad) +
                             " must be in [0, 32] (the cache capacity)");
    EXPECT_TRUE(paged.run({0, 1, 2, 3}, {0, 32}).ok());  // both ends of the range are valid
    EXPECT_TRUE(check_errors(0).ok());

    // A contiguous cache of capacity 64 and a length of 1000.
    const Device d = Device::cuda(0);
    DeviceBuffer q = upload(random_host(DType::f16, 4 * 64, 4)), out;
    DeviceBuffer k = upload(random_host(DType::f16, 64 * 2 * 64, 5));
    DeviceBuffer v = upload(random_host(DType::f16, 64 * 2 * 64, 6));
    ASSERT_TRUE(out.alloc(4 * 64 * 2).ok());
    DeviceBuffer lens = upload(ints(DType::i32, {1000}));
    const KvCache cache{TensorView::contiguous(k.data(), DType::f16, {1, 64, 2, 64}, d),
                        TensorView::contiguous(v.data(), DType::f16, {1, 64, 2, 64}, d), std::nullopt,
                        TensorView::contiguous(lens.data(), DType::i32, {1}, d)};
    expect_index_error(
        [&] {
          return decode_attention(TensorView::contiguous(out.data(), DType::f16, {1, 1, 4, 64}, d), std::nullopt,
                                  TensorView::contiguous(q.data(), DType::f16, {1, 1, 4, 64}, d), cache);
        },
        "decode_attention: cache.seqlens_k[0] = 1000 must be in [0, 64] (the cache capacity)");
  }
}

TEST(GpuIndexCheck, RopePositionsOutsideTheCache) {
  // 3 tokens, 4 + 2 heads of 64, a 100-row f32 cos / sin cache; token 1's position is the bad one.
  const Device d = Device::cuda(0);
  DeviceBuffer q = upload(random_host(DType::f16, 3 * 4 * 64, 7)), k = upload(random_host(DType::f16, 3 * 2 * 64, 8));
  DeviceBuffer cache = upload(random_host(DType::f32, 100 * 64, 9));
  for (DType pdt : {DType::i32, DType::i64}) {
    const int64_t huge = pdt == DType::i64 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
    for (int64_t bad : {int64_t{5000}, int64_t{-1}, int64_t{100}, huge}) {
      SCOPED_TRACE(std::string(dtype_name(pdt)) + " " + std::to_string(bad));
      DeviceBuffer pos = upload(ints(pdt, {3, bad, 99}));
      expect_index_error(
          [&] {
            const auto qv = TensorView::contiguous(q.data(), DType::f16, {3, 4, 64}, d);
            const auto kv = TensorView::contiguous(k.data(), DType::f16, {3, 2, 64}, d);
            return rotary_embedding(qv, kv, qv, kv, TensorView::contiguous(pos.data(), pdt, {3}, d),
                                    TensorView::contiguous(cache.data(), DType::f32, {100, 64}, d), RopeStyle::neox);
          },
          "rotary_embedding: positions[1] = " + std::to_string(bad) + " is outside the cache [0, 100)");
    }
  }
}

TEST(GpuIndexCheck, KvWriteSlotsOutsideTheCache) {
  // 3 tokens of 2 KV heads of 64 into a [4, 4, 2, 64] cache (16 slots); token 1's slot is the bad one; with RoPE its
  // position too. The recorded slot's rows are never written (the cache keeps its bits).
  const Device d = Device::cuda(0);
  const HostBuffer cache_h = random_host(DType::f16, 4 * 4 * 2 * 64, 21);
  DeviceBuffer k = upload(random_host(DType::f16, 3 * 2 * 64, 22)), v = upload(random_host(DType::f16, 3 * 2 * 64, 23));
  DeviceBuffer kc = upload(cache_h), vc = upload(cache_h), q = upload(random_host(DType::f16, 3 * 4 * 64, 24));
  DeviceBuffer table = upload(random_host(DType::f32, 100 * 64, 25));
  auto call = [&](DType sdt, const DeviceBuffer& slots, const DeviceBuffer* pos) {
    std::optional<KvWriteRope> rope;
    if (pos) {
      const auto qv = TensorView::contiguous(q.data(), DType::f16, {3, 4, 64}, d);
      rope = KvWriteRope{qv, qv, TensorView::contiguous(pos->data(), DType::i64, {3}, d),
                         TensorView::contiguous(table.data(), DType::f32, {100, 64}, d)};
    }
    return write_kv_cache(TensorView::contiguous(kc.data(), DType::f16, {4, 4, 2, 64}, d),
                          TensorView::contiguous(vc.data(), DType::f16, {4, 4, 2, 64}, d),
                          TensorView::contiguous(k.data(), DType::f16, {3, 2, 64}, d),
                          TensorView::contiguous(v.data(), DType::f16, {3, 2, 64}, d),
                          TensorView::contiguous(slots.data(), sdt, {3}, d), rope);
  };
  for (DType sdt : {DType::i32, DType::i64}) {
    const int64_t huge = sdt == DType::i64 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
    for (int64_t bad : {int64_t{-2}, int64_t{16}, huge}) {
      SCOPED_TRACE(std::string(dtype_name(sdt)) + " " + std::to_string(bad));
      DeviceBuffer slots = upload(ints(sdt, {15, bad, -1}));
      expect_index_error(
          [&] { return call(sdt, slots, nullptr); },
          "write_kv_cache: slot_mapping[1] = " + std::to_string(bad) + " must be -1 (skip) or a cache slot in [0, 16)");
      HostBuffer back(DType::f16, cache_h.size());
      ASSERT_TRUE(kc.download(&back).ok());
      for (int64_t i = 0; i < 15 * 2 * 64; ++i) ASSERT_EQ(back.get(i), cache_h.get(i)) << i;  // slots 0..14 intact
    }
  }
  DeviceBuffer slots = upload(ints(DType::i64, {3, 4, 5})), pos = upload(ints(DType::i64, {3, 100, 99}));
  expect_index_error([&] { return call(DType::i64, slots, &pos); },
                     "write_kv_cache: positions[1] = 100 is outside the cache [0, 100)");
}

// linear_weight_only's act-order perm: an entry outside [0, k) on the GEMV (1 token) and the tensor-core path (5
// tokens), i32 and i64; the gather reads no x for it.
TEST(GpuIndexCheck, WeightOnlyPermOutsideTheInputs) {
  const Device d = Device::cuda(0);
  const int64_t n = 16, k = 128, group = 64;
  DeviceBuffer x = upload(random_host(DType::f16, 5 * k, 41)), q = upload(random_host(DType::i8, n * k / 2, 42));
  DeviceBuffer s = upload(random_host(DType::f32, n * k / group, 43)), out;
  ASSERT_TRUE(out.alloc(5 * n * 2).ok());
  for (DType pdt : {DType::i32, DType::i64})
    for (int64_t m : {1, 5})
      for (int64_t bad : {int64_t{-1}, k, int64_t{std::numeric_limits<int32_t>::max()}}) {
        SCOPED_TRACE(std::string(dtype_name(pdt)) + " m" + std::to_string(m) + " " + std::to_string(bad));
        std::vector<int64_t> perm(k);
        for (int64_t j = 0; j < k; ++j) perm[j] = k - 1 - j;
        perm[70] = bad;
        DeviceBuffer p = upload(ints(pdt, perm));
        expect_index_error(
            [&] {
              return linear_weight_only(TensorView::contiguous(out.data(), DType::f16, {m, n}, d),
                                        TensorView::contiguous(x.data(), DType::f16, {m, k}, d),
                                        TensorView::contiguous(q.data(), DType::i4x2, {n, k / 2}, d),
                                        TensorView::contiguous(s.data(), DType::f32, {n, k / group}, d), 4, group,
                                        std::nullopt, nullptr, false, std::nullopt,
                                        TensorView::contiguous(p.data(), pdt, {k}, d));
            },
            "linear_w4a16: perm[70] = " + std::to_string(bad) + " must be an input of x in [0, k = 128)");
      }
}

// A packed varlen prefill given max_seqlen_q / k, so nothing is read back: 3 sequences of (5, 7), (0, 2), (7, 11)
// query / key tokens, 4 heads over 2 KV heads, head_dim 64, f16, causal.
struct VarlenPrefill {
  static constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 64, kTotalQ = 12, kTotalK = 20;
  DeviceBuffer q = upload(random_host(DType::f16, kTotalQ * kHeads * kDim, 11));
  DeviceBuffer k = upload(random_host(DType::f16, kTotalK * kKvHeads * kDim, 12));
  DeviceBuffer v = upload(random_host(DType::f16, kTotalK * kKvHeads * kDim, 13));
  DeviceBuffer out, cu_q, cu_k;
  VarlenPrefill() {
    EXPECT_TRUE(out.alloc(kTotalQ * kHeads * kDim * 2).ok());
    EXPECT_TRUE(cu_q.alloc(4 * 4).ok());
    EXPECT_TRUE(cu_k.alloc(4 * 4).ok());
  }

  Status run(const std::vector<int64_t>& cq, const std::vector<int64_t>& ck, std::optional<int64_t> max_q = 7,
             std::optional<int64_t> max_k = 11) {
    EXPECT_TRUE(cu_q.upload(ints(DType::i32, cq)).ok());
    EXPECT_TRUE(cu_k.upload(ints(DType::i32, ck)).ok());
    const Device d = Device::cuda(0);
    AttentionOptions o;
    o.causal = true;
    o.cu_seqlens_q = TensorView::contiguous(cu_q.data(), DType::i32, {3 + 1}, d);
    o.cu_seqlens_k = TensorView::contiguous(cu_k.data(), DType::i32, {3 + 1}, d);
    o.max_seqlen_q = max_q;
    o.max_seqlen_k = max_k;
    return attention(TensorView::contiguous(out.data(), DType::f16, {kTotalQ, kHeads, kDim}, d), std::nullopt,
                     TensorView::contiguous(q.data(), DType::f16, {kTotalQ, kHeads, kDim}, d),
                     TensorView::contiguous(k.data(), DType::f16, {kTotalK, kKvHeads, kDim}, d),
                     TensorView::contiguous(v.data(), DType::f16, {kTotalK, kKvHeads, kDim}, d), o);
  }
  std::vector<uint16_t> first_sequence_out() const {  // its 5 query tokens
    HostBuffer h(DType::f16, kTotalQ * kHeads * kDim);
    EXPECT_TRUE(out.download(&h).ok());
    const auto* p = static_cast<const uint16_t*>(h.data());
    return {p, p + 5 * kHeads * kDim};
  }
};

TEST(GpuIndexCheck, VarlenCuSeqlensCheckedOnTheDevice) {
  const std::vector<int64_t> cq = {0, 5, 5, 12}, ck = {0, 7, 9, 20};
  const int64_t huge = std::numeric_limits<int32_t>::max();
  // The planner's choice (on sm_90 the wgmma kernel), and the mma.sync kernel.
  for (const char* tune : {static_cast<const char*>(nullptr), "attn_wgmma=0"}) {
    SCOPED_TRACE(tune ? tune : "default");
    const kernelkit::testing::ScopedEnv env("KERNELKIT_TUNE", tune);
    VarlenPrefill p;
    ASSERT_TRUE(p.run(cq, ck, std::nullopt, std::nullopt).ok());  // read back and checked on the host
    const std::vector<uint16_t> want = p.first_sequence_out();
    ASSERT_TRUE(p.run(cq, ck).ok());
    ASSERT_TRUE(check_errors(0).ok());
    EXPECT_EQ(p.first_sequence_out(), want) << "max_seqlen changed the result";
    ASSERT_TRUE(p.run(cq, ck, 12, 20).ok());  // a max above the longest is valid
    EXPECT_TRUE(check_errors(0).ok());
    EXPECT_EQ(p.first_sequence_out(), want);
    // One bad entry each (the maxes at the packed counts, so only the entry is wrong): decreasing, negative, past
    // the count, huge, a first entry not 0, a last not the count; then a key entry; then a max below the longest.
    const struct {
      std::vector<int64_t> cq, ck;
      int64_t max_q, max_k;
      std::string want;
    } cases[] = {
        {{0, 5, 4, 12}, ck, 12, 20, "options.cu_seqlens_q[2] = 4 breaks the rise from 0 to total_q = 12"},
        {{0, -3, 5, 12}, ck, 12, 20, "options.cu_seqlens_q[1] = -3 breaks the rise from 0 to total_q = 12"},
        {{0, 5, 13, 12}, ck, 12, 20, "options.cu_seqlens_q[2] = 13 breaks the rise from 0 to total_q = 12"},
        {{0, 5, huge, 12}, ck, 12, 20,
         "options.cu_seqlens_q[2] = " + std::to_string(huge) + " breaks the rise from 0 to total_q = 12"},
        {{2, 5, 5, 12}, ck, 12, 20, "options.cu_seqlens_q[0] = 2 breaks the rise from 0 to total_q = 12"},
        {{0, 5, 5, 11}, ck, 12, 20, "options.cu_seqlens_q[3] = 11 breaks the rise from 0 to total_q = 12"},
        {cq, {0, 7, 21, 20}, 12, 20, "options.cu_seqlens_k[2] = 21 breaks the rise from 0 to total_k = 20"},
        {cq, ck, 6, 11, "sequence 2 has 7 query tokens, more than options.max_seqlen_q = 6"},
        {cq, ck, 7, 10, "sequence 2 has 11 key tokens, more than options.max_seqlen_k = 10"},
    };
    for (const auto& c : cases) {
      expect_index_error([&] { return p.run(c.cq, c.ck, c.max_q, c.max_k); }, "attention: " + c.want);
      if (c.cq[1] == 5 && c.ck[1] == 7 && c.cq[0] == 0)  // sequence 0's span is intact: its output is too
        EXPECT_EQ(p.first_sequence_out(), want) << c.want;
    }
  }
}

TEST(GpuIndexCheck, RecordedUnderCudaGraphReplay) {
  // The record is a fixed device variable: a captured decode with a bad page records on every replay, and the
  // capture itself is not disturbed (debug mode skips its wait while the stream is capturing). Relaxed capture: the
  // C++ API checks its pointers with cudaPointerGetAttributes (the PyTorch binding, which skips that, is tested
  // under torch.cuda.graph's global mode in pytest).
  ScopedDebugChecks on(true);
  PagedDecode p;
  ASSERT_TRUE(p.run({0, 1, 2, 3}, {20, 30}).ok());  // warm-up outside the capture (plans, occupancy)
  p.set_table({0, 1, 2, 77});
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  const Status captured = p.launch(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    const Status s = check_errors(0);
    EXPECT_NE(s.message().find("cache.block_table[1, 1] = 77 must be a page in [0, 4)"), std::string::npos)
        << s.to_string();
  }
  EXPECT_TRUE(check_errors(0).ok());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(GpuValueCheck, QuantizersRefuseNonFiniteInputs) {
  // w / x [16, 256] f16 (16 rows: one row tile of the INT4 layout) with one non-finite value at row 2, column 172 (in
  // int4 scale group 1 of 128).
  const Device d = Device::cuda(0);
  const int64_t rows = 16, k = 256;
  DeviceBuffer q, scales, q4, scales4;
  ASSERT_TRUE(q.alloc(rows * k).ok());
  ASSERT_TRUE(scales.alloc(rows * 4).ok());
  ASSERT_TRUE(q4.alloc(rows * k / 2).ok());
  ASSERT_TRUE(scales4.alloc(rows * (k / 128) * 4).ok());
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    SCOPED_TRACE(bad);
    DeviceBuffer w = f16_with(rows, k, 10, 2 * k + 172, bad);
    const auto wv = TensorView::contiguous(w.data(), DType::f16, {rows, k}, d);
    ASSERT_TRUE(check_errors(0).ok());
    {
      ScopedDebugChecks off(false);  // the weight quantizers wait and check on their own
      Status s = quantize_int8_per_channel(TensorView::contiguous(q.data(), DType::i8, {rows, k}, d),
                                           TensorView::contiguous(scales.data(), DType::f32, {rows}, d), wv);
      EXPECT_NE(s.message().find("quantize_int8_per_channel: w row 2 holds inf or NaN"), std::string::npos)
          << s.to_string();
      s = quantize_int4_groupwise(TensorView::contiguous(q4.data(), DType::i4x2, {rows, k / 2}, d),
                                  TensorView::contiguous(scales4.data(), DType::f32, {rows, k / 128}, d), wv, 128);
      EXPECT_NE(s.message().find("w row 2 (scale group 1) holds inf or NaN"), std::string::npos) << s.to_string();
      EXPECT_TRUE(check_errors(0).ok());
    }
    expect_index_error(
        [&] {
          return quantize_per_token_int8(TensorView::contiguous(q.data(), DType::i8, {rows, k}, d),
                                         TensorView::contiguous(scales.data(), DType::f32, {rows}, d), wv);
        },
        "x row 2 holds inf or NaN; quantization needs finite values");
  }
}

TEST(GpuValueCheck, FusedQuantizersRecordNonFiniteRows) {
  // The ops fused with a dynamic per-token scale record a row whose values (after the norm / activation) hold inf or
  // NaN, as quantize_per_token does; x [6, 256] f16, the bad value at row 2, column 100 (silu_and_mul's a half).
  const Device d = Device::cuda(0);
  const int64_t rows = 6, k = 256;
  DeviceBuffer q, scales;
  ASSERT_TRUE(q.alloc(rows * k).ok());
  ASSERT_TRUE(scales.alloc(rows * 4).ok());
  const HostBuffer r = random_host(DType::f16, rows * k, 12);
  DeviceBuffer residual = upload(r);
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    SCOPED_TRACE(bad);
    DeviceBuffer x = f16_with(rows, k, 11, 2 * k + 100, bad);
    const auto xv = TensorView::contiguous(x.data(), DType::f16, {rows, k}, d);
    const auto qv = TensorView::contiguous(q.data(), DType::i8, {rows, k}, d);
    const auto sv = TensorView::contiguous(scales.data(), DType::f32, {rows}, d);
    const std::string row2 = "x row 2 holds inf or NaN; quantization needs finite values";
    expect_index_error([&] { return rms_norm_quant(qv, sv, xv, std::nullopt, 1e-6f); }, "rms_norm_quant_int8: " + row2);
    expect_index_error(
        [&] {
          KK_RETURN_IF_ERROR(residual.upload(r));  // fresh each call: the op adds x into it
          return fused_add_rms_norm_quant(qv, sv, xv, TensorView::contiguous(residual.data(), DType::f16, {rows, k}, d),
                                          std::nullopt, 1e-6f);
        },
        "fused_add_rms_norm_quant_int8: " + row2);
    expect_index_error(
        [&] {
          return silu_and_mul_quant(TensorView::contiguous(q.data(), DType::i8, {rows, k / 2}, d), sv, xv);
        },
        "silu_and_mul_quant_int8: " + row2);
  }
}
