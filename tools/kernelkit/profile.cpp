// `kernelkit profile`: Nsight Compute's key metrics for one launch of an op, each against the guide's good value, plus
// the theoretical occupancy of the planner's configuration (cudaOccupancyMaxActiveBlocksPerMultiprocessor). ncu runs
// this same binary in a hidden child mode that launches the op a few times; the clocks are left alone
// (--clock-control none). Without ncu it says so and prints the occupancy part.
#include <array>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/bench.hpp"
#include "ops/norm/norm_bench.hpp"

namespace kernelkit::cli {
namespace {

struct ProfileOptions {
  std::string op = "rms_norm", dtype, shape = "65536x4096", ncu;
  int device = 0;
  bool child = false;
};

// The A100 guide's metrics and what it calls good. `scale` turns a ratio into a percentage where needed.
struct Metric {
  const char* name;
  const char* label;
  const char* good;  // human-readable target
  double threshold;  // pass when value*scale >= threshold (0: informational)
  double scale;
};
constexpr std::array<Metric, 10> kMetrics = {{
    {"gpu__time_duration.sum", "duration (ns)", "", 0, 1},
    {"dram__bytes_read.sum", "DRAM bytes read", "", 0, 1},
    {"dram__bytes_write.sum", "DRAM bytes written", "", 0, 1},
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput % of peak", "> 70%", 70, 1},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput % of peak", "", 0, 1},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy %", "> 50%", 50, 1},
    {"lts__t_sector_hit_rate.pct", "L2 hit rate %", "> 60% (streaming ops read once: low is expected)", 0, 1},
    {"smsp__sass_average_data_bytes_per_wavefront_mem_shared.pct", "shared-memory efficiency %", "> 80%", 80, 1},
    {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "shared-memory bank conflicts", "", 0, 1},
    {"smsp__thread_inst_executed_per_inst_executed.ratio", "warp execution efficiency %", "> 90%", 90, 100.0 / 32},
}};

std::string find_ncu(const std::string& given) {
  if (!given.empty()) return given;
  for (const char* dir : {"/usr/local/cuda/bin", "/usr/bin", "/usr/local/bin"})
    if (std::filesystem::exists(std::string(dir) + "/ncu")) return std::string(dir) + "/ncu";
  if (std::system("command -v ncu >/dev/null 2>&1") == 0) return "ncu";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/opt/nvidia/nsight-compute", ec))
    if (std::filesystem::exists(e.path() / "ncu")) return (e.path() / "ncu").string();
  return "";
}

// Splits one CSV line (ncu quotes every field).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else cur += c;
  }
  out.push_back(cur);
  return out;
}

