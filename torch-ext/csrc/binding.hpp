// The PyTorch binding's shared part: torch::Tensor -> kernelkit::TensorView, the caller's current stream, Status ->
// Python exception, and the registration macros. Each op family registers its schemas (`Tensor!` marks what an op
// writes; every op returns nothing: destination-passing) and its implementations in torch-ext/csrc/<family>.cpp; the
// core checks every argument, so a binding only converts.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <string_view>

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
// A family's ops: KK_TORCH_OPS(m) { def_op(m, "name(Tensor! out, ...) -> ()", &name); ... }
#define KK_TORCH_OPS(m) KK_TORCH_FRAGMENT_(KERNELKIT_TORCH_NAMESPACE, m)

namespace kernelkit::torch_ext {

// Defines an op from its schema (`Tensor!` marks what it writes) and registers `fn` for CPU and CUDA tensors alike:
// the core runs the fp64 reference on CPU tensors and the kernels on CUDA ones.
template <typename Fn>
void def_op(torch::Library& m, const char* schema, Fn* fn) {
  const std::string_view s(schema);
  const std::string name(s.substr(0, s.find('(')));
  m.def(schema);
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::CPU, fn));
#ifdef KERNELKIT_HAS_CUDA
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::CUDA, fn));
#endif
}

}  // namespace kernelkit::torch_ext
