// Dense GEMM through cuBLASLt (not hand-written): the nn.Linear convention y = x @ w^T (+ bias) (then GELU), fp32
// accumulation, TF32 as an explicit switch, the algorithm chosen once per problem and cached in a handle that also owns
// the workspace. CPU tensors run the fp64-accumulating reference.
#pragma once

#include <cstdint>
#include <memory>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

enum class LinearEpilogue : uint8_t {
  none,       // y = x w^T
  bias,       // y = x w^T + bias
  bias_gelu,  // y = gelu_tanh(x w^T + bias) (cuBLASLt's GELU epilogue is the tanh approximation, with an approximate
              // tanh: up to |a|/2 2^-11 off the exact gelu_tanh(a) in fp32)
};

struct LinearOptions {
  LinearEpilogue epilogue = LinearEpilogue::none;
  // f32 inputs only: multiply on TF32 tensor cores (10-bit mantissa products, fp32 accumulation; the A100 guide's
  // choice for inference matmuls where that precision is acceptable). Off by default, and off for validation.
  bool allow_tf32 = false;
  // y += x w^T (...) instead of y = ...: the residual add fused into the GEMM (cuBLASLt's beta = 1 with C = y); the
  // epilogue applies to the sum. Measured on the H200: in fp16/bf16 cuBLASLt rounds x w^T + y to the output type
  // before the bias is added, so the result can be one ulp of |x w^T| + |y| off (not one ulp of the final value).
  bool accumulate = false;
};

// cuBLASLt state for one device: the library handle, a workspace and the algorithm cache (per shape, dtype, layout
// and epilogue). Not thread-safe; one per stream-owning thread. Calls without a handle use a per-thread default one.
class GemmHandle {
 public:
  GemmHandle();
  ~GemmHandle();
  GemmHandle(GemmHandle&&) noexcept;
  GemmHandle& operator=(GemmHandle&&) noexcept;
  GemmHandle(const GemmHandle&) = delete;
  GemmHandle& operator=(const GemmHandle&) = delete;

  // Creates the cuBLASLt handle and a workspace of `workspace_bytes` on `device`.
  Status init(int device, size_t workspace_bytes = size_t{32} << 20);
  int device() const;
  size_t cached_algorithms() const;  // problems whose algorithm has been chosen

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// y [m, n] = (y +) x [m, k] @ w [n, k]^T (+ bias [n]) (then gelu_tanh), all of one dtype (f32, f16, bf16; no bf16 on sm_75),
// rows with a contiguous last dim and any row stride. m = 0 is a no-op.
Status linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView* bias = nullptr,
              const LinearOptions& options = {}, GemmHandle* handle = nullptr, Stream stream = nullptr);

// The work of one linear: 2 m n k FLOPs; x, w (and bias) read once and y written once.
inline double linear_flops(int64_t m, int64_t n, int64_t k) { return 2.0 * m * n * k; }
inline uint64_t linear_bytes(int64_t m, int64_t n, int64_t k, size_t elem, bool bias) {
  return elem * static_cast<uint64_t>(m * k + n * k + m * n + (bias ? n : 0));
}

}  // namespace kernelkit
