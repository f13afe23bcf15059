// The PyTorch binding's shared part: torch::Tensor -> kernelkit::TensorView, the caller's current stream, Status ->
// Python exception, and the registration macros. Each op family registers its schemas (`Tensor!` marks what an op
// writes; every op returns nothing: destination-passing) and its implementations in torch-ext/csrc/<family>.cpp; the
// core checks every argument, so a binding only converts.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <string_view>

#include "kernelkit/runtime.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::torch_ext {

// One op call from PyTorch: the device of its first tensor made current for the call, that device's current stream,
// and the conversions of its arguments, in the order they are asked for, each refusal naming the op and the argument
// ("kernelkit.rms_norm: x has dtype torch.float64 ..."). The core checks everything else (shapes, dtype agreement,
// devices) and names the argument too; check() raises its Status: bad input -> ValueError, unsupported on this GPU
// -> NotImplementedError, anything else -> RuntimeError.
class Call {
 public:
  Call(const char* op, const at::Tensor& first);
  // uint8 is packed INT4 (two 4-bit values a byte) only where `packed_int4`: every other uint8 tensor is refused.
  TensorView operator()(const at::Tensor& t, const char* arg, bool packed_int4 = false) const;
  std::optional<TensorView> operator()(const std::optional<at::Tensor>& t, const char* arg) const;
  // A float argument in float32, the precision the core takes: a finite value that float32 cannot hold (it would
  // round to 0 or overflow) is refused, naming it.
  float f32(double v, const char* arg) const;
  int i32(int64_t v, const char* arg) const;
  Stream stream() const { return stream_; }
  void check(const Status& s) const;

 private:
  const char* op_;
  c10::OptionalDeviceGuard guard_;
  Stream stream_ = nullptr;
  // A CUDA tensor's data pointer is an allocation on its device: while this call lives the core skips its
  // cudaPointerGetAttributes check (one driver call per tensor).
  TrustedDevicePointers trusted_;
};

// A Status as the Python exception for its code: ValueError (invalid_argument), NotImplementedError (unsupported),
// RuntimeError (the rest); nothing when ok.
void raise_if_error(const Status& s);

}  // namespace kernelkit::torch_ext

namespace kernelkit::torch_ext {

// The op namespace: `kernelkit` for the pip package; a versioned one (e.g. `_kernelkit_0_1_0`) for Hugging Face hub
// build variants, so a hub copy and the pip package can be loaded in one process (torch allows one TORCH_LIBRARY per
// namespace). Only binding.cpp is compiled with KERNELKIT_TORCH_NAMESPACE: the family files ask this function, so
// they compile the same for every variant (a variant's build takes them from the compiler cache). Hidden: with the pip
// package and a hub variant in one process, each library's fragments must bind to its own.
__attribute__((visibility("hidden"))) const char* op_namespace();

}  // namespace kernelkit::torch_ext

// A family's ops: KK_TORCH_OPS(m) { def_op(m, "name(Tensor! out, ...) -> ()", &name); ... }. TORCH_LIBRARY_FRAGMENT
// with the namespace from op_namespace() at static initialization instead of a macro token.
#define KK_TORCH_OPS(m) KK_TORCH_OPS_(m, C10_UID)
#define KK_TORCH_OPS_(m, uid)                                                                                \
  static void C10_CONCATENATE(kk_torch_ops_init_, uid)(torch::Library&);                                    \
  static const torch::detail::TorchLibraryInit C10_CONCATENATE(kk_torch_ops_static_init_, uid)(            \
      torch::Library::FRAGMENT, &C10_CONCATENATE(kk_torch_ops_init_, uid), kernelkit::torch_ext::op_namespace(), \
      std::nullopt, __FILE__, __LINE__);                                                                     \
  void C10_CONCATENATE(kk_torch_ops_init_, uid)(torch::Library & m)

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
