// Registers kernelkit's ops with PyTorch (TORCH_LIBRARY schemas, `Tensor!` for what an op writes) and implements them
// for CPU and CUDA tensors by calling the core: the core runs its fp64 reference on CPU tensors and the kernels on CUDA
// tensors. No logic lives here beyond the conversions; the core checks every argument.
#include "torch_binding.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#ifdef KERNELKIT_HAS_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "kernelkit/ops.hpp"

namespace kernelkit::torch_ext {
namespace {

DType to_dtype(const at::Tensor& t, const char* arg) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::f32;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kInt: return DType::i32;
    case at::kLong: return DType::i64;
    case at::kChar: return DType::i8;
    case at::kByte: return DType::i4x2;  // packed INT4 weights: two signed 4-bit values per byte
    default:
      TORCH_CHECK_VALUE(false, "kernelkit: ", arg, " has dtype ", t.scalar_type(),
                        "; expected float32, float16 or bfloat16 (int32 / int64 for positions and tables, int8 / uint8 for "
                        "quantized weights)");
  }
  return DType::f32;
}

TensorView view(const at::Tensor& t, const char* arg) {
  TORCH_CHECK_VALUE(t.dim() <= kMaxDims, "kernelkit: ", arg, " has ", t.dim(), " dims; at most ", kMaxDims);
  TORCH_CHECK_VALUE(t.is_cpu() || t.is_cuda(), "kernelkit: ", arg, " is on ", t.device(), "; expected cpu or cuda");
  TensorView v;
  v.data = t.data_ptr();
  v.dtype = to_dtype(t, arg);
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

// The caller's current stream on the tensor's device (nullptr for CPU tensors).
Stream stream_for(const at::Tensor& t) {
#ifdef KERNELKIT_HAS_CUDA
  if (t.is_cuda()) return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
#endif
  TORCH_CHECK(!t.is_cuda(), "kernelkit: this build has no CUDA kernels; ", "x is on ", t.device());
  return nullptr;
}

// Bad input -> ValueError, unsupported on this GPU -> NotImplementedError, anything else -> RuntimeError.
void raise_if_error(const Status& s) {
  if (s.ok()) return;
  switch (s.code()) {
    case StatusCode::invalid_argument: TORCH_CHECK_VALUE(false, s.message());
    case StatusCode::unsupported: TORCH_CHECK_NOT_IMPLEMENTED(false, s.message());
    default: TORCH_CHECK(false, s.message());
  }
}

}  // namespace

void rms_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
              double weight_offset) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::rms_norm(view(out, "out"), view(x, "x"), view(weight, "weight"), static_cast<float>(eps),
                                     static_cast<float>(weight_offset), stream_for(x)));
}

void fused_add_rms_norm(at::Tensor& x, at::Tensor& residual, const std::optional<at::Tensor>& weight, double eps,
                        double weight_offset) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::fused_add_rms_norm(view(x, "x"), view(residual, "residual"), view(weight, "weight"),
                                               static_cast<float>(eps), static_cast<float>(weight_offset),
                                               stream_for(x)));
}

void layer_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                const std::optional<at::Tensor>& bias, double eps) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::layer_norm(view(out, "out"), view(x, "x"), view(weight, "weight"), view(bias, "bias"),
                                       static_cast<float>(eps), stream_for(x)));
}

void ada_layer_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::ada_layer_norm(view(out, "out"), view(x, "x"), view(scale, "scale"), view(shift, "shift"),
                                           view(weight, "weight"), view(bias, "bias"), static_cast<float>(eps),
                                           stream_for(x)));
}

void rms_norm_gelu(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::rms_norm_gelu(view(out, "out"), view(x, "x"), view(weight, "weight"),
                                          static_cast<float>(eps), stream_for(x)));
}

namespace {
Activation parse_activation(c10::string_view act) {
  if (act == "gelu") return Activation::gelu;
  if (act == "gelu_tanh") return Activation::gelu_tanh;
  if (act == "silu") return Activation::silu;
  TORCH_CHECK_VALUE(false, "kernelkit: activation '", std::string(act), "' is not one of gelu, gelu_tanh, silu");
  return Activation::silu;
}
}  // namespace

void activation(at::Tensor& out, const at::Tensor& x, c10::string_view act) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::activation(parse_activation(act), view(out, "out"), view(x, "x"), stream_for(x)));
}

void act_and_mul(at::Tensor& out, const at::Tensor& x, c10::string_view act) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::gated_activation(parse_activation(act), view(out, "out"), view(x, "x"), stream_for(x)));
}

void act_mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, c10::string_view act) {
  const c10::OptionalDeviceGuard guard(a.device());
  raise_if_error(kernelkit::gated_activation(parse_activation(act), view(out, "out"), view(a, "a"), view(b, "b"),
                                             stream_for(a)));
}

void softmax(at::Tensor& out, const at::Tensor& x, double scale, bool causal) {
  const c10::OptionalDeviceGuard guard(x.device());
  const auto f = causal ? kernelkit::causal_softmax : kernelkit::softmax;
  raise_if_error(f(view(out, "out"), view(x, "x"), static_cast<float>(scale), stream_for(x)));
}

