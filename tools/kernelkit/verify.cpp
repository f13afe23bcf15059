// `kernelkit verify`: every op against the reference over a grid of shapes and dtypes, as a pass/fail table.
//   --backend cuda: each case on the GPU vs the fp64 CPU reference, every element, outputs poisoned first.
//   --backend cpu:  no GPU needed: the CPU backend's own invariants (fused == composed, normalized statistics); the
//                   quantization cases run their GPU harness with the CPU backend on both sides.
// Exit status 1 on any failure, so scripts can gate on it.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "kernelkit/op_info.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/cases.hpp"

namespace kernelkit::cli {
namespace {

struct VerifyOptions {
  std::string backend = "auto";
  std::string op, dtype;
  int device = 0;
  bool quick = false;
  bool json = false;
  int jobs = default_jobs();
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
    std::cerr << "error: --op '" << o.op << "' is not an op; the ops are:";
    for (const OpInfo& op : op_table()) std::cerr << " " << op.name;
    std::cerr << "\n";
    return 2;
  }
  const testing::VerifyGrid grid{backend == "cuda", o.device, o.quick};

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::pair<OpId, DType>, Row> table;
  nlohmann::json failures = nlohmann::json::array();
  uint64_t seed = 1;
  auto record = [&](OpId op, DType dt, const std::string& case_name, const testing::CaseResult& res) {
    Row& row = table[{op, dt}];
    ++row.cases;
    // A refusal the profile calls for (bf16 on sm_75, an FP8 op below sm_89) is the right answer, not a failure.
    const auto fp8 = op_fp8_dtype(op);
    const bool expected_refusal = grid.cuda && res.status.code() == StatusCode::unsupported &&
                                  (!prof->supports(dt) || (fp8 && !prof->supports(*fp8)));
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
  // Every op of the registry in every dtype it takes: its family enumerates the cases (seeds in enumeration order).
  struct Job {
    OpId op;
    DType dtype;
    testing::VerifyCase c;
  };
  std::vector<Job> jobs;
  for (OpId op : ops)
    for (DType dt : dtypes) {
      if (!(op_info(op).dtypes & dtype_bit(dt))) continue;
      std::vector<testing::VerifyCase> cases;
      testing::verify_cases(op_info(op).family)(op, dt, grid, &seed, &cases);
      for (testing::VerifyCase& c : cases) jobs.push_back({op, dt, std::move(c)});
    }
  // The cases are independent (own inputs and buffers; the fp64 reference on the CPU is most of their time): a pool
  // of threads takes them costliest first (VerifyCase::work; the rest in enumeration order), so the longest ones
  // overlap the many short ones instead of running alone at the end, and the results are recorded in enumeration
  // order, so the report does not depend on the thread count.
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return jobs[a].c.work > jobs[b].c.work; });
  std::vector<testing::CaseResult> results(jobs.size());
  std::atomic<size_t> next{0}, done{0};
  const int threads = std::max(1, std::min<int>(o.jobs, static_cast<int>(jobs.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < jobs.size(); ++done) results[order[i]] = jobs[order[i]].c.run();
    });
  Progress progress("verify", jobs.size());
  while (done.load() < jobs.size()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const size_t d = done.load();
    const Job* at = d < jobs.size() ? &jobs[order[d]] : nullptr;  // about where the pool is
    progress.update(d,
                    at ? std::string(op_info(at->op).name) + " " + std::string(dtype_name(at->dtype)) : std::string());
  }
  for (std::thread& t : pool) t.join();
  progress.finish();
  for (size_t i = 0; i < jobs.size(); ++i) record(jobs[i].op, jobs[i].dtype, jobs[i].c.name, results[i]);

  int total = 0, bad = 0;
  if (!o.json) {
    std::cout << "\n"
              << std::left << std::setw(op_column_width()) << "op" << std::setw(6) << "dtype" << std::right
              << std::setw(7) << "cases" << std::setw(8) << "passed" << std::setw(9) << "refused" << std::setw(12)
              << "err/allowed"
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
      std::cout << std::left << std::setw(op_column_width()) << op_info(key.first).name << std::setw(6)
                << dtype_name(key.second) << std::right << std::setw(7) << row.cases << std::setw(8) << row.passed
                << std::setw(9) << row.refused << std::setw(12) << std::setprecision(3) << row.worst << "  " << result
                << "\n";
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
    std::cout << "\n(err/allowed: the worst element's |got - want| / (atol + rtol |want|), the tolerance used; "
                 "below 1 passes, docs/tolerances.md)\n"
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
  cmd->add_option("--device", o->device, "CUDA device index")->check(at_least(0));
  cmd->add_flag("--quick", o->quick, "A smaller shape grid");
  cmd->add_option("--jobs", o->jobs, "Cases run at once (default: the CPU's threads, at most 16)")->check(at_least(1));
  cmd->add_flag("--json", o->json, "Machine-readable output");
  return [o] { return run_verify(*o); };
}

}  // namespace kernelkit::cli
