// The eager fast path of the most called ops: a Python module (kernelkit._kernelkit_fast) whose functions call the
// ops _kernelkit_ops.so registers through the dispatcher's typed (unboxed) entry. A call from Python through
// torch.ops boxes every argument by its schema; this path converts the arguments once (pybind11) and keeps everything
// the dispatcher does (CPU / CUDA kernels, autograd and in-place bookkeeping, fake tensors, dispatch modes). The
// Python wrappers take it for eager calls (Dynamo traces torch.ops), those that allocate their output here for a
// contiguous x only (a strided one takes _rows' copy and torch.ops). A module of its own:
// it needs libtorch_python, which the op library must not (C++ programs load that, e.g. AOTInductor's runners); a
// build without Python's headers leaves it out and the wrappers use torch.ops alone (CMakeLists.txt).
// What it uses of torch, not <torch/extension.h> (the whole C++ frontend: twice the compile time).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>  // pybind11 with torch's Tensor caster

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#ifndef KERNELKIT_TORCH_NAMESPACE
#define KERNELKIT_TORCH_NAMESPACE kernelkit
#endif

namespace kernelkit::torch_ext {
namespace {

using OptTensor = std::optional<at::Tensor>;
namespace py = pybind11;

// The registered op `name` of this library's namespace, typed as Sig (its schema's C++ form, the signature of its
// function in torch-ext/csrc/<family>.cpp), looked up at the first call: the op library registers its ops when
// _ops.py loads it, which may come after this module's import.
template <typename Sig>
class Op {
 public:
  explicit Op(const char* name) : name_(name) {}
  template <typename... Args>
  void operator()(Args&&... args) {
    std::call_once(found_, [this] {
      handle_.emplace(
          c10::Dispatcher::singleton()
              .findSchemaOrThrow((std::string(C10_STRINGIZE(KERNELKIT_TORCH_NAMESPACE)) + "::" + name_).c_str(), "")
              .template typed<Sig>());
    });
    handle_->call(std::forward<Args>(args)...);
  }

 private:
  const char* name_;
  std::once_flag found_;
  std::optional<c10::TypedOperatorHandle<Sig>> handle_;
};

// Without the GIL while the op runs, as torch.ops calls it (the CPU reference may take a while; a dispatch mode or
// fake kernel written in Python takes the GIL back itself).
const auto nogil = py::call_guard<py::gil_scoped_release>();

// Defines `name` as the op itself (destination passing: the Python wrapper allocates), for an op of signature Sig.
template <typename Sig>
struct Entry;
template <typename... Args>
struct Entry<void(Args...)> {
  static void def(py::module_& m, const char* name) {
    auto op = std::make_shared<Op<void(Args...)>>(name);
    m.def(
        name, [op](Args... args) { (*op)(std::forward<Args>(args)...); }, nogil);
  }
};

// The ops whose output is the shape of x: `name(x, ...args, out=None)` returns out, or a new tensor like x (the
// wrappers route only contiguous x here: torch.empty_like's layout).
template <typename... Args>
void def_like_x(py::module_& m, const char* name) {
  auto op = std::make_shared<Op<void(at::Tensor&, const at::Tensor&, Args...)>>(name);
  m.def(
      name,
      [op](const at::Tensor& x, Args... args, const OptTensor& out) {
        at::Tensor y = out ? *out : at::empty_like(x);
        (*op)(y, x, std::forward<Args>(args)...);
        return y;
      },
      nogil);
}

// activation: act(x), or (`gated`, act_and_mul) act(x[..., :d]) * x[..., d:], into out or a new tensor (like x, or
// [..., d]). str arguments arrive as std::string (pybind11), the schema's str is a c10::string_view.
void def_act(py::module_& m, const char* name, bool gated) {
  auto op = std::make_shared<Op<void(at::Tensor&, const at::Tensor&, c10::string_view)>>(name);
  m.def(
      name,
      [op, gated](const at::Tensor& x, const std::string& act, const OptTensor& out) {
        at::Tensor y;
        if (out) {
          y = *out;
        } else if (!gated) {
          y = at::empty_like(x);
        } else {
          std::vector<int64_t> sizes = x.sizes().vec();
          sizes.back() /= 2;
          y = at::empty(sizes, x.options());
        }
        (*op)(y, x, c10::string_view(act));
        return y;
      },
      nogil);
}

}  // namespace
}  // namespace kernelkit::torch_ext

PYBIND11_MODULE(_kernelkit_fast, m) {
  using namespace kernelkit::torch_ext;
  using T = const at::Tensor&;
  // Output like x: rms_norm(x, weight, eps, weight_offset, out), layer_norm(x, weight, bias, eps, out),
  // softmax(x, scale, causal, out); activation(x, act, out), act_and_mul(x, act, out).
  def_like_x<const OptTensor&, double, double>(m, "rms_norm");
  def_like_x<const OptTensor&, const OptTensor&, double>(m, "layer_norm");
  def_like_x<double, bool>(m, "softmax");
  def_act(m, "activation", false);
  def_act(m, "act_and_mul", true);
  // Destination passing, the schemas' arguments in order.
  Entry<void(at::Tensor&, at::Tensor&, const OptTensor&, double, double)>::def(m, "fused_add_rms_norm");
  Entry<void(at::Tensor&, T, T, T, const OptTensor&, const OptTensor&, double)>::def(m, "ada_layer_norm");
  Entry<void(at::Tensor&, T, const OptTensor&, double)>::def(m, "rms_norm_gelu");
  Entry<void(at::Tensor&, at::Tensor&, T, const OptTensor&, double, bool, double)>::def(m, "rms_norm_quant");
  Entry<void(at::Tensor&, at::Tensor&, T, at::Tensor&, const OptTensor&, double, bool, double)>::def(
      m, "fused_add_rms_norm_quant");
  Entry<void(at::Tensor&, at::Tensor&, T, bool)>::def(m, "silu_and_mul_quant");
  Entry<void(T, at::Tensor&, at::Tensor&, T, bool)>::def(m, "rotary_embedding_");
  Entry<void(at::Tensor&, T, T, T, int64_t, int64_t, const OptTensor&, const OptTensor&, const OptTensor&)>::def(
      m, "linear_weight_only");
  Entry<void(at::Tensor&, const OptTensor&, T, T, T, const OptTensor&, const OptTensor&, double, bool, int64_t, double,
             const OptTensor&, const OptTensor&, const OptTensor&)>::def(m, "decode_attention");
  Entry<void(at::Tensor&, const OptTensor&, T, T, T, double, bool, const OptTensor&, const OptTensor&,
             std::optional<int64_t>, std::optional<int64_t>, int64_t, double, const OptTensor&, const OptTensor&,
             const OptTensor&)>::def(m, "attention");
  Entry<void(at::Tensor&, at::Tensor&, T, T, T, const OptTensor&, const OptTensor&, const OptTensor&, const OptTensor&,
             bool, const OptTensor&, const OptTensor&)>::def(m, "write_kv_cache");
}
