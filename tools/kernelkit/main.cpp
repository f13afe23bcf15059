// kernelkit: the command-line front end over the core (info, verify, bench, profile, plan, demo).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>
#include <utility>

#include "commands.hpp"
#include "kernelkit/op_info.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit::cli {

std::optional<DeviceProfile> resolve_profile(const std::string& key, int device) {
  if (!key.empty()) {
    auto p = find_profile(key);
    if (!p) {
      std::cerr << "error: --profile '" << key << "' is not a known profile; expected one of:";
      for (const auto& q : profile_table()) std::cerr << " " << q.key;
      std::cerr << " (aliases a100, h100)\n";
      return std::nullopt;
    }
    p->source = "--profile " + key;
    return p;
  }
  DeviceProfile p;
  const Status s = active_profile(device, &p);
  if (!s.ok()) {
    std::cerr << "No GPU profile: " << s.message() << ".\n(`kernelkit info --profile t4|a10g|l4|a100|h100|h200` and "
                 "`kernelkit plan --gpu ...` show a GPU's profile and plans without one.)\n";
    return std::nullopt;
  }
  return p;
}

int op_column_width() {
  size_t w = 0;
  for (const OpInfo& op : op_table()) w = std::max(w, op.name.size());
  return static_cast<int>(w) + 1;
}

int default_jobs() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u)); }

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Progress::Progress(std::string what, size_t total)
    : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) != 0), start_(now_s()) {}

void Progress::update(size_t done, const std::string& now) {
  const double t = now_s(), elapsed = t - start_;
  if (t - last_ < (tty_ ? 0.2 : 10.0)) return;
  last_ = t;
  std::ostringstream line;
  line << what_ << ": " << done << " / " << total_ << " cases ("
       << (total_ ? 100 * done / total_ : 100) << "%)" << (now.empty() ? "" : ", " + now) << ", "
       << static_cast<int>(elapsed) << " s";
  if (done > 0 && done < total_)
    line << ", ETA " << static_cast<int>(elapsed * static_cast<double>(total_ - done) / static_cast<double>(done))
         << " s";
  if (tty_) std::cerr << "\r" << line.str() << "\033[K" << std::flush;
  else std::cerr << line.str() << "\n";
}

void Progress::finish() {
  if (tty_) std::cerr << "\r\033[K" << std::flush;  // the final report follows on stdout
}

}  // namespace kernelkit::cli

int main(int argc, char** argv) {
  CLI::App app{"kernelkit: fused inference kernels for T4, A100 and H100/H200, and the tools to trust them"};
  app.require_subcommand(1);
  // An unknown command is named, with the ones there are (CLI11 would only say that a subcommand is required).
  constexpr const char* kCommands[] = {"info", "verify", "bench", "profile", "plan", "demo"};
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(std::begin(kCommands), std::end(kCommands), [&](const char* c) { return std::strcmp(c, argv[1]) == 0; })) {
    std::cerr << "kernelkit: unknown command '" << argv[1] << "'; the commands are:";
    for (const char* c : kCommands) std::cerr << " " << c;
    std::cerr << " (kernelkit --help)\n";
    return 2;
  }
  auto info = kernelkit::cli::add_info(app);
  auto verify = kernelkit::cli::add_verify(app);
  auto bench = kernelkit::cli::add_bench(app);
  auto profile = kernelkit::cli::add_profile(app);
  auto plan = kernelkit::cli::add_plan(app);
  auto demo = kernelkit::cli::add_demo(app);
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("info")) return info();
  if (app.got_subcommand("verify")) return verify();
  if (app.got_subcommand("bench")) return bench();
  if (app.got_subcommand("profile")) return profile();
  if (app.got_subcommand("plan")) return plan();
  if (app.got_subcommand("demo")) return demo();
  return 2;
}
