// The C ABI (include/kernelkit/c_api.h): pointers, sizes and row strides become TensorViews, the C++ op runs, and its
// Status becomes an int plus a thread-local message. Its only own check is the dtype code; the ops check the rest.
#include "kernelkit/c_api.h"

#include <exception>
#include <optional>
#include <string>

#include "kernelkit/op_info.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"

#ifndef KK_VERSION_MAJOR
#error "define KK_VERSION_MAJOR / KK_VERSION_MINOR / KK_VERSION_PATCH (CMakeLists.txt passes the project version)"
#endif

using namespace kernelkit;

static_assert(KK_F32 == static_cast<int>(DType::f32) && KK_F16 == static_cast<int>(DType::f16) &&
              KK_BF16 == static_cast<int>(DType::bf16));
static_assert(static_cast<int>(StatusCode::ok) == 0);

namespace {

thread_local std::string last_error;

// What every call shares: the dtype, the device and the stream, and the views built from them.
struct Call {
  DType dtype;
  Device device;
  Stream stream;

  // [rows, hidden] with a row stride (elements).
  TensorView rows(const void* p, int64_t rows, int64_t hidden, int64_t row_stride) const {
    return TensorView::strided(const_cast<void*>(p), dtype, {rows, hidden}, {row_stride, 1}, device);
  }
  // A contiguous parameter; NULL means none.
  std::optional<TensorView> param(const void* p, std::initializer_list<int64_t> shape) const {
    if (p == nullptr) return std::nullopt;
    return TensorView::contiguous(const_cast<void*>(p), dtype, shape, device);
  }
};

// Runs one op: builds the Call (device -1 = CPU, else CUDA device index), then turns its Status into the C return code,
// recording the message on failure. No exception crosses the C boundary.
template <typename Op>
int run(int dtype, int device, void* stream, Op&& op) {
  Status s;
  try {
    if (dtype < KK_F32 || dtype > KK_BF16)
      s = invalid_argument("dtype code " + std::to_string(dtype) +
                           " is not one of KK_F32 (0), KK_F16 (1), KK_BF16 (2)");
    else
      s = op(Call{static_cast<DType>(dtype), device == -1 ? Device::cpu() : Device::cuda(device),
                  reinterpret_cast<Stream>(stream)});
  } catch (const std::exception& e) {
    s = Status(StatusCode::internal, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    s = Status(StatusCode::internal, "unexpected exception");
  }
  if (s.ok()) return 0;
  try {
    last_error = s.message();
  } catch (...) {
    // Out of memory for the message itself: keep the previous one, still return the code.
  }
  return static_cast<int>(s.code());
}

}  // namespace

extern "C" {

KK_API int kk_version(void) { return KK_VERSION_MAJOR * 10000 + KK_VERSION_MINOR * 100 + KK_VERSION_PATCH; }

KK_API const char* kk_last_error(void) { return last_error.c_str(); }

KK_API int kk_check_errors(int device) {
  return run(KK_F32, device, nullptr, [&](const Call&) { return kernelkit::check_errors(device); });
}

KK_API void kk_set_debug_checks(int on) { kernelkit::set_debug_checks(on != 0); }

KK_API uint64_t kk_op_bytes(const char* op, int64_t rows, int64_t hidden, int64_t batch, int dtype) {
  const auto id = op ? kernelkit::parse_op(op) : std::nullopt;
  if (!id || dtype < KK_F32 || dtype > KK_BF16) return 0;
  return kernelkit::op_bytes(*id, {rows, hidden, batch, 16}, static_cast<kernelkit::DType>(dtype));
}

KK_API int kk_rms_norm(void* out, const void* x, const void* weight, int64_t rows, int64_t hidden,
                       int64_t x_row_stride, int64_t out_row_stride, int dtype, float eps, float weight_offset,
                       int device, void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    return rms_norm(c.rows(out, rows, hidden, out_row_stride), c.rows(x, rows, hidden, x_row_stride),
                    c.param(weight, {hidden}), eps, weight_offset, c.stream);
  });
}

KK_API int kk_fused_add_rms_norm(void* x, void* residual, const void* weight, int64_t rows, int64_t hidden,
                                 int64_t x_row_stride, int64_t residual_row_stride, int dtype, float eps,
                                 float weight_offset, int device, void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    return fused_add_rms_norm(c.rows(x, rows, hidden, x_row_stride),
                              c.rows(residual, rows, hidden, residual_row_stride), c.param(weight, {hidden}), eps,
                              weight_offset, c.stream);
  });
}

KK_API int kk_layer_norm(void* out, const void* x, const void* weight, const void* bias, int64_t rows, int64_t hidden,
                         int64_t x_row_stride, int64_t out_row_stride, int dtype, float eps, int device, void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    return layer_norm(c.rows(out, rows, hidden, out_row_stride), c.rows(x, rows, hidden, x_row_stride),
                      c.param(weight, {hidden}), c.param(bias, {hidden}), eps, c.stream);
  });
}

