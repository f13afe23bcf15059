// The public op API. Every op takes TensorViews and a stream and returns a Status. Tensors on the CPU run the fp64
// reference; tensors on a CUDA device run the kernels on the caller's stream. All tensors of one call live on one device.
#pragma once

#include "kernelkit/ops/activation.hpp"
#include "kernelkit/ops/attention.hpp"
#include "kernelkit/ops/gemm.hpp"
#include "kernelkit/ops/norm.hpp"
#include "kernelkit/ops/quant.hpp"
#include "kernelkit/ops/rope.hpp"
#include "kernelkit/ops/softmax.hpp"
