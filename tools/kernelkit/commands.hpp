// Subcommands of the `kernelkit` CLI. Each registers its options on a CLI11 subcommand and returns the exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "kernelkit/profile.hpp"

namespace kernelkit::cli {

// The profile a command works with: --profile KEY if given, else the GPU's (KERNELKIT_PROFILE applies).
// Returns nullopt and prints why when there is neither.
std::optional<DeviceProfile> resolve_profile(const std::string& key, int device);

// The width of a table's op column: the longest op name in the registry and a space.
int op_column_width();

// Threads for work that runs cases side by side: the CPU's hardware threads, at most 16.
int default_jobs();

// A long phase's progress on stderr: "verify: 812 / 2098 cases (38%), rms_norm bf16, 45 s, ETA 72 s". On a terminal
// one line redrawn in place at most every 0.2 s; otherwise (logs, CI) a plain line every 10 s. finish() ends it.
class Progress {
 public:
  Progress(std::string what, size_t total);
  void update(size_t done, const std::string& now);
  void finish();

 private:
  std::string what_;
  size_t total_;
  bool tty_;
  double start_, last_ = -1e9;
};

// An integer option's check: a whole number >= `min`, refused with a plain message (CLI11's own number checks print
// the limits of a double).
inline CLI::Validator at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (error != std::errc() || end != s.data() + s.size() || v < min)
          return "must be a whole number >= " + std::to_string(min) + ", got " + s;
        return "";
      },
      ">= " + std::to_string(min));
}

std::function<int()> add_info(CLI::App& app);
std::function<int()> add_verify(CLI::App& app);
std::function<int()> add_bench(CLI::App& app);
std::function<int()> add_profile(CLI::App& app);
std::function<int()> add_plan(CLI::App& app);
std::function<int()> add_demo(CLI::App& app);

}  // namespace kernelkit::cli
