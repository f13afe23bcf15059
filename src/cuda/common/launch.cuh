// A LaunchPlan (plain data from the planner, no CUDA types) as the <<<grid, block>>> of a launch.
#pragma once

#include <cuda_runtime.h>

#include "kernelkit/planner.hpp"

namespace kernelkit::cuda {

// block: threads_per_row x rows_per_block.
inline dim3 block_of(const LaunchPlan& p) {
  return dim3(static_cast<unsigned>(p.threads_per_row), static_cast<unsigned>(p.rows_per_block));
}
// grid: grid_x x grid / grid_x (element-wise plans: blocks across a row x along the rows; row reductions: 1-D).
inline dim3 grid_of(const LaunchPlan& p) {
  return dim3(static_cast<unsigned>(p.grid_x), static_cast<unsigned>(p.grid / p.grid_x));
}

}  // namespace kernelkit::cuda
