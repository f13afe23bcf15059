// `kernelkit verify`: every op against the reference over a grid of shapes and dtypes, as a pass/fail table.
//   --backend cuda: each case on the GPU vs the fp64 CPU reference, every element, outputs poisoned first.
//   --backend cpu:  no GPU needed: the CPU backend's own invariants (fused == composed, normalized statistics); the
//                   quantization cases run their GPU harness with the CPU backend on both sides.
// Exit status 1 on any failure, so scripts can gate on it.
#include <array>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "kernelkit/op_info.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/harness.hpp"

namespace kernelkit::cli {
namespace {

struct VerifyOptions {
  std::string backend = "auto";
  std::string op, dtype;
  int device = 0;
  bool quick = false;
  bool json = false;
};

struct Row {
  int cases = 0, passed = 0, refused = 0;
  double worst = 0;
  std::string first_failure;
};

int run_verify(const VerifyOptions& o) {
  std::string backend = o.backend;
  if (backend == "auto") backend = cuda_device_count() > 0 ? "cuda" : "cpu";
  if (backend != "cuda" && backend != "cpu") {
    std::cerr << "error: --backend must be cuda, cpu or auto, got '" << o.backend << "'\n";
    return 2;
  }
  std::optional<DeviceProfile> prof;
  if (backend == "cuda") {
    if (cuda_device_count() == 0) {
      std::cerr << "error: --backend cuda needs a CUDA GPU and none is available"
                << (built_with_cuda() ? "" : " (this build has no CUDA)") << "\n";
      return 1;
    }
    prof = resolve_profile("", o.device);
    if (!prof) return 1;
    std::cout << "Verifying on cuda:" << o.device << " with profile " << prof->key << " (" << prof->source << ")\n";
  } else {
    std::cout << "Verifying the CPU backend (no GPU used): fused ops == composed ops, normalized statistics\n";
  }

  std::vector<DType> dtypes = {DType::f32, DType::f16, DType::bf16};
  if (!o.dtype.empty()) {
    auto d = parse_dtype(o.dtype);
    if (!d) {
      std::cerr << "error: --dtype '" << o.dtype << "' is not a dtype (f32, f16, bf16)\n";
      return 2;
    }
    dtypes = {*d};
  }
  std::vector<OpId> ops;
  for (const OpInfo& op : op_table())
    if (o.op.empty() || op.name == o.op) ops.push_back(op.id);
  if (ops.empty()) {
    std::cerr << "error: --op '" << o.op << "' is not an op\n";
    return 2;
  }
  std::vector<int64_t> rows = testing::grid_rows(), hidden = testing::grid_hidden();
  if (o.quick || backend == "cpu") rows = {1, 7, 83};  // the CPU backend is the reference itself: keep it quick
  if (o.quick) hidden = {64, 111, 769, 4096, 5125};

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::pair<OpId, DType>, Row> table;
  nlohmann::json failures = nlohmann::json::array();
  uint64_t seed = 1;
  auto record = [&](OpId op, DType dt, const std::string& case_name, const testing::CaseResult& res) {
    Row& row = table[{op, dt}];
    ++row.cases;
    // A refusal the profile calls for (bf16 on sm_75) is the right answer, not a failure.
    const bool expected_refusal =
        backend == "cuda" && res.status.code() == StatusCode::unsupported && !prof->supports(dt);
    if (expected_refusal)
      ++row.refused;
    else if (res.passed())
      ++row.passed;
    else {
      const std::string why =
          res.status.ok() ? std::to_string(res.mismatches) + " mismatches\n" + res.detail : res.status.to_string();
      if (row.first_failure.empty()) row.first_failure = case_name + ": " + why;
      failures.push_back({{"case", case_name}, {"why", why}});
    }
    row.worst = std::max(row.worst, res.worst_ratio);
  };
  const bool cuda = backend == "cuda";
  // One case of a row op at (rows r, hidden h, row padding pad): GPU vs reference, or the CPU backend's invariants.
  auto grid_case = [&](OpId op, DType dt, int64_t r, int64_t h, int64_t pad) {
    switch (op_info(op).family) {
      case OpFamily::softmax: {
        const testing::SoftmaxCase c{op, dt, r, h, op == OpId::causal_softmax ? r : 1, 0.125f, 8.0, pad, seed++};
        record(op, dt, c.name(),
               cuda ? testing::run_softmax_case_cuda(c, o.device) : testing::check_softmax_properties(c));
        break;
      }
      case OpFamily::activation: {
        const testing::ActivationCase c{op, dt, r, h, pad, 3.0, seed++};
        record(op, dt, c.name(),
               cuda ? testing::run_activation_case_cuda(c, o.device) : testing::check_activation_properties(c));
        break;
      }
      default: {
        testing::NormCase c;
        c.op = op;
        c.dtype = dt;
        c.rows = r;
        c.hidden = h;
        c.row_pad = pad;
        c.seed = seed++;
        record(op, dt, c.name(), cuda ? testing::run_norm_case_cuda(c, o.device) : testing::check_norm_properties(c));
      }
    }
  };
  for (OpId op : ops)
    for (DType dt : dtypes) {
      if (op_info(op).family == OpFamily::attention) {
        if (dt == DType::f32) continue;  // no f32 attention (refused as invalid_argument, not a profile matter)
        // (batch, s_q, s_k, heads, kv_heads): one token, GQA 4 and 8, s_q < s_k, s_q > s_k; a long one unless quick.
        std::vector<std::array<int64_t, 5>> shapes = {{2, 1, 1, 8, 8}, {2, 7, 7, 8, 2}, {1, 7, 127, 8, 1},
                                                      {1, 127, 33, 4, 4}};
        if (!o.quick && cuda) shapes.push_back({1, 1000, 1000, 4, 1});
        for (const auto& s : shapes)
          for (int64_t d : {int64_t{64}, int64_t{128}})
            for (bool causal : {false, true})
              for (int layout = 0; layout < 2; ++layout) {  // attention: dense / varlen; decode: contiguous / paged
                const bool decode = op == OpId::decode_attention;
                const testing::AttentionCase c{op, dt, s[0], decode ? std::min<int64_t>(s[1], 4) : s[1], s[2], s[3],
                                               s[4], d, causal, false, !decode && layout == 1, decode && layout == 1,
                                               1.0, seed++};
                record(op, dt, c.name(),
                       cuda ? testing::run_attention_case_cuda(c, o.device) : testing::check_attention_properties(c));
              }
        continue;
      }
      if (op_info(op).family == OpFamily::quant) {
        // Quantization's own grid: token counts of every GEMV tile and a tail, odd n, both INT4 groups; quantizers bit
        // for bit. The CPU backend runs the same harness with the CPU backend as the op under test (device -1), on
        // the small shapes only (its reference is m n k fp64 multiply-adds).
        const int dev = cuda ? o.device : -1;
        const bool small = o.quick || !cuda;
        if (op == OpId::linear_w8a8) {
          if (dt == DType::f32) continue;  // f16 / bf16 outputs only
          for (int64_t m : {1, 17, 300})
            for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 80}, {1031, 2048}}) {
              if (small && (m == 300 || n > 7)) continue;
              const testing::W8A8Case c{dt, m, n, k, m != 17, m == 17 ? 16 : 0, seed++};
              record(op, dt, c.name(), testing::run_w8a8_case(c, dev));
            }
        } else if (op == OpId::linear_w8a16 || op == OpId::linear_w4a16) {
          if (dt == DType::f32) continue;  // f16 / bf16 activations only
          const int bits = op_weight_bits(op);
          for (int group : bits == 8 ? std::vector<int>{0} : std::vector<int>{64, 128})
            for (int64_t m : {1, 3, 8, 64})
              for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 640}, {1031, 2048}}) {
                if (small && (m == 64 || n > 7)) continue;
                const testing::WeightOnlyCase c{dt, bits, group, m, n, k, m != 3, m == 3 ? 8 : 0, seed++};
                record(op, dt, c.name(), testing::run_weight_only_case_cuda(c, dev));
              }
        } else {
          const int group = op == OpId::quantize_int4_groupwise ? 128 : 0;
          for (int64_t r : {int64_t{1}, int64_t{7}, int64_t{83}})
            for (int64_t k : {int64_t{256}, int64_t{4096}}) {
              if (small && k > 256) continue;
              const testing::QuantizeCase c{op, dt, r, k, group, r == 7 ? 8 : 0, seed++};
              record(op, dt, c.name(), testing::run_quantize_case_cuda(c, dev));
            }
        }
        continue;
      }
      if (op_info(op).family == OpFamily::rope) {
        // RoPE's own grid: styles x (head_dim, rot_dim) x in place x tokens.
        constexpr int64_t kDims[][2] = {{64, 64}, {128, 128}, {128, 64}, {96, 24}};
        for (RopeStyle style : {RopeStyle::neox, RopeStyle::gptj})
          for (const auto& dims : kDims)
            for (bool in_place : {false, true})
              for (int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{83}}) {
                const testing::RopeCase c{dt, tokens, 8, 2, dims[0], dims[1], style, in_place, seed++};
                record(op, dt, c.name(),
                       cuda ? testing::run_rope_case_cuda(c, o.device) : testing::check_rope_properties(c));
              }
        continue;
      }
      for (int64_t r : rows)
        for (int64_t h : hidden) {
          grid_case(op, dt, r, h, 0);
          if (r == 83) grid_case(op, dt, r, h, 8);  // strided rows: one row count is enough to exercise the strides
        }
    }

  int total = 0, bad = 0;
  if (!o.json) {
    std::cout << "\n"
              << std::left << std::setw(27) << "op" << std::setw(6) << "dtype" << std::right << std::setw(7) << "cases"
              << std::setw(8) << "passed" << std::setw(9) << "refused" << std::setw(12) << "worst err"
              << "  result\n";
  }
  nlohmann::json rows_json = nlohmann::json::array();
  for (const auto& [key, row] : table) {
    const bool ok = row.passed + row.refused == row.cases;
    total += row.cases;
    bad += row.cases - row.passed - row.refused;
    const std::string result = ok ? (row.refused ? "REFUSED (as required: " + std::string(dtype_name(key.second)) +
                                                       " unsupported on " + prof->key + ")"
                                                 : "PASS")
                                  : "FAIL";
    rows_json.push_back({{"op", op_info(key.first).name},
                         {"dtype", dtype_name(key.second)},
                         {"cases", row.cases},
                         {"passed", row.passed},
                         {"refused", row.refused},
                         {"worst_error_ratio", row.worst},
                         {"result", result}});
    if (!o.json)
      std::cout << std::left << std::setw(27) << op_info(key.first).name << std::setw(6) << dtype_name(key.second)
                << std::right << std::setw(7) << row.cases << std::setw(8) << row.passed << std::setw(9) << row.refused
                << std::setw(12) << std::setprecision(3) << row.worst << "  " << result << "\n";
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    std::cout << nlohmann::json{{"backend", backend},
                                {"rows", rows_json},
                                {"failures", failures},
                                {"cases", total},
                                {"failed", bad}}
                     .dump(2)
              << "\n";
  } else {
    for (const auto& [key, row] : table)
      if (!row.first_failure.empty()) std::cout << "\nFirst failure: " << row.first_failure << "\n";
    std::cout << "\n(worst err = max |got - want| / (atol + rtol |want|); < 1 passes)\n"
              << total - bad << " passed, " << bad << " failed (" << std::fixed << std::setprecision(1) << secs
              << " s)\n";
  }
  return bad ? 1 : 0;
}

}  // namespace

std::function<int()> add_verify(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand("verify", "Check every op against the reference; non-zero exit on a failure");
  cmd->add_option("--backend", o->backend, "cuda (GPU vs fp64 reference), cpu (CPU backend invariants) or auto")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  cmd->add_option("--op", o->op, "Only this op");
  cmd->add_option("--dtype", o->dtype, "Only this dtype (f32, f16, bf16)");
  cmd->add_option("--device", o->device, "CUDA device index")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quick", o->quick, "A smaller shape grid");
  cmd->add_flag("--json", o->json, "Machine-readable output");
  return [o] { return run_verify(*o); };
}

}  // namespace kernelkit::cli
