// Helpers of the CPU tests that call the ops on host buffers: a float32 view of a vector, and the check that a call
// was refused with a message naming what was wrong.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::testing {

inline TensorView f32(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(v.data(), DType::f32, shape);
}

// `s` has `code` and its message contains every fragment.
inline void expect_error(const Status& s, StatusCode code, std::initializer_list<const char*> fragments) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const char* f : fragments)
    EXPECT_NE(s.message().find(f), std::string::npos) << "'" << f << "' not in: " << s.message();
}
inline void expect_error(const Status& s, std::initializer_list<const char*> fragments) {
  expect_error(s, StatusCode::invalid_argument, fragments);
}

}  // namespace kernelkit::testing
