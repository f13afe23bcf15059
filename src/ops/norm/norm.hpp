// Internal: the one parameter block of the row-norm family, shared by validation, the CPU reference and the CUDA
// launcher. Every public norm op (rms_norm, fused_add_rms_norm, layer_norm, ada_layer_norm, rms_norm_gelu and the
// norm + quantization ops) is a RowNormArgs with a different variant; the kernels are one template over that variant.
#pragma once

#include <cstdint>
#include <optional>

#include "kernelkit/op_info.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::detail {

enum class NormType : uint8_t { rms, layer };

struct RowNormArgs {
  OpId op{};
  NormType norm = NormType::rms;
  bool residual_add = false;  // residual += x, normalize residual (fused_add_rms_norm)
  bool gelu = false;          // tanh-GELU epilogue (rms_norm_gelu)
  DType dtype{};
  Device device{};
  int64_t rows = 0, hidden = 0;
  void* out = nullptr;            // [rows, hidden], row stride out_stride
  const void* x = nullptr;        // [rows, hidden], row stride x_stride
  void* residual = nullptr;       // [rows, hidden], read and written (fused add only)
  const void* weight = nullptr;   // [hidden] or null
  const void* bias = nullptr;     // [hidden] or null
  const void* scale = nullptr;    // [batch, hidden] or null (ada)
  const void* shift = nullptr;    // [batch, hidden] or null (ada)
  int64_t out_stride = 0, x_stride = 0, residual_stride = 0, mod_stride = 0;  // elements
  int64_t rows_per_batch = 1;     // row r uses scale/shift row r / rows_per_batch
  int64_t batch = 1;
  float eps = 1e-6f;
  float weight_offset = 0.0f;     // y *= (weight_offset + w): 1 for Gemma's RMSNorm
  // Norm + quantization (op_quant_out_dtype(op) is q's dtype): y rounded to the dtype, then quantized into q.
  void* q = nullptr;          // i8 or f8e4m3 [rows, hidden], contiguous
  float* q_scales = nullptr;  // f32 [rows] written (one scale a token), or [1] read (static_scale)
  bool static_scale = false;
  int align_bytes = 16;           // largest power of two <= 16 dividing every pointer and row stride in bytes

  OpShape shape() const { return {rows, hidden, batch, align_bytes}; }
};

// Input checks that need no device: shapes, dtypes, strides, eps, devices agreeing; and, for CUDA tensors, dtype
// support on `profile` (pass the active profile; nullptr skips that check). Names the argument and the expectation.
Status validate_row_norm(const RowNormArgs& a, const DeviceProfile* profile);

// fp64-accumulating reference on host memory; rounds each output once to the dtype (the residual too, as the kernel).
Status row_norm_reference(const RowNormArgs& a);

// CUDA launch (norm_cuda.cu): device checks, plan from the active profile, launch on `stream`.
Status row_norm_cuda(const RowNormArgs& a, Stream stream);
// Resident blocks per SM of the kernel that `plan` launches for `op` (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
Status row_norm_occupancy(OpId op, DType dtype, const LaunchPlan& plan, int* blocks_per_sm);

}  // namespace kernelkit::detail