int run_profile(const ProfileOptions& o) {
  auto opid = parse_op(o.op);
  if (!opid || op_info(*opid).family != OpFamily::norm) {
    std::cerr << "error: --op '" << o.op << "' is not a norm op (profile covers the norm family so far)\n";
    return 2;
  }
  auto prof = resolve_profile("", o.device);
  if (!prof) return 1;
  const DType dt = o.dtype.empty() ? prof->recommended_half_dtype() : parse_dtype(o.dtype).value_or(DType::i8);
  if (!is_floating(dt)) {
    std::cerr << "error: --dtype '" << o.dtype << "' must be f32, f16 or bf16\n";
    return 2;
  }
  testing::BenchShape shape;
  {
    int64_t a = 0, b = 0, c = 0;
    const int n = std::sscanf(o.shape.c_str(), "%ldx%ldx%ld", &a, &b, &c);
    if (n == 2 && a > 0 && b > 0) shape = {a, b, 1, o.shape};
    else if (n == 3 && a > 0 && b > 0 && c > 0) shape = {a * b, c, a, o.shape};
    else {
      std::cerr << "error: --shape '" << o.shape << "' must be ROWSxHIDDEN or BATCHxSEQxHIDDEN\n";
      return 2;
    }
  }

  if (o.child) {  // launched under ncu: warm-up launch, then the profiled one
    testing::NormWorkload wl;
    Status s = wl.init(*opid, dt, shape, 1, o.device);
    for (int i = 0; s.ok() && i < 2; ++i) s = testing::call_norm_op(*opid, wl.views()[0], 1e-6f);
    if (s.ok()) s = testing::device_synchronize();
    if (!s.ok()) std::cerr << s.to_string() << "\n";
    return s.ok() ? 0 : 1;
  }

  LaunchPlan plan;
  if (Status s = plan_op(*prof, *opid, {shape.rows, shape.hidden, shape.batch, 16}, dt, &plan); !s.ok()) {
    std::cerr << s.to_string() << "\n";
    return 1;
  }
  std::cout << "kernelkit profile: " << o.op << " " << dtype_name(dt) << " " << o.shape << " on profile " << prof->key
            << "\nplan: " << plan.to_string() << "\n";
  int blocks = 0;
  if (Status s = kernel_occupancy(*opid, dt, plan, o.device, &blocks); s.ok()) {
    const double occ = 100.0 * blocks * plan.block_threads / prof->max_threads_per_sm;
    std::cout << "theoretical occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor): " << blocks
              << " blocks/SM x " << plan.block_threads << " threads = " << std::fixed << std::setprecision(0) << occ
              << "% (planner expected " << plan.blocks_per_sm << " blocks/SM)\n";
  } else {
    std::cout << "theoretical occupancy: " << s.to_string() << "\n";
  }

  const std::string ncu = find_ncu(o.ncu);
  if (ncu.empty()) {
    std::cout << "\nncu (Nsight Compute) not found: only the occupancy part above. Install Nsight Compute or pass "
                 "--ncu PATH for DRAM throughput, L2 hit rate, bank conflicts and warp efficiency.\n";
    return 0;
  }
  std::string metrics;
  for (const auto& m : kMetrics) metrics += (metrics.empty() ? "" : ",") + std::string(m.name);
  std::ostringstream cmd;
  cmd << ncu << " --clock-control none --kernel-name regex:row_norm_kernel --launch-skip 1 --launch-count 1"
      << " --csv --page raw --metrics " << metrics << " " << std::filesystem::read_symlink("/proc/self/exe").string()
      << " profile --child --op " << o.op << " --dtype " << dtype_name(dt) << " --shape " << o.shape << " --device "
      << o.device << " 2>&1";
  FILE* pipe = popen(cmd.str().c_str(), "r");
  if (!pipe) {
    std::cerr << "error: could not run " << ncu << "\n";
    return 1;
  }
  std::vector<std::string> lines(1);
  std::array<char, 8192> buf;
  while (fgets(buf.data(), buf.size(), pipe)) {  // a line may span several reads: join until its newline
    lines.back() += buf.data();
    if (!lines.back().empty() && lines.back().back() == '\n') lines.emplace_back();
  }
  const int rc = pclose(pipe);
  // CSV: a header row of metric names, a row of units, then one row per profiled kernel.
  std::vector<std::string> header, values;
  for (auto& l : lines) {
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    if (l.empty() || l[0] != '"') continue;
    auto f = csv_fields(l);
    if (header.empty()) header = f;
    else if (values.empty() && f.size() == header.size() && f[0] != header[0] && !f[0].empty()) values = f;
  }
  if (!values.empty() && values == header) values.clear();
  std::map<std::string, std::string> got;
  for (size_t i = 0; i < header.size() && i < values.size(); ++i) got[header[i]] = values[i];
  if (got.empty() || rc != 0) {
    std::cout << "\nncu did not return metrics (exit " << rc << "). Its output:\n";
    for (const auto& l : lines) std::cout << "  " << l << "\n";
    return 1;
  }
  std::cout << "\n" << std::left << std::setw(32) << "metric (ncu, one launch)" << std::right << std::setw(16) << "value"
            << "   " << std::left << std::setw(12) << "good when" << "verdict\n";
  for (const auto& m : kMetrics) {
    auto it = got.find(m.name);
    std::string v = it == got.end() ? "n/a" : it->second;
    double num = 0;
    bool numeric = false;
    try {
      std::string clean;
      for (char c : v)
        if (c != ',') clean += c;
      num = std::stod(clean) * m.scale;
      numeric = true;
    } catch (...) {
    }
    std::ostringstream val;
    if (numeric) val << std::fixed << std::setprecision(num >= 1000 ? 0 : 1) << num;
    else val << v;
    std::string verdict = m.threshold > 0 && numeric ? (num >= m.threshold ? "ok" : "LOW") : "";
    std::cout << std::left << std::setw(32) << m.label << std::right << std::setw(16) << val.str() << "   " << std::left
              << std::setw(12) << m.good << verdict << "\n";
  }
  const auto bytes = op_bytes(*opid, {shape.rows, shape.hidden, shape.batch, 16}, dt);
  std::cout << "\nminimal bytes (op table): " << bytes << "; DRAM bytes above should be close to it.\n";
  return 0;
}

}  // namespace

std::function<int()> add_profile(CLI::App& app) {
  auto o = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand("profile", "Nsight Compute metrics of one launch vs the guide's good values");
  cmd->add_option("--op", o->op, "Op to profile");
  cmd->add_option("--dtype", o->dtype, "f32, f16 or bf16 (default: the profile's recommended half type)");
  cmd->add_option("--shape", o->shape, "ROWSxHIDDEN or BATCHxSEQxHIDDEN");
  cmd->add_option("--device", o->device, "CUDA device index")->check(at_least(0));
  cmd->add_option("--ncu", o->ncu, "Path to ncu (default: search PATH, /usr/local/cuda/bin, /opt/nvidia)");
  cmd->add_flag("--child", o->child, "Internal: run the op for ncu")->group("");
  return [o] { return run_profile(*o); };
}

}  // namespace kernelkit::cli
