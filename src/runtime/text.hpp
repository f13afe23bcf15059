// Small text helpers shared by the core's parsers (profile keys, dtype and precision names, model keys).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace kernelkit::detail {

inline std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace kernelkit::detail
