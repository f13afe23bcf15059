#include "kernelkit/op_info.hpp"

#include <iterator>
#include <ostream>

#include "kernelkit/ops/quant.hpp"
#include "kernelkit/profile.hpp"

namespace kernelkit {
namespace {

// The registry's rows (kernelkit/ops.def), in OpId order.
constexpr OpInfo kOps[] = {
#define KK_OP(id, family, dtypes, torch_ops, python, formula, reads, writes, hidden_vecs, batch_vecs, flops) \
  {OpId::id, #id, OpFamily::family, dtypes, torch_ops, python, formula, reads, writes, hidden_vecs, batch_vecs, flops},
#include "kernelkit/ops.def"
#undef KK_OP
};
static_assert([] {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (static_cast<size_t>(kOps[i].id) != i) return false;
  return true;
}());

bool is_linear(OpId id) {
  return id == OpId::linear_w8a16 || id == OpId::linear_w4a16 || id == OpId::linear_w8a8 || id == OpId::linear_fp8 ||
         id == OpId::linear_fp8_blockwise;
}

// The quantization ops' traffic. rows = m (linear) or the weight / token rows (quantizers), hidden = k.
uint64_t quant_bytes(OpId id, const OpShape& s, DType dtype) {
  const uint64_t e = dtype_size(dtype), rows = static_cast<uint64_t>(s.rows), k = static_cast<uint64_t>(s.hidden);
  const uint64_t groups = s.group > 0 ? k / static_cast<uint64_t>(s.group) : 1;  // fp32 scales per weight row
  const uint64_t block = kQuantBlockSize;
  switch (id) {  // x (or w) read once in its dtype, the codes written once (1 byte, INT4 half), the fp32 scales once
    case OpId::quantize_int8_per_channel:
    case OpId::quantize_per_token_int8:
    case OpId::quantize_per_token_fp8:
      return rows * k * (e + 1) + rows * 4;
    case OpId::quantize_int4_groupwise: return rows * k * e + rows * k / 2 + rows * groups * 4;
    case OpId::quantize_per_tensor_int8:
    case OpId::quantize_per_tensor_fp8:
      return rows * k * (e + 1) + 4;
    case OpId::quantize_per_token_group_int8:
    case OpId::quantize_per_token_group_fp8:
      return rows * k * (e + 1) + rows * groups * 4;
    case OpId::quantize_blockwise_int8:
    case OpId::quantize_blockwise_fp8:
      return rows * k * (e + 1) + (rows + block - 1) / block * ((k + block - 1) / block) * 4;
    default: break;
  }
  const uint64_t n = static_cast<uint64_t>(s.out_features > 0 ? s.out_features : s.hidden);
  // xq, qweight (1-byte values) and their fp32 scales (counted per token and channel, or per 1 x 128 slice and weight
  // block); out and bias in the output dtype
  if (id == OpId::linear_w8a8 || id == OpId::linear_fp8) return rows * k + n * k + 4 * (rows + n) + e * (rows * n + n);
  if (id == OpId::linear_fp8_blockwise) {
    const uint64_t k_blocks = (k + block - 1) / block;
    return rows * k + n * k + 4 * k_blocks * (rows + (n + block - 1) / block) + e * (rows * n + n);
  }
  // Codes, then fp32 scales (a row's, or its groups'; zero points, when given, add a byte a group: not counted).
  const uint64_t weight = (id == OpId::linear_w8a16 ? n * k : n * k / 2) + n * groups * 4;
  return weight + e * (rows * k + rows * n + n);  // + x, out, bias
}

}  // namespace

std::span<const OpInfo> op_table() { return kOps; }

std::string_view family_name(OpFamily family) {
  switch (family) {
    case OpFamily::norm: return "norm";
    case OpFamily::activation: return "activation";
    case OpFamily::rope: return "rope";
    case OpFamily::softmax: return "softmax";
    case OpFamily::attention: return "attention";
    case OpFamily::quant: return "quant";
    case OpFamily::gemm: return "gemm";
  }
  return "?";
}

const OpInfo& op_info(OpId id) { return kOps[static_cast<size_t>(id)]; }

std::ostream& operator<<(std::ostream& os, OpId id) { return os << op_info(id).name; }

std::optional<OpId> parse_op(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return op.id;
  return std::nullopt;
}

int op_weight_bits(OpId id) { return id == OpId::linear_w8a16 ? 8 : id == OpId::linear_w4a16 ? 4 : 0; }

std::optional<DType> op_fp8_dtype(OpId id) {
  switch (id) {
    case OpId::quantize_per_token_fp8:
    case OpId::quantize_per_tensor_fp8:
    case OpId::quantize_per_token_group_fp8:
    case OpId::quantize_blockwise_fp8:
    case OpId::linear_fp8:
    case OpId::linear_fp8_blockwise:
      return DType::f8e4m3;
    default:
      break;
  }
  return op_quant_out_dtype(id) == DType::f8e4m3 ? std::optional(DType::f8e4m3) : std::nullopt;
}

std::optional<DType> op_quant_out_dtype(OpId id) {
  switch (id) {
    case OpId::rms_norm_quant_int8:
    case OpId::fused_add_rms_norm_quant_int8:
    case OpId::silu_and_mul_quant_int8:
      return DType::i8;
    case OpId::rms_norm_quant_fp8:
    case OpId::fused_add_rms_norm_quant_fp8:
    case OpId::silu_and_mul_quant_fp8:
      return DType::f8e4m3;
    default:
      return std::nullopt;
  }
}

uint64_t op_bytes(OpId id, const OpShape& s, DType dtype) {
  const OpInfo& op = op_info(id);
  if (op.family == OpFamily::quant) return quant_bytes(id, s, dtype);
  const uint64_t e = dtype_size(dtype);
  const uint64_t row = static_cast<uint64_t>(s.rows) * static_cast<uint64_t>(s.hidden);
  // Fused quantization: q (1 byte an element) and one fp32 scale a row, outside the dtype's units.
  const uint64_t quantized = op_quant_out_dtype(id) ? row + 4 * static_cast<uint64_t>(s.rows) : 0;
  return quantized + e * (row * static_cast<uint64_t>(op.row_tensors_read + op.row_tensors_written) +
                          static_cast<uint64_t>(s.hidden) * static_cast<uint64_t>(op.hidden_vectors_read) +
                          static_cast<uint64_t>(s.batch * s.hidden) * static_cast<uint64_t>(op.batch_vectors_read));
}

double op_flops(OpId id, const OpShape& s) {
  if (is_linear(id))
    return 2.0 * static_cast<double>(s.rows) * static_cast<double>(s.out_features > 0 ? s.out_features : s.hidden) *
           static_cast<double>(s.hidden);
  return op_info(id).flops_per_element * static_cast<double>(s.rows) * static_cast<double>(s.hidden);
}

int64_t attention_pairs(int64_t s_q, int64_t s_k, bool causal) {
  if (s_q <= 0 || s_k <= 0) return 0;
  if (!causal) return s_q * s_k;
  // Query i sees min(s_k, max(0, i + s_k - s_q + 1)) keys.
  if (s_q <= s_k) return s_q * (s_k - s_q) + s_q * (s_q + 1) / 2;
  return s_k * (s_k + 1) / 2;  // the first s_q - s_k queries see nothing
}

uint64_t attention_bytes(OpId id, const AttentionShape& s, DType dtype) {
  if (op_info(id).family != OpFamily::attention) return 0;
  const uint64_t e = dtype_size(dtype);
  const uint64_t qo = static_cast<uint64_t>(s.batch * s.s_q * s.heads * s.head_dim);
  const uint64_t kv = static_cast<uint64_t>(s.batch * s.s_k * s.kv_heads * s.head_dim);
  const uint64_t lse = static_cast<uint64_t>(s.batch * s.heads * s.s_q) * sizeof(float);
  return e * 2 * qo + dtype_size(s.kv_dtype.value_or(dtype)) * 2 * kv + lse;
}

double attention_flops(OpId id, const AttentionShape& s) {
  if (op_info(id).family != OpFamily::attention) return 0;
  return 4.0 * static_cast<double>(s.batch) * static_cast<double>(s.heads) * static_cast<double>(s.head_dim) *
         static_cast<double>(attention_pairs(s.s_q, s.s_k, s.causal));
}

double op_intensity(OpId id, const OpShape& s, DType dtype) {
  const uint64_t b = op_bytes(id, s, dtype);
  return b ? op_flops(id, s) / static_cast<double>(b) : 0.0;
}

bool op_memory_bound(OpId id, const OpShape& s, DType dtype, const DeviceProfile& p) {
  const double ridge = p.fp32_tflops * 1e12 / (p.hbm_gbps * 1e9);  // FLOP per byte where the roofs meet
  return op_intensity(id, s, dtype) < ridge;
}

bool op_supports(OpId id, DType dtype, const DeviceProfile& p) {
  return (op_info(id).dtypes & dtype_bit(dtype)) != 0 && p.supports(dtype);
}

}  // namespace kernelkit