void rotary_embedding_(const at::Tensor& positions, at::Tensor& q, at::Tensor& k, const at::Tensor& cos_sin_cache,
                       bool neox) {
  const c10::OptionalDeviceGuard guard(q.device());
  const TensorView qv = view(q, "q"), kv = view(k, "k");
  raise_if_error(kernelkit::rotary_embedding(qv, kv, qv, kv, view(positions, "positions"),
                                             view(cos_sin_cache, "cos_sin_cache"),
                                             neox ? RopeStyle::neox : RopeStyle::gptj, stream_for(q)));
}

void rotary_embedding_cos_sin_(at::Tensor& q, at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin,
                               int64_t rot_dim, bool neox) {
  const c10::OptionalDeviceGuard guard(q.device());
  const TensorView qv = view(q, "q"), kv = view(k, "k");
  raise_if_error(kernelkit::rotary_embedding(qv, kv, qv, kv, view(cos, "cos"), view(sin, "sin"), rot_dim,
                                             neox ? RopeStyle::neox : RopeStyle::gptj, stream_for(q)));
}

void attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q, const at::Tensor& k,
               const at::Tensor& v, double scale, bool causal, const std::optional<at::Tensor>& cu_seqlens_q,
               const std::optional<at::Tensor>& cu_seqlens_k) {
  const c10::OptionalDeviceGuard guard(q.device());
  AttentionOptions o;
  o.scale = static_cast<float>(scale);
  o.causal = causal;
  o.cu_seqlens_q = view(cu_seqlens_q, "cu_seqlens_q");
  o.cu_seqlens_k = view(cu_seqlens_k, "cu_seqlens_k");
  raise_if_error(kernelkit::attention(view(out, "out"), view(lse, "lse"), view(q, "q"), view(k, "k"), view(v, "v"), o,
                                      stream_for(q)));
}

void decode_attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q,
                      const at::Tensor& k_cache, const at::Tensor& v_cache, const std::optional<at::Tensor>& block_table,
                      const std::optional<at::Tensor>& seqlens_k, double scale, bool causal) {
  const c10::OptionalDeviceGuard guard(q.device());
  KvCache cache;
  cache.k = view(k_cache, "k_cache");
  cache.v = view(v_cache, "v_cache");
  cache.block_table = view(block_table, "block_table");
  cache.seqlens_k = view(seqlens_k, "seqlens_k");
  AttentionOptions o;
  o.scale = static_cast<float>(scale);
  o.causal = causal;
  raise_if_error(kernelkit::decode_attention(view(out, "out"), view(lse, "lse"), view(q, "q"), cache, o,
                                             stream_for(q)));
}

void quantize_weight(at::Tensor& qweight, at::Tensor& scales, const at::Tensor& w, int64_t bits, int64_t group) {
  const c10::OptionalDeviceGuard guard(w.device());
  const TensorView qv = view(qweight, "qweight"), sv = view(scales, "scales"), wv = view(w, "w");
  raise_if_error(bits == 4 ? kernelkit::quantize_int4_groupwise(qv, sv, wv, static_cast<int>(group), stream_for(w))
                           : kernelkit::quantize_int8_per_channel(qv, sv, wv, stream_for(w)));
}

void linear_weight_only(at::Tensor& out, const at::Tensor& x, const at::Tensor& qweight, const at::Tensor& scales,
                        int64_t bits, int64_t group, const std::optional<at::Tensor>& bias) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::linear_weight_only(view(out, "out"), view(x, "x"), view(qweight, "qweight"),
                                               view(scales, "scales"), static_cast<int>(bits), static_cast<int>(group),
                                               view(bias, "bias"), stream_for(x)));
}

void quantize_per_token(at::Tensor& q, at::Tensor& scales, const at::Tensor& x) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::quantize_per_token_int8(view(q, "q"), view(scales, "scales"), view(x, "x"), stream_for(x)));
}

void linear_w8a8(at::Tensor& out, const at::Tensor& xq, const at::Tensor& x_scales, const at::Tensor& qweight,
                 const at::Tensor& w_scales, const std::optional<at::Tensor>& bias) {
  const c10::OptionalDeviceGuard guard(xq.device());
  raise_if_error(kernelkit::linear_w8a8(view(out, "out"), view(xq, "xq"), view(x_scales, "x_scales"),
                                        view(qweight, "qweight"), view(w_scales, "w_scales"), view(bias, "bias"),
                                        stream_for(xq)));
}

}  // namespace kernelkit::torch_ext

// The op namespace: `kernelkit` for the pip package; a versioned one (e.g. `_kernelkit_0_1_0`) for Hugging Face hub build
// variants, so a hub copy and the pip package can be loaded in one process (torch allows one TORCH_LIBRARY per name).
#ifndef KERNELKIT_TORCH_NAMESPACE
#define KERNELKIT_TORCH_NAMESPACE kernelkit
#endif
// TORCH_LIBRARY pastes its first argument: expand the macro first.
#define KK_TORCH_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define KK_TORCH_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

