// `kernelkit bench`: every op over the default suite of shapes and every dtype this GPU supports, timed by the
// protocol in DESIGN.md (src/testing/bench.cpp), reported as median time, GB/s and % of the copy ceiling measured in
// the same run, with the seed's assessment, the arithmetic intensity and the bound. --json, --markdown and --svg write
// the same results for reports.
#include <algorithm>
#include <map>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/bench.hpp"

namespace kernelkit::cli {
namespace {

using testing::BenchResult;
using testing::BenchShape;

struct BenchOptions {
  std::vector<std::string> ops, dtypes, shapes;
  bool quick = false, l2_window = false;
  int runs = 100;
  int device = 0;
  std::string json, markdown, svg, commit, report;
};

// The default suite: LLM token counts x hidden sizes, and the diffusion shapes of the HF cuda-kernels RMSNorm table.
std::vector<BenchShape> default_suite(bool quick) {
  std::vector<BenchShape> s;
  const std::vector<int64_t> tokens = quick ? std::vector<int64_t>{1, 2048, 65536}
                                            : std::vector<int64_t>{1, 16, 128, 2048, 16384, 65536};
  const std::vector<int64_t> hidden = quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{2048, 4096, 8192};
  for (int64_t t : tokens)
    for (int64_t h : hidden) s.push_back({t, h, 1, std::to_string(t) + "x" + std::to_string(h)});
  const int64_t diffusion[][3] = {{1, 1024, 2048}, {2, 1024, 2048}, {4, 1024, 2048}, {2, 4096, 3072}, {4, 4096, 3072}};
  for (const auto& d : diffusion) {
    if (quick && d[0] != 2) continue;
    s.push_back({d[0] * d[1], d[2], d[0],
                 std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2])});
  }
  return s;
}

