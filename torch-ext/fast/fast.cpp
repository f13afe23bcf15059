// The eager fast path of the most called ops: a Python module (kernelkit._kernelkit_fast) whose functions call the
// ops _kernelkit_ops.so registers through the dispatcher's typed (unboxed) entry. A call from Python through
// torch.ops boxes every argument by its schema; this path converts the arguments once (pybind11) and keeps everything
// the dispatcher does (CPU / CUDA kernels, autograd and in-place bookkeeping, fake tensors, dispatch modes). The
// Python wrappers take it for contiguous inputs outside torch.compile (Dynamo traces torch.ops). A module of its own:
// it needs libtorch_python, which the op library must not (C++ programs load that, e.g. AOTInductor's runners); a
// build without Python's headers leaves it out and the wrappers use torch.ops alone (CMakeLists.txt).
#include <torch/extension.h>

#include <optional>
#include <string>
#include <vector>

#ifndef KERNELKIT_TORCH_NAMESPACE
#define KERNELKIT_TORCH_NAMESPACE kernelkit
#endif

namespace kernelkit::torch_ext {
namespace {

// The registered op `name` of this library's namespace, typed as Signature (its schema's C++ form).
template <typename Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* name) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow((std::string(C10_STRINGIZE(KERNELKIT_TORCH_NAMESPACE)) + "::" + name).c_str(), "")
      .typed<Signature>();
}

using OptTensor = std::optional<at::Tensor>;

// out, or a new tensor like x (contiguous: the wrappers route only contiguous x here), as torch.empty_like.
at::Tensor out_for(const at::Tensor& x, const OptTensor& out) { return out ? *out : at::empty_like(x); }

at::Tensor rms_norm(const at::Tensor& x, const OptTensor& weight, double eps, const OptTensor& out,
                    double weight_offset) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&, const OptTensor&, double, double)>("rms_norm");
  at::Tensor y = out_for(x, out);
  op.call(y, x, weight, eps, weight_offset);
  return y;
}

void fused_add_rms_norm(at::Tensor& x, at::Tensor& residual, const OptTensor& weight, double eps,
                        double weight_offset) {
  static const auto op =
      typed_op<void(at::Tensor&, at::Tensor&, const OptTensor&, double, double)>("fused_add_rms_norm");
  op.call(x, residual, weight, eps, weight_offset);
}

at::Tensor layer_norm(const at::Tensor& x, const OptTensor& weight, const OptTensor& bias, double eps,
                      const OptTensor& out) {
  static const auto op =
      typed_op<void(at::Tensor&, const at::Tensor&, const OptTensor&, const OptTensor&, double)>("layer_norm");
  at::Tensor y = out_for(x, out);
  op.call(y, x, weight, bias, eps);
  return y;
}

at::Tensor softmax(const at::Tensor& x, double scale, bool causal, const OptTensor& out) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&, double, bool)>("softmax");
  at::Tensor y = out_for(x, out);
  op.call(y, x, scale, causal);
  return y;
}

at::Tensor activation(const at::Tensor& x, c10::string_view act, const OptTensor& out) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&, c10::string_view)>("activation");
  at::Tensor y = out_for(x, out);
  op.call(y, x, act);
  return y;
}

// act(x[..., :d]) * x[..., d:] into out, or a new [..., d] tensor.
at::Tensor act_and_mul(const at::Tensor& x, c10::string_view act, const OptTensor& out) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&, c10::string_view)>("act_and_mul");
  at::Tensor y;
  if (out) {
    y = *out;
  } else {
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() /= 2;
    y = at::empty(sizes, x.options());
  }
  op.call(y, x, act);
  return y;
}

}  // namespace
}  // namespace kernelkit::torch_ext

PYBIND11_MODULE(_kernelkit_fast, m) {
  using namespace kernelkit::torch_ext;
  // Without the GIL while the op runs, as torch.ops calls it (the CPU reference may take a while; a dispatch mode or
  // fake kernel written in Python takes the GIL back itself).
  const auto nogil = pybind11::call_guard<pybind11::gil_scoped_release>();
  m.def("rms_norm", &rms_norm, nogil);
  m.def("fused_add_rms_norm", &fused_add_rms_norm, nogil);
  m.def("layer_norm", &layer_norm, nogil);
  m.def("softmax", &softmax, nogil);
  // str arguments arrive as std::string (pybind11), the schema's str as c10::string_view.
  m.def(
      "activation",
      [](const at::Tensor& x, const std::string& act, const OptTensor& out) { return activation(x, act, out); }, nogil);
  m.def(
      "act_and_mul",
      [](const at::Tensor& x, const std::string& act, const OptTensor& out) { return act_and_mul(x, act, out); },
      nogil);
}