KK_API int kk_ada_layer_norm(void* out, const void* x, const void* scale, const void* shift, const void* weight,
                             const void* bias, int64_t batch, int64_t seq, int64_t hidden, int64_t x_row_stride,
                             int64_t out_row_stride, int dtype, float eps, int device, void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    // [batch, seq, hidden]: the batch stride is seq rows.
    auto bsh = [&](const void* p, int64_t row_stride) {
      return TensorView::strided(const_cast<void*>(p), c.dtype, {batch, seq, hidden},
                                 {seq * row_stride, row_stride, 1}, c.device);
    };
    // scale and shift are required: a NULL one reaches the op as a null view and is reported there.
    auto mod = [&](const void* p) {
      return TensorView::contiguous(const_cast<void*>(p), c.dtype, {batch, hidden}, c.device);
    };
    return ada_layer_norm(bsh(out, out_row_stride), bsh(x, x_row_stride), mod(scale), mod(shift),
                          c.param(weight, {hidden}), c.param(bias, {hidden}), eps, c.stream);
  });
}

KK_API int kk_rms_norm_gelu(void* out, const void* x, const void* weight, int64_t rows, int64_t hidden,
                            int64_t x_row_stride, int64_t out_row_stride, int dtype, float eps, int device,
                            void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    return rms_norm_gelu(c.rows(out, rows, hidden, out_row_stride), c.rows(x, rows, hidden, x_row_stride),
                         c.param(weight, {hidden}), eps, c.stream);
  });
}

KK_API int kk_activation(void* out, const void* x, int64_t rows, int64_t d, int64_t x_row_stride,
                         int64_t out_row_stride, int act, int gated, int dtype, int device, void* stream) {
  const auto a = static_cast<kernelkit::Activation>(act);
  return run(dtype, device, stream, [&](const Call& c) {
    if (act < KK_GELU || act > KK_SILU)
      return invalid_argument("kk_activation: act must be KK_GELU, KK_GELU_TANH or KK_SILU, got " + std::to_string(act));
    const auto o = c.rows(out, rows, d, out_row_stride);
    if (gated) return gated_activation(a, o, c.rows(x, rows, 2 * d, x_row_stride), c.stream);
    return activation(a, o, c.rows(x, rows, d, x_row_stride), c.stream);
  });
}

KK_API int kk_act_mul(void* out, const void* a, const void* b, int64_t rows, int64_t d, int64_t a_row_stride,
                      int64_t b_row_stride, int64_t out_row_stride, int act, int dtype, int device, void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    if (act < KK_GELU || act > KK_SILU)
      return invalid_argument("kk_act_mul: act must be KK_GELU, KK_GELU_TANH or KK_SILU, got " + std::to_string(act));
    return gated_activation(static_cast<kernelkit::Activation>(act), c.rows(out, rows, d, out_row_stride),
                            c.rows(a, rows, d, a_row_stride), c.rows(b, rows, d, b_row_stride), c.stream);
  });
}

KK_API int kk_softmax(void* out, const void* x, int64_t rows, int64_t d, int64_t x_row_stride, int64_t out_row_stride,
                      float scale, int causal, int64_t s_q, int dtype, int device, void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    if (!causal) return softmax(c.rows(out, rows, d, out_row_stride), c.rows(x, rows, d, x_row_stride), scale, c.stream);
    if (s_q <= 0 || rows % s_q != 0)
      return invalid_argument("kk_softmax: s_q must be > 0 and divide rows, got s_q = " + std::to_string(s_q));
    // [rows / s_q, s_q, d] views with the given row strides.
    const auto view3 = [&](const void* p, int64_t stride) {
      return TensorView::strided(const_cast<void*>(p), c.dtype, {rows / s_q, s_q, d}, {s_q * stride, stride, 1}, c.device);
    };
    return causal_softmax(view3(out, out_row_stride), view3(x, x_row_stride), scale, c.stream);
  });
}

KK_API int kk_rotary_embedding(void* q, void* k, int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                               int64_t q_token_stride, int64_t k_token_stride, const int64_t* positions,
                               const float* cos_sin_cache, int64_t max_position, int64_t rot_dim, int neox, int dtype,
                               int device, void* stream) {
  return run(dtype, device, stream, [&](const Call& c) {
    const TensorView qv = TensorView::strided(q, c.dtype, {tokens, heads, head_dim}, {q_token_stride, head_dim, 1},
                                              c.device);
    const TensorView kv = TensorView::strided(k, c.dtype, {tokens, kv_heads, head_dim}, {k_token_stride, head_dim, 1},
                                              c.device);
    const TensorView pos = TensorView::contiguous(const_cast<int64_t*>(positions), DType::i64, {tokens}, c.device);
    const TensorView cache = TensorView::contiguous(const_cast<float*>(cos_sin_cache), DType::f32,
                                                    {max_position, rot_dim}, c.device);
    return rotary_embedding(qv, kv, qv, kv, pos, cache, neox ? RopeStyle::neox : RopeStyle::gptj, c.stream);
  });
}

}  // extern "C"
