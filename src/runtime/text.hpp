// Small text helpers shared by the core's parsers (profile keys, dtype and precision names, model keys) and its
// error messages.
#pragma once

#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>

namespace kernelkit::detail {

inline std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// A number as %g writes it (1e-50, 0.125, inf): what an error message shows of a float argument.
inline std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace kernelkit::detail
