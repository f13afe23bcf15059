// The PyTorch binding's shared part (binding.hpp) and the library's own registration: the namespace, the check
// that the core and this library agree on the string ABI, and kernelkit's utility ops. The op families register their
// schemas and implementations in torch-ext/csrc/<family>.cpp.
#include "binding.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#ifdef KERNELKIT_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "kernelkit/runtime.hpp"

#ifndef KERNELKIT_TORCH_NAMESPACE
#define KERNELKIT_TORCH_NAMESPACE kernelkit
#endif
// TORCH_LIBRARY pastes its first argument: expand the macro first.
#define KK_TORCH_LIBRARY_(ns, m) TORCH_LIBRARY(ns, m)
#include "kernelkit/tolerance.hpp"

namespace kernelkit::torch_ext {
namespace {

// The DType of a tensor element type kernelkit has (uint8: packed INT4 weights), or none.
std::optional<DType> to_dtype(c10::ScalarType type) {
  switch (type) {
    case at::kFloat: return DType::f32;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kInt: return DType::i32;
    case at::kLong: return DType::i64;
    case at::kChar: return DType::i8;
    case at::kByte: return DType::i4x2;
    case at::kFloat8_e4m3fn: return DType::f8e4m3;
    case at::kFloat8_e5m2: return DType::f8e5m2;
    default: return std::nullopt;
  }
}

// A dtype as Python spells it (torch.float64), for messages.
std::string torch_name(c10::ScalarType type) {
  switch (type) {
    case at::kDouble: return "torch.float64";
    case at::kFloat: return "torch.float32";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    case at::kFloat8_e4m3fn: return "torch.float8_e4m3fn";
    case at::kFloat8_e5m2: return "torch.float8_e5m2";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: return std::string("torch.") + c10::toString(type);
  }
}

// The accuracy contract (kernelkit/tolerance.hpp) for a floating dtype: (rtol, atol).
std::tuple<double, double> tolerance(c10::ScalarType dtype) {
  TORCH_CHECK_VALUE(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
                    "kernelkit.tolerance: dtype must be float32, float16 or bfloat16, got ", torch_name(dtype));
  const Tolerance t = output_tolerance(*to_dtype(dtype));
  return {t.rtol, t.atol};
}

// check_errors(device): the device-side index record (kernelkit/runtime.hpp), raised as ValueError and cleared.
void check_errors(int64_t device) {
  TORCH_CHECK_VALUE(device >= 0 && device <= INT32_MAX, "kernelkit.check_errors: device must be a CUDA device index, "
                    "got ", device);
  raise_if_error(kernelkit::check_errors(static_cast<int>(device)));
}

#ifdef KERNELKIT_HAS_CUDA
// The ops' scratch memory (kernelkit::ScratchAllocator) from torch's caching allocator: the pool the op's tensors
// come from, the graph's private pool while a stream is captured, and counted in torch.cuda's memory statistics.
// Freed blocks are reused in the order of the stream they were allocated on.
void* torch_scratch(size_t bytes, Stream stream) {
  try {
    return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes, stream);
  } catch (const c10::Error&) {  // out of memory: the op reports it
    return nullptr;
  }
}
void torch_scratch_release(void* p, Stream) { c10::cuda::CUDACachingAllocator::raw_delete(p); }
const ScratchAllocator kTorchScratch{torch_scratch, torch_scratch_release};
#endif

void set_debug_checks(bool on) { kernelkit::set_debug_checks(on); }
bool debug_checks() { return kernelkit::debug_checks(); }

}  // namespace

Call::Call(const char* op, const at::Tensor& first) : op_(op), guard_(first.device()) {
#ifdef KERNELKIT_HAS_CUDA
  if (first.is_cuda()) stream_ = c10::cuda::getCurrentCUDAStream(first.get_device()).stream();
#endif
  TORCH_CHECK(!first.is_cuda() || built_with_cuda(), "kernelkit.", op_,
              ": this build has no CUDA kernels, and the tensors are on ", first.device());
}