// "4096x8192" (rows x hidden) or "2x4096x3072" (batch x seq x hidden).
std::optional<BenchShape> parse_shape(const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    try {
      v.push_back(std::stoll(part));
    } catch (...) {
      return std::nullopt;
    }
  }
  if (v.size() == 2 && v[0] > 0 && v[1] > 0) return BenchShape{v[0], v[1], 1, text};
  if (v.size() == 3 && v[0] > 0 && v[1] > 0 && v[2] > 0) return BenchShape{v[0] * v[1], v[2], v[0], text};
  return std::nullopt;
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// % of peak per op and shape (one dtype) as a grid: a row per op, a column per shape, each cell coloured by the seed's
// assessment band and labelled with its %. A grid stays readable for the whole suite (16 ops x 23 shapes), where
// grouped bars need more colours than the eye can tell apart.
std::string svg_chart(const nlohmann::json& results, const std::string& dtype, const std::string& title) {
  std::vector<std::string> ops, shapes;
  std::map<std::pair<std::string, std::string>, const nlohmann::json*> cell;
  for (const auto& r : results) {
    if (r["dtype"].get<std::string>() != dtype) continue;
    const auto op = r["op"].get<std::string>(), shape = r["shape"].get<std::string>();
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) shapes.push_back(shape);
    cell[{op, shape}] = &r;
  }
  // Assessment bands (poor < 31 <= fair < 62 <= good <= 78 < excellent) and their colours.
  const std::pair<const char*, const char*> bands[] = {
      {"poor", "#e8877f"}, {"fair", "#f3d27a"}, {"good", "#a9d88f"}, {"excellent", "#4fa35a"}};
  auto fill = [&](const std::string& assessment) {
    for (auto [name, colour] : bands)
      if (assessment == name) return colour;
    return "#dddddd";
  };
  const int cw = 62, ch = 20, left = 150, top = 110;
  // Wide enough for the grid, the title (~8 px per 14 px bold character) and the footer line.
  const int width = std::max({left + cw * static_cast<int>(shapes.size()) + 80,  // the last slanted column label runs past its cell
                              20 + 8 * static_cast<int>(title.size()), left + 560});
  const int height = top + ch * static_cast<int>(ops.size()) + 60;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
    << "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='10' y='20' font-size='14' font-weight='bold'>" << title << "</text>\n";
  for (size_t si = 0; si < shapes.size(); ++si) {  // column headers, slanted to fit
    const int x = left + static_cast<int>(si) * cw + cw / 2;
    o << "<text transform='translate(" << x << "," << top - 6 << ") rotate(-40)'>" << shapes[si] << "</text>\n";
  }
  o << std::fixed << std::setprecision(0);
  for (size_t oi = 0; oi < ops.size(); ++oi) {
    const int y = top + static_cast<int>(oi) * ch;
    o << "<text x='" << left - 8 << "' y='" << y + ch / 2 + 4 << "' text-anchor='end'>" << ops[oi] << "</text>\n";
    for (size_t si = 0; si < shapes.size(); ++si) {
      const int x = left + static_cast<int>(si) * cw;
      const auto it = cell.find({ops[oi], shapes[si]});
      const nlohmann::json* r = it == cell.end() ? nullptr : it->second;
      const bool timed = r && r->contains("pct_of_peak");
      o << "<rect x='" << x << "' y='" << y << "' width='" << cw - 2 << "' height='" << ch - 2 << "' fill='"
        << (timed ? fill((*r)["assessment"].get<std::string>()) : "#eeeeee") << "'>";
      if (timed)
        o << "<title>" << ops[oi] << " " << shapes[si] << ": " << (*r)["median_us"].get<double>() << " us, "
          << (*r)["gbps"].get<double>() << " GB/s</title>";
      o << "</rect><text x='" << x + cw / 2 - 1 << "' y='" << y + ch / 2 + 3 << "' text-anchor='middle'>";
      if (timed) o << (*r)["pct_of_peak"].get<double>() << "%";
      else if (r) o << "failed";
      o << "</text>\n";
    }
  }
  int lx = left;
  const int ly = height - 34;
  for (auto [name, colour] : bands) {
    o << "<rect x='" << lx << "' y='" << ly << "' width='12' height='12' fill='" << colour << "'/><text x='" << lx + 16
      << "' y='" << ly + 10 << "'>" << name << "</text>\n";
    lx += 90;
  }
  o << "<text x='" << left << "' y='" << height - 8
    << "'>% of the device-to-device copy bandwidth measured in the same run (bands: 31 / 62 / 78%)</text>\n</svg>\n";
  return o.str();
}

// `--l2-window`: the re-read op's time after a streaming copy, without and with an L2 access-policy window over it.
int run_l2_window(const BenchOptions& o) {
  constexpr uint64_t kStream = 1ull << 30;
  std::cout << "L2 persistence: rms_norm bf16 [rows, 4096] re-read after each 1 GiB device copy (median of " << o.runs
            << ")\n\n" << std::left << std::setw(12) << "rows" << std::setw(12) << "x MiB" << std::setw(14)
            << "window MiB" << std::right << std::setw(12) << "plain us" << std::setw(14) << "persist us"
            << std::setw(10) << "speedup\n";
  int failures = 0;
  for (int64_t rows : {256, 1024, 2048, 4096, 8192}) {
    testing::L2WindowResult r;
    const Status s = testing::measure_l2_window(o.device, rows, kStream, o.runs, &r);
    std::cout << std::left << std::setw(12) << rows;
    if (!s.ok()) {
      ++failures;
      std::cout << "FAILED: " << s.to_string() << "\n";
      continue;
    }
    std::cout << std::fixed << std::setprecision(1) << std::setw(12) << r.hot_bytes / 1048576.0 << std::setw(14)
              << r.window_bytes / 1048576.0 << std::right << std::setw(12) << std::setprecision(2) << r.plain_us
              << std::setw(14) << r.persist_us << std::setw(9) << r.plain_us / r.persist_us << "x\n";
  }
  return failures ? 1 : 0;
}

