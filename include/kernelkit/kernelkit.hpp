// Umbrella header for the kernelkit C++ API.
#pragma once

#include "kernelkit/dtype.hpp"
#include "kernelkit/gemm.hpp"
#include "kernelkit/llama.hpp"
#include "kernelkit/op_info.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/runtime.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"
#include "kernelkit/tolerance.hpp"
