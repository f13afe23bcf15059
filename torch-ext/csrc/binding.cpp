// The PyTorch binding's shared part (binding.hpp) and the library's own registration: the namespace, the check
// that the core and this library agree on the string ABI, and kernelkit's utility ops. The op families register their
// schemas and implementations in torch-ext/csrc/<family>.cpp.
#include "binding.hpp"

#include <tuple>

#ifdef KERNELKIT_HAS_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "kernelkit/runtime.hpp"
#include "kernelkit/tolerance.hpp"

namespace kernelkit::torch_ext {
namespace {

DType to_dtype(c10::ScalarType type, const char* arg) {
  switch (type) {
    case at::kFloat: return DType::f32;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kInt: return DType::i32;
    case at::kLong: return DType::i64;
    case at::kChar: return DType::i8;
    case at::kByte: return DType::i4x2;  // packed INT4 weights: two signed 4-bit values per byte
    default:
      TORCH_CHECK_VALUE(false, "kernelkit: ", arg, " has dtype ", type,
                        "; expected float32, float16 or bfloat16 (int32 / int64 for positions and tables, int8 / uint8 for "
                        "quantized weights)");
  }
  return DType::f32;
}

// The accuracy contract (kernelkit/tolerance.hpp) for a floating dtype: (rtol, atol).
std::tuple<double, double> tolerance(c10::ScalarType dtype) {
  const Tolerance t = output_tolerance(to_dtype(dtype, "dtype"));
  return {t.rtol, t.atol};
}

}  // namespace

TensorView view(const at::Tensor& t, const char* arg) {
  TORCH_CHECK_VALUE(t.dim() <= kMaxDims, "kernelkit: ", arg, " has ", t.dim(), " dims; at most ", kMaxDims);
  TORCH_CHECK_VALUE(t.is_cpu() || t.is_cuda(), "kernelkit: ", arg, " is on ", t.device(), "; expected cpu or cuda");
  TensorView v;
  v.data = t.data_ptr();
  v.dtype = to_dtype(t.scalar_type(), arg);
  v.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  v.device = t.is_cuda() ? Device::cuda(t.get_device()) : Device::cpu();
  return v;
}

std::optional<TensorView> view(const std::optional<at::Tensor>& t, const char* arg) {
  if (!t) return std::nullopt;
  return view(*t, arg);
}

Stream stream_for(const at::Tensor& t) {
#ifdef KERNELKIT_HAS_CUDA
  if (t.is_cuda()) return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
#endif
  TORCH_CHECK(!t.is_cuda(), "kernelkit: this build has no CUDA kernels; ", "x is on ", t.device());
  return nullptr;
}

void raise_if_error(const Status& s) {
  if (s.ok()) return;
  switch (s.code()) {
    case StatusCode::invalid_argument: TORCH_CHECK_VALUE(false, s.message());
    case StatusCode::unsupported: TORCH_CHECK_NOT_IMPLEMENTED(false, s.message());
    default: TORCH_CHECK(false, s.message());
  }
}

}  // namespace kernelkit::torch_ext

KK_TORCH_LIBRARY_(KERNELKIT_TORCH_NAMESPACE, m) {
  // A core compiled with another string ABI than this file (torch's) would crash on its first error message.
  TORCH_CHECK(kernelkit::core_string_abi() == _GLIBCXX_USE_CXX11_ABI, "kernelkit: the core was compiled with "
              "_GLIBCXX_USE_CXX11_ABI=", kernelkit::core_string_abi(), ", torch and this op library with ",
              _GLIBCXX_USE_CXX11_ABI, "; rebuild with one ABI (cmake/TorchInfo.cmake)");
  m.def("tolerance(ScalarType dtype) -> (float, float)");
  m.impl("tolerance", c10::DispatchKey::CompositeExplicitAutograd, &kernelkit::torch_ext::tolerance);
}
