// Every op is described once, in the registry kernelkit/ops.def: name, family, dtypes, the PyTorch ops and Python
// functions that expose it, formula, the bytes it must move and the FLOPs it does. Tests, `kernelkit verify`, the
// benchmark and the planner all read this table; nothing re-derives bytes elsewhere.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string_view>

#include "kernelkit/dtype.hpp"

namespace kernelkit {

struct DeviceProfile;

// One enumerator per registry row (kernelkit/ops.def), in its order.
enum class OpId : uint8_t {
#define KK_OP(id, ...) id,
#include "kernelkit/ops.def"
#undef KK_OP
};

// The folder src/ops/<family>/ an op lives in. (row_norm and elementwise are the families' former names.)
enum class OpFamily : uint8_t {
  norm,
  activation,
  rope,
  softmax,
  attention,
  quant,
  gemm,
  row_norm = norm,
  elementwise = activation,
};
std::string_view family_name(OpFamily family);  // "norm", "activation", ... (the folder's name)

// A set of dtypes (bit i: DType i), as the registry's dtypes column spells it.
using DTypeSet = uint32_t;
constexpr DTypeSet dtype_bit(DType t) { return DTypeSet{1} << static_cast<unsigned>(t); }
constexpr DTypeSet kFloatTypes = dtype_bit(DType::f32) | dtype_bit(DType::f16) | dtype_bit(DType::bf16);
constexpr DTypeSet kHalfTypes = dtype_bit(DType::f16) | dtype_bit(DType::bf16);

// The weight bits of a linear_w*a16 op (8 or 4); 0 for every other op.
int op_weight_bits(OpId id);
// The FP8 dtype an op writes (the quantize_*_fp8 ops) or reads (linear_fp8*) whatever its activation dtype: f8e4m3, or
// nullopt. A profile without FP8 refuses such an op in every dtype.
std::optional<DType> op_fp8_dtype(OpId id);
// The 1-byte dtype q of an op fused with quantization (rms_norm_quant_*, fused_add_rms_norm_quant_*,
// silu_and_mul_quant_*): i8 or f8e4m3; nullopt for every other op.
std::optional<DType> op_quant_out_dtype(OpId id);

// The problem size of a row op: `rows` rows of `hidden` elements (for activations, `hidden` is the output width d); `batch` groups of rows for per-batch parameters
// (ada_layer_norm's scale/shift); `align_bytes` is the largest power of two (<= 16) dividing every pointer and row
// stride in bytes, which bounds the vector width.
struct OpShape {
  int64_t rows = 0;
  int64_t hidden = 0;
  int64_t batch = 1;
  int align_bytes = 16;
  // Quantization ops: rows = m tokens (or n weight rows for a quantizer), hidden = k; out_features = n of a linear op
  // (0: n = k); group = the scale group along k of quantize_int4_groupwise and quantize_per_token_group_* (0: one
  // scale a row).
  int64_t out_features = 0;
  int group = 0;
};

// The problem size of an attention op (not a row op: its bytes and FLOPs come from this shape through attention_bytes
// and attention_flops). `batch` sequences of `s_q` queries and `s_k` keys (uniform lengths; for varlen, sum the
// per-sequence values), `heads` query heads sharing `kv_heads` K/V heads (GQA/MQA), `head_dim` elements per head.
// `kv_dtype`: the K/V elements' type where it is not the activations' (an f8e4m3 KV cache: 1 byte an element).
struct AttentionShape {
  int64_t batch = 1, s_q = 0, s_k = 0, heads = 1, kv_heads = 1, head_dim = 0;
  bool causal = false;
  std::optional<DType> kv_dtype = std::nullopt;
};

struct OpInfo {
  OpId id;
  std::string_view name;
  OpFamily family;
  DTypeSet dtypes;              // the activation dtypes it takes (a profile without bf16 still refuses bf16)
  std::string_view torch_ops;   // the torch.ops.kernelkit ops that run it, space-separated
  std::string_view python;      // the kernelkit.* Python functions that call it, space-separated
  std::string_view formula;
  // Minimal traffic, in units of the activation dtype: each [rows, hidden] tensor read or written once, each [hidden]
  // parameter read once, each [batch, hidden] parameter read once.
  int row_tensors_read;
  int row_tensors_written;
  int hidden_vectors_read;
  int batch_vectors_read;
  double flops_per_element;  // counted on the default configuration (weights present)
};

std::span<const OpInfo> op_table();
const OpInfo& op_info(OpId id);
std::ostream& operator<<(std::ostream& os, OpId id);  // its name (also what GoogleTest prints)
std::optional<OpId> parse_op(std::string_view name);

uint64_t op_bytes(OpId id, const OpShape& shape, DType dtype);  // minimal bytes moved
double op_flops(OpId id, const OpShape& shape);
// Attention family: q and o moved once ([b, s_q, h, d], the dtype), k and v read once per KV head ([b, s_k, h_kv, d]:
// GQA-aware; at kv_dtype's size when given), the log-sum-exp written once ([b, h, s_q], f32). FLOPs: 2 GEMMs of 2 * d FLOP per visible (query, key)
// pair and head: 4 * b * h * d * pairs, pairs = s_q * s_k, or the causally visible pairs (about half for s_q = s_k).
// op_bytes / op_flops return 0 for attention ops; these return 0 for row ops.
uint64_t attention_bytes(OpId id, const AttentionShape& shape, DType dtype);
double attention_flops(OpId id, const AttentionShape& shape);
// (query, key) pairs a sequence computes: s_q * s_k, or with the bottom-right causal mask (query i sees keys
// j <= i + s_k - s_q) the visible ones only.
int64_t attention_pairs(int64_t s_q, int64_t s_k, bool causal);
// FLOP per byte, and whether it is below this profile's ridge point (CUDA-core fp32 peak / bandwidth).
double op_intensity(OpId id, const OpShape& shape, DType dtype);
bool op_memory_bound(OpId id, const OpShape& shape, DType dtype, const DeviceProfile& profile);

// The dtypes an op accepts on a profile: its registry dtypes that the profile supports (bf16 needs sm_80).
bool op_supports(OpId id, DType dtype, const DeviceProfile& profile);

}  // namespace kernelkit