// Markdown and SVG are rendered from the JSON document alone, so a saved run can be re-rendered without a GPU.
void write_reports(const nlohmann::json& report, const BenchOptions& o) {
  const auto& meta = report["meta"];
  const auto& results = report["results"];
  if (!o.markdown.empty()) {
    std::ofstream md(o.markdown);
    md << std::fixed << "# kernelkit bench: " << meta.value("gpu", "?") << ", " << meta.value("date", "?")
       << ", commit " << meta.value("commit", "?") << "\n\nDevice-to-device copy ceiling measured in the same run: "
       << std::setprecision(0) << meta.value("copy_gbps", 0.0) << " GB/s. Median of " << meta.value("runs", 0)
       << " runs; bytes = each input read once and each output written once (the op table); outputs checked against "
          "the CPU reference before timing.\n\n"
       << "| op | dtype | shape | median µs | GB/s | % of copy peak | assessment | FLOP/B | bound | timing | L2 | host µs "
          "a launch |\n"
       << "|---|---|---|---:|---:|---:|---|---:|---|---|---|---:|\n";
    for (const auto& r : results) {
      md << "| " << r["op"].get<std::string>() << " | " << r["dtype"].get<std::string>() << " | "
         << r["shape"].get<std::string>() << " | ";
      if (r.contains("error")) {
        md << "failed: " << r["error"].get<std::string>() << " | | | | | | | | |\n";
        continue;
      }
      md << std::setprecision(2) << r["median_us"].get<double>() << " | " << std::setprecision(0)
         << r["gbps"].get<double>() << " | " << std::setprecision(1) << r["pct_of_peak"].get<double>() << "% | "
         << r["assessment"].get<std::string>() << " | " << std::setprecision(2) << r["intensity"].get<double>()
         << " | " << r["bound"].get<std::string>() << " | " << r["timing"].get<std::string>() << " | "
         << r["l2"].get<std::string>() << " | ";
      if (r.contains("host_us")) md << std::setprecision(1) << r["host_us"].get<double>();
      else md << "-";  // a report from before the column
      md << " |\n";
    }
  }
  if (!o.svg.empty() && !results.empty()) {
    const std::string dtype = results.front()["dtype"].get<std::string>();
    std::ofstream(o.svg) << svg_chart(results, dtype,
                                      "kernelkit on " + meta.value("gpu", std::string("?")) +
                                          ": % of measured copy bandwidth (" + dtype + ", commit " +
                                          meta.value("commit", std::string("?")) + ")");
  }
}