TensorView Call::operator()(const at::Tensor& t, const char* arg, bool packed_int4) const {
  TORCH_CHECK_VALUE(t.dim() <= kMaxDims, "kernelkit.", op_, ": ", arg, " has ", t.dim(), " dims; at most ", kMaxDims);
  TORCH_CHECK_VALUE(t.is_cpu() || t.is_cuda(), "kernelkit.", op_, ": ", arg, " is on ", t.device(),
                    "; expected cpu or cuda");
  const std::optional<DType> dtype = to_dtype(t.scalar_type());
  TORCH_CHECK_VALUE(dtype && (*dtype != DType::i4x2 || packed_int4), "kernelkit.", op_, ": ", arg, " has dtype ",
                    torch_name(t.scalar_type()), ", which kernelkit does not take (float32, float16 or bfloat16 tensors; "
                    "int32 / int64 positions and tables; int8 or packed-int4 uint8 weights)");
  TensorView v;
  v.data = t.data_ptr();
  v.dtype = *dtype;
  v.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  v.device = t.is_cuda() ? Device::cuda(t.get_device()) : Device::cpu();
  return v;
}

std::optional<TensorView> Call::operator()(const std::optional<at::Tensor>& t, const char* arg) const {
  if (!t) return std::nullopt;
  return (*this)(*t, arg);
}

float Call::f32(double v, const char* arg) const {
  const auto f = static_cast<float>(v);
  TORCH_CHECK_VALUE(!std::isfinite(v) || (std::isfinite(f) && (f != 0.0f || v == 0.0)), "kernelkit.", op_, ": ", arg,
                    " = ", v, " is not representable in float32 (the precision the kernels take)");
  return f;
}

int Call::i32(int64_t v, const char* arg) const {
  TORCH_CHECK_VALUE(v >= INT32_MIN && v <= INT32_MAX, "kernelkit.", op_, ": ", arg, " = ", v, " is out of range");
  return static_cast<int>(v);
}

void Call::check(const Status& s) const { raise_if_error(s); }

void raise_if_error(const Status& s) {
  if (s.ok()) return;
  switch (s.code()) {
    case StatusCode::invalid_argument: TORCH_CHECK_VALUE(false, s.message());
    case StatusCode::unsupported: TORCH_CHECK_NOT_IMPLEMENTED(false, s.message());
    default: TORCH_CHECK(false, s.message());
  }
}

const char* op_namespace() { return C10_STRINGIZE(KERNELKIT_TORCH_NAMESPACE); }

}  // namespace kernelkit::torch_ext

KK_TORCH_LIBRARY_(KERNELKIT_TORCH_NAMESPACE, m) {
  // A core compiled with another string ABI than this file (torch's) would crash on its first error message.
  TORCH_CHECK(kernelkit::core_string_abi() == _GLIBCXX_USE_CXX11_ABI, "kernelkit: the core was compiled with "
              "_GLIBCXX_USE_CXX11_ABI=", kernelkit::core_string_abi(), ", torch and this op library with ",
              _GLIBCXX_USE_CXX11_ABI, "; rebuild with one ABI (cmake/TorchInfo.cmake)");
#ifdef KERNELKIT_HAS_CUDA
  kernelkit::set_scratch_allocator(&kernelkit::torch_ext::kTorchScratch);
#endif
  m.def("tolerance(ScalarType dtype) -> (float, float)");
  m.impl("tolerance", c10::DispatchKey::CompositeExplicitAutograd, &kernelkit::torch_ext::tolerance);
  m.def("check_errors(int device) -> ()");
  m.impl("check_errors", c10::DispatchKey::CompositeExplicitAutograd, &kernelkit::torch_ext::check_errors);
  m.def("set_debug_checks(bool on) -> ()");
  m.impl("set_debug_checks", c10::DispatchKey::CompositeExplicitAutograd, &kernelkit::torch_ext::set_debug_checks);
  m.def("debug_checks() -> bool");
  m.impl("debug_checks", c10::DispatchKey::CompositeExplicitAutograd, &kernelkit::torch_ext::debug_checks);
}
