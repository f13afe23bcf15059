// The PyTorch binding's shared part: torch::Tensor -> kernelkit::TensorView, the caller's current stream, Status ->
// Python exception, and the registration macros. Each op family registers its schemas (`Tensor!` marks what an op
// writes; every op returns nothing: destination-passing) and its implementations in torch-ext/csrc/<family>.cpp; the
// core checks every argument, so a binding only converts.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::torch_ext {

TensorView view(const at::Tensor& t, const char* arg);
std::optional<TensorView> view(const std::optional<at::Tensor>& t, const char* arg);
// The caller's current stream on the tensor's device (nullptr for CPU tensors).
Stream stream_for(const at::Tensor& t);
// Bad input -> ValueError, unsupported on this GPU -> NotImplementedError, anything else -> RuntimeError.
void raise_if_error(const Status& s);

}  // namespace kernelkit::torch_ext

// The op namespace: `kernelkit` for the pip package; a versioned one (e.g. `_kernelkit_0_1_0`) for Hugging Face hub
// build variants, so a hub copy and the pip package can be loaded in one process (torch allows one TORCH_LIBRARY per
// namespace).
#ifndef KERNELKIT_TORCH_NAMESPACE
#define KERNELKIT_TORCH_NAMESPACE kernelkit
#endif
// TORCH_LIBRARY* paste their first argument: expand the macro first.
#define KK_TORCH_LIBRARY_(ns, m) TORCH_LIBRARY(ns, m)
#define KK_TORCH_FRAGMENT_(ns, m) TORCH_LIBRARY_FRAGMENT(ns, m)
#define KK_TORCH_IMPL_(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)
// A family's schemas: KK_TORCH_SCHEMAS(m) { m.def("..."); }
#define KK_TORCH_SCHEMAS(m) KK_TORCH_FRAGMENT_(KERNELKIT_TORCH_NAMESPACE, m)
// A family's implementations, one function for CPU and CUDA tensors alike (the core runs the fp64 reference on CPU
// tensors and the kernels on CUDA ones): KK_TORCH_IMPLS(impls) with void impls(torch::Library&).
#ifdef KERNELKIT_HAS_CUDA
#define KK_TORCH_IMPLS(impls)                                              \
  KK_TORCH_IMPL_(KERNELKIT_TORCH_NAMESPACE, CPU, m) { impls(m); }  \
  KK_TORCH_IMPL_(KERNELKIT_TORCH_NAMESPACE, CUDA, m) { impls(m); }
#else
#define KK_TORCH_IMPLS(impls) KK_TORCH_IMPL_(KERNELKIT_TORCH_NAMESPACE, CPU, m) { impls(m); }
#endif