int run_bench(const BenchOptions& o) {
  if (!o.report.empty()) {  // re-render a saved run
    std::ifstream in(o.report);
    if (!in) {
      std::cerr << "error: --report '" << o.report << "' cannot be read\n";
      return 2;
    }
    nlohmann::json report;
    try {
      report = nlohmann::json::parse(in);
      write_reports(report, o);
    } catch (const std::exception& e) {
      std::cerr << "error: --report '" << o.report << "' is not a kernelkit bench JSON file: " << e.what() << "\n";
      return 2;
    }
    std::cout << "rendered " << report["results"].size() << " results from " << o.report << "\n";
    return 0;
  }
  if (cuda_device_count() == 0) {
    std::cerr << "kernelkit bench needs a CUDA GPU and none is available"
              << (built_with_cuda() ? "" : " (this build has no CUDA)") << ".\n";
    return 1;
  }
  auto prof = resolve_profile("", o.device);
  if (!prof) return 1;
  if (o.l2_window) return run_l2_window(o);
  std::vector<OpId> ops;
  for (const OpInfo& op : op_table())  // attention and quantization are not in this timing harness yet
    if (op.family != OpFamily::attention && op.family != OpFamily::quant &&
        (o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), op.name) != o.ops.end()))
      ops.push_back(op.id);
  std::vector<DType> dtypes;
  for (DType d : {DType::bf16, DType::f16, DType::f32}) {
    if (!prof->supports(d)) continue;
    if (o.dtypes.empty() || std::find(o.dtypes.begin(), o.dtypes.end(), std::string(dtype_name(d))) != o.dtypes.end())
      dtypes.push_back(d);
  }
  std::vector<BenchShape> shapes;
  for (const auto& s : o.shapes) {
    auto sh = parse_shape(s);
    if (!sh) {
      std::cerr << "error: --shape '" << s << "' must be ROWSxHIDDEN or BATCHxSEQxHIDDEN (positive integers)\n";
      return 2;
    }
    shapes.push_back(*sh);
  }
  if (shapes.empty()) shapes = default_suite(o.quick);
  if (ops.empty() || dtypes.empty()) {
    std::cerr << "error: nothing to run (check --op / --dtype against this GPU's profile)\n";
    return 2;
  }

  testing::CopyCeiling copy;
  if (Status s = testing::measure_copy_ceiling(o.device, 2ull << 30, &copy); !s.ok()) {
    std::cerr << "copy ceiling: " << s.to_string() << "\n";
    return 1;
  }
  DeviceFacts facts;
  (void)query_device(o.device, &facts);
  std::cout << "kernelkit bench on " << facts.name << " (profile " << prof->key << ", driver " << facts.driver_version
            << "), " << now_utc() << "\n"
            << "copy ceiling (device-to-device, read + write, same run): " << std::fixed << std::setprecision(0)
            << copy.gbps << " GB/s (datasheet " << prof->hbm_gbps << ")\n\n";
  const auto hdr = [](std::ostream& os) {
    os << std::left << std::setw(op_column_width()) << "op" << std::setw(6) << "dtype" << std::setw(14) << "shape"
       << std::right << std::setw(10) << "median us" << std::setw(9) << "GB/s" << std::setw(8) << "% peak"
       << "  " << std::left << std::setw(10) << "assessment" << std::right << std::setw(7) << "FLOP/B"
       << "  " << std::left << std::setw(7) << "bound" << std::setw(7) << "timing" << std::setw(6) << "L2" << std::right
       << std::setw(8) << "host us"
       << "  verified\n";
  };
  hdr(std::cout);
  nlohmann::json results = nlohmann::json::array();
  int failures = 0;
  // An op runs in the dtypes it takes, and an FP8 op only where the profile has FP8.
  auto runs_in = [&](OpId op, DType dt) {
    const auto fp8 = op_fp8_dtype(op);
    return (op_info(op).dtypes & dtype_bit(dt)) && (!fp8 || prof->supports(*fp8));
  };
  size_t pairs = 0;
  for (OpId op : ops)
    for (DType dt : dtypes) pairs += runs_in(op, dt);
  if (pairs == 0) {
    std::cerr << "error: nothing to run (the ops chosen do not take the dtypes chosen on profile " << prof->key
              << ")\n";
    return 2;
  }
  Progress progress("bench", pairs * shapes.size());  // on stderr: the table is on stdout
  size_t done = 0;
  for (OpId op : ops)
    for (DType dt : dtypes)
      for (const BenchShape& sh : shapes) {
        if (!runs_in(op, dt)) continue;
        progress.update(done++, std::string(op_info(op).name) + " " + std::string(dtype_name(dt)) + " " + sh.label);
        const BenchResult r = testing::bench_op(*prof, op, dt, sh, o.runs, o.device, copy.gbps);
        const double intensity = op_intensity(op, r.op_shape, dt);
        const bool mem = op_memory_bound(op, r.op_shape, dt, *prof);
        nlohmann::json j = {{"op", op_info(op).name}, {"dtype", dtype_name(dt)}, {"shape", sh.label},
                            {"rows", sh.rows},        {"hidden", sh.hidden},    {"bytes", r.bytes},
                            {"flops", r.flops},       {"intensity", intensity}, {"bound", mem ? "memory" : "compute"}};
        std::cout << std::left << std::setw(op_column_width()) << op_info(op).name << std::setw(6) << dtype_name(dt)
                  << std::setw(14) << sh.label;
        if (!r.status.ok()) {
          ++failures;
          j["error"] = r.status.to_string();
          std::cout << "  FAILED: " << r.status.to_string() << "\n";
        } else {
          j.update({{"median_us", r.median_us}, {"p10_us", r.p10_us}, {"p90_us", r.p90_us}, {"runs", r.runs},
                    {"gbps", r.gbps}, {"pct_of_peak", r.pct_of_peak}, {"assessment", testing::assessment(r.pct_of_peak)},
                    {"timing", r.graph ? "graph" : "events"}, {"l2", r.l2_cold ? "cold" : "warm"}, {"sets", r.sets},
                    {"verified_rows", r.rows_checked}, {"host_us", r.host_us}});
          std::cout << std::right << std::setw(10) << std::setprecision(2) << r.median_us << std::setw(9)
                    << std::setprecision(0) << r.gbps << std::setw(7) << std::setprecision(1) << r.pct_of_peak << "%  "
                    << std::left << std::setw(10) << testing::assessment(r.pct_of_peak) << std::right << std::setw(7)
                    << std::setprecision(2) << intensity << "  " << std::left << std::setw(7)
                    << (mem ? "memory" : "compute") << std::setw(7) << (r.graph ? "graph" : "events") << std::setw(6)
                    << (r.l2_cold ? "cold" : "warm") << std::right << std::setw(8) << std::setprecision(1)
                    << r.host_us << "  " << r.rows_checked << " rows\n";
        }
        results.push_back(j);
      }

  progress.finish();
  nlohmann::json meta = {{"gpu", facts.name},     {"driver", facts.driver_version}, {"profile", prof->key},
                         {"date", now_utc()},      {"commit", o.commit},             {"copy_gbps", copy.gbps},
                         {"copy_bytes", copy.bytes}, {"runs", o.runs}};
  const nlohmann::json report = {{"meta", meta}, {"results", results}};
  if (!o.json.empty()) std::ofstream(o.json) << report.dump(2) << "\n";
  write_reports(report, o);
  std::cout << "\n" << results.size() - failures << " timed, " << failures << " failed\n";
  return failures ? 1 : 0;
}

}  // namespace

