/* kernelkit C ABI: the norm ops on raw pointers, for ctypes and other languages (libkernelkit_c.so).
 *
 * Pure C. Each function is a thin wrapper over the C++ op of the same name in kernelkit/ops.hpp (same formula, same
 * checks): it builds tensor views from the pointers, sizes and row strides, and runs the CPU reference (device = -1,
 * host pointers) or the CUDA kernels on `stream` (device >= 0, device pointers; stream is a cudaStream_t, NULL = the
 * legacy default stream). Launches are asynchronous on the stream; nothing synchronizes.
 *
 * Return value: 0 on success, otherwise the kernelkit::StatusCode (1 invalid_argument, 2 unsupported, 3 cuda_error,
 * 4 no_device, 5 internal); kk_last_error() then gives the message, which names the argument and what was expected.
 *
 * Strides are in elements, not bytes. Activations are [rows, hidden] with a contiguous last dim and row stride
 * `*_row_stride`; parameters ([hidden] weight/bias, [batch, hidden] scale/shift) are contiguous. Every tensor of one
 * call has the activation dtype. Nullable parameters are marked; passing NULL means "no weight" / "no bias".
 */
#ifndef KERNELKIT_C_API_H
#define KERNELKIT_C_API_H

#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define KK_API __attribute__((visibility("default")))
#else
#define KK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, numbered as kernelkit::DType. */
typedef enum kk_dtype { KK_F32 = 0, KK_F16 = 1, KK_BF16 = 2 } kk_dtype;

/* kernelkit version as major * 10000 + minor * 100 + patch. */
KK_API int kk_version(void);

/* Minimal bytes the op moves for this problem (each input read once, each output written once), from the op table
 * every kernelkit tool uses; 0 for an unknown op name or dtype code. */
KK_API uint64_t kk_op_bytes(const char* op, int64_t rows, int64_t hidden, int64_t batch, int dtype);

/* Message of the last failed call on this thread ("" if none); valid until the next failure on this thread. A
 * successful call does not clear it: check the return value first. */
KK_API const char* kk_last_error(void);

/* Waits for CUDA device `device`, then returns an error (message in kk_last_error) for the first out-of-range index a
 * kernel met there since the last check (block_table, seqlens_k, positions: kernels skip or clamp that work and
 * record it), and clears it; 0 when none, and without CUDA. kk_set_debug_checks(1): every op checks after itself
 * (KERNELKIT_CHECK=1 in the environment does the same). kernelkit::check_errors in kernelkit/runtime.hpp. */
KK_API int kk_check_errors(int device);
KK_API void kk_set_debug_checks(int on);

/* out = x / sqrt(mean(x^2) + eps) * (weight_offset + weight)
 *   out, x: [rows, hidden]; weight: [hidden] or NULL. weight_offset = 1 gives Gemma's (1 + w). */
KK_API int kk_rms_norm(void* out, const void* x, const void* weight, int64_t rows, int64_t hidden,
                       int64_t x_row_stride, int64_t out_row_stride, int dtype, float eps, float weight_offset,
                       int device, void* stream);

/* residual = x + residual (rounded to the dtype); x = rms_norm(residual). Both updated in place.
 *   x, residual: [rows, hidden]; weight: [hidden] or NULL. */
KK_API int kk_fused_add_rms_norm(void* x, void* residual, const void* weight, int64_t rows, int64_t hidden,
                                 int64_t x_row_stride, int64_t residual_row_stride, int dtype, float eps,
                                 float weight_offset, int device, void* stream);

/* out = (x - mean) / sqrt(var + eps) * weight + bias (biased variance, as torch).
 *   out, x: [rows, hidden]; weight, bias: [hidden] or NULL. */
KK_API int kk_layer_norm(void* out, const void* x, const void* weight, const void* bias, int64_t rows, int64_t hidden,
                         int64_t x_row_stride, int64_t out_row_stride, int dtype, float eps, int device, void* stream);

/* out = layer_norm(x) * (1 + scale[b]) + shift[b]   (DiT / LTX-Video modulation)
 *   out, x: [batch, seq, hidden], row stride *_row_stride (batch stride = seq * row stride);
 *   scale, shift: contiguous [batch, hidden]; weight, bias: [hidden] or NULL. */
KK_API int kk_ada_layer_norm(void* out, const void* x, const void* scale, const void* shift, const void* weight,
                             const void* bias, int64_t batch, int64_t seq, int64_t hidden, int64_t x_row_stride,
                             int64_t out_row_stride, int dtype, float eps, int device, void* stream);

/* out = gelu_tanh(rms_norm(x) * weight), no intermediate rounding.
 *   out, x: [rows, hidden]; weight: [hidden] or NULL. */
KK_API int kk_rms_norm_gelu(void* out, const void* x, const void* weight, int64_t rows, int64_t hidden,
                            int64_t x_row_stride, int64_t out_row_stride, int dtype, float eps, int device,
                            void* stream);

/* Activations: act is KK_GELU, KK_GELU_TANH or KK_SILU. */
typedef enum kk_act { KK_GELU = 0, KK_GELU_TANH = 1, KK_SILU = 2 } kk_act;

/* gated = 0: out = act(x), x and out [rows, d].
 * gated = 1: out = act(x[:, :d]) * x[:, d:], x [rows, 2d] (row stride x_row_stride), out [rows, d]. */
KK_API int kk_activation(void* out, const void* x, int64_t rows, int64_t d, int64_t x_row_stride,
                         int64_t out_row_stride, int act, int gated, int dtype, int device, void* stream);

/* out = softmax(scale * x) over rows of d; causal = 1: rows are [.., s_q] queries of [s_q, d] score blocks with the
 * bottom-right causal mask. x, out: [rows, d] with row strides. */
KK_API int kk_softmax(void* out, const void* x, int64_t rows, int64_t d, int64_t x_row_stride, int64_t out_row_stride,
                      float scale, int causal, int64_t s_q, int dtype, int device, void* stream);

/* out = act(a) * b (GEGLU with KK_GELU), a, b, out: [rows, d]. */
KK_API int kk_act_mul(void* out, const void* a, const void* b, int64_t rows, int64_t d, int64_t a_row_stride,
                      int64_t b_row_stride, int64_t out_row_stride, int act, int dtype, int device, void* stream);

/* RoPE in place on q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim] (token strides in elements, heads
 * contiguous: e.g. slices of a fused qkv row) from int64 positions [tokens] and an fp32 cos/sin cache
 * [max_position, rot_dim] (cos in the first half, sin in the second: the vLLM convention). neox = 1: rotate_half
 * pairs, 0: interleaved (GPT-J). */
KK_API int kk_rotary_embedding(void* q, void* k, int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                               int64_t q_token_stride, int64_t k_token_stride, const int64_t* positions,
                               const float* cos_sin_cache, int64_t max_position, int64_t rot_dim, int neox, int dtype,
                               int device, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* KERNELKIT_C_API_H */