// Schemas: `Tensor!` marks what an op writes; every op returns nothing (destination-passing).
KK_TORCH_LIBRARY(KERNELKIT_TORCH_NAMESPACE, m) {
  // A core compiled with another string ABI than this file (torch's) would crash on its first error message.
  TORCH_CHECK(kernelkit::core_string_abi() == _GLIBCXX_USE_CXX11_ABI, "kernelkit: the core was compiled with "
              "_GLIBCXX_USE_CXX11_ABI=", kernelkit::core_string_abi(), ", torch and this op library with ",
              _GLIBCXX_USE_CXX11_ABI, "; rebuild with one ABI (cmake/TorchInfo.cmake)");
  m.def("rms_norm(Tensor! out, Tensor x, Tensor? weight, float eps, float weight_offset=0.) -> ()");
  m.def("fused_add_rms_norm(Tensor! x, Tensor! residual, Tensor? weight, float eps, float weight_offset=0.) -> ()");
  m.def("layer_norm(Tensor! out, Tensor x, Tensor? weight, Tensor? bias, float eps) -> ()");
  m.def("ada_layer_norm(Tensor! out, Tensor x, Tensor scale, Tensor shift, Tensor? weight, Tensor? bias, "
        "float eps) -> ()");
  m.def("rms_norm_gelu(Tensor! out, Tensor x, Tensor? weight, float eps) -> ()");
  m.def("activation(Tensor! out, Tensor x, str act) -> ()");
  m.def("act_and_mul(Tensor! out, Tensor x, str act) -> ()");
  m.def("act_mul(Tensor! out, Tensor a, Tensor b, str act) -> ()");
  m.def("softmax(Tensor! out, Tensor x, float scale=1., bool causal=False) -> ()");
  m.def("rotary_embedding_(Tensor positions, Tensor! q, Tensor! k, Tensor cos_sin_cache, bool neox) -> ()");
  m.def("rotary_embedding_cos_sin_(Tensor! q, Tensor! k, Tensor cos, Tensor sin, int rot_dim, bool neox) -> ()");
  m.def("attention(Tensor(a!) out, Tensor(b!)? lse, Tensor q, Tensor k, Tensor v, float scale, bool causal, "
        "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k) -> ()");
  m.def("decode_attention(Tensor(a!) out, Tensor(b!)? lse, Tensor q, Tensor k_cache, Tensor v_cache, "
        "Tensor? block_table, Tensor? seqlens_k, float scale, bool causal) -> ()");
  m.def("quantize_weight(Tensor! qweight, Tensor(b!) scales, Tensor w, int bits, int group) -> ()");
  m.def("linear_weight_only(Tensor! out, Tensor x, Tensor qweight, Tensor scales, int bits, int group, "
        "Tensor? bias) -> ()");
  m.def("quantize_per_token(Tensor! q, Tensor(b!) scales, Tensor x) -> ()");
  m.def("linear_w8a8(Tensor! out, Tensor xq, Tensor x_scales, Tensor qweight, Tensor w_scales, Tensor? bias) -> ()");
}

// One implementation serves both backends: the core picks the CPU reference or the CUDA kernels from the tensors.
#define KERNELKIT_IMPL_ALL(m)                                              \
  m.impl("rms_norm", &kernelkit::torch_ext::rms_norm);                     \
  m.impl("fused_add_rms_norm", &kernelkit::torch_ext::fused_add_rms_norm); \
  m.impl("layer_norm", &kernelkit::torch_ext::layer_norm);                 \
  m.impl("ada_layer_norm", &kernelkit::torch_ext::ada_layer_norm);         \
  m.impl("rms_norm_gelu", &kernelkit::torch_ext::rms_norm_gelu);           \
  m.impl("activation", &kernelkit::torch_ext::activation);                 \
  m.impl("act_and_mul", &kernelkit::torch_ext::act_and_mul);               \
  m.impl("act_mul", &kernelkit::torch_ext::act_mul);                       \
  m.impl("rotary_embedding_", &kernelkit::torch_ext::rotary_embedding_);   \
  m.impl("softmax", &kernelkit::torch_ext::softmax);                       \
  m.impl("rotary_embedding_cos_sin_", &kernelkit::torch_ext::rotary_embedding_cos_sin_); \
  m.impl("attention", &kernelkit::torch_ext::attention);                   \
  m.impl("decode_attention", &kernelkit::torch_ext::decode_attention);     \
  m.impl("quantize_weight", &kernelkit::torch_ext::quantize_weight);       \
  m.impl("linear_weight_only", &kernelkit::torch_ext::linear_weight_only);       \
  m.impl("quantize_per_token", &kernelkit::torch_ext::quantize_per_token);       \
  m.impl("linear_w8a8", &kernelkit::torch_ext::linear_w8a8)

KK_TORCH_LIBRARY_IMPL(KERNELKIT_TORCH_NAMESPACE, CPU, m) { KERNELKIT_IMPL_ALL(m); }
#ifdef KERNELKIT_HAS_CUDA
KK_TORCH_LIBRARY_IMPL(KERNELKIT_TORCH_NAMESPACE, CUDA, m) { KERNELKIT_IMPL_ALL(m); }
#endif
