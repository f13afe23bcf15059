// Whether an op's output shares memory with another of its tensors (issue: an output that partly overlaps an input
// gives a silently wrong result; torch refuses it too). Every op checks its outputs against its inputs and each other:
// the same elements in the same layout is an in-place call, allowed where the op says it is safe; any other sharing is
// refused, naming both arguments.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::detail {

enum class Overlap : uint8_t {
  none,     // no element in common
  same,     // the same elements in the same layout (data, dtype, shape and strides agree)
  partial,  // anything else that may share an element
};

// Exact for views whose trailing dims form one dense block and whose leading dims collapse to one stride (rows of a
// contiguous-last-dim tensor, q / k / v slices of a fused projection: any two with the same row stride, or one row);
// for any other pair, sharing by extent (conservative: `partial` where the byte ranges meet).
Overlap memory_overlap(const TensorView& a, const TensorView& b);

// A named tensor of an op, for the checks below (absent tensors are skipped).
struct Named {
  const TensorView* view;
  const char* arg;
};

// The op's outputs against its inputs and against each other: `same` is allowed only for the (output, input) pairs in
// `in_place` (by argument name, "out=x"); otherwise invalid_argument "<op>: <out> overlaps <arg> ...".
Status check_no_overlap(const std::string& op, std::initializer_list<Named> outputs, std::initializer_list<Named> inputs,
                        std::initializer_list<std::pair<const char*, const char*>> in_place = {});

}  // namespace kernelkit::detail