std::function<int()> add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Time every op (% of the measured copy ceiling), output verified first");
  cmd->add_option("--op", o->ops, "Only these ops (repeatable)");
  cmd->add_option("--dtype", o->dtypes, "Only these dtypes: bf16, f16, f32 (repeatable)");
  cmd->add_option("--shape", o->shapes, "ROWSxHIDDEN or BATCHxSEQxHIDDEN (repeatable); default: the suite");
  cmd->add_flag("--quick", o->quick, "A small suite");
  cmd->add_flag("--l2-window", o->l2_window,
                "Measure L2 persistence instead: a re-read op after streaming traffic, without and with a window");
  cmd->add_option("--runs", o->runs, "Timed runs per case (median reported)")->check(CLI::Range(50, 100000));
  cmd->add_option("--device", o->device, "CUDA device index")->check(at_least(0));
  cmd->add_option("--json", o->json, "Write results as JSON to this file");
  cmd->add_option("--markdown", o->markdown, "Write a markdown table to this file");
  cmd->add_option("--svg", o->svg, "Write a chart of % of peak per op and shape (first dtype) to this file");
  cmd->add_option("--commit", o->commit, "Commit hash to record with the results");
  cmd->add_option("--report", o->report, "Re-render --markdown / --svg from a saved --json file (no GPU needed)");
  return [o] { return run_bench(*o); };
}

}  // namespace kernelkit::cli
