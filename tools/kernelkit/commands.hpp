// Subcommands of the `kernelkit` CLI. Each registers its options on a CLI11 subcommand and returns the exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

#include "kernelkit/profile.hpp"

namespace kernelkit::cli {

// The profile a command works with: --profile KEY if given, else the GPU's (KERNELKIT_PROFILE applies).
// Returns nullopt and prints why when there is neither.
std::optional<DeviceProfile> resolve_profile(const std::string& key, int device);

std::function<int()> add_info(CLI::App& app);
std::function<int()> add_verify(CLI::App& app);
std::function<int()> add_bench(CLI::App& app);
std::function<int()> add_profile(CLI::App& app);
std::function<int()> add_plan(CLI::App& app);
std::function<int()> add_demo(CLI::App& app);

}  // namespace kernelkit::cli
