#include "kernelkit/op_info.hpp"

#include <array>

#include "kernelkit/profile.hpp"

namespace kernelkit {
namespace {

// FLOPs per element, counted once here: square+add (2) and scale by rstd and weight (2) for RMS; for layer norm a sum
// (1), (x-mean)^2 accumulated (3) and (x-mean)*rstd*w+b (3); +1 for the residual add; +2 for the modulation;
// the tanh-GELU epilogue as ~10 (cube, two mul-adds, tanh, half-product).
// Activations per output element: silu ~4 (exp, add, divide, multiply), erf-GELU ~8, tanh-GELU ~10; +1 for the
// gated product. Gated ops read two [rows, d] halves (or tensors) and write one.
// RoPE: for OpShape{rows = tokens x (heads + kv_heads), hidden = head_dim}: q and k read and written once (the cos/sin
// reads are per token, small next to the heads, and left out); ~3 FLOP per element (two multiplies and an add).
// Softmax: x read, y written; ~5 FLOP per element (scale, max, exp, sum, divide).
// Attention: the row fields are 0; bytes and FLOPs come from AttentionShape (attention_bytes / attention_flops below).
// Quantization (row counts unused: quant_bytes below): quantizers read w once and write q and the fp32 scales, ~3 FLOP
// per element (|w|, max, divide-and-round); the linear ops are 2 m n k FLOP (dequantization not counted) and move the
// quantized weight bytes, their fp32 scales, x, out and the bias once: at m = 1 the weight bytes are nearly all of it.
constexpr std::array<OpInfo, 23> kOps = {{
    {OpId::rms_norm, "rms_norm", OpFamily::row_norm, "y = x / sqrt(mean(x^2) + eps) * (offset + w)", 1, 1, 1, 0, 4},
    {OpId::fused_add_rms_norm, "fused_add_rms_norm", OpFamily::row_norm,
     "r = x + r; x = r / sqrt(mean(r^2) + eps) * (offset + w)", 2, 2, 1, 0, 5},
    {OpId::layer_norm, "layer_norm", OpFamily::row_norm, "y = (x - mean) / sqrt(var + eps) * w + b", 1, 1, 2, 0, 7},
    {OpId::ada_layer_norm, "ada_layer_norm", OpFamily::row_norm,
     "y = layer_norm(x) * (1 + scale[b]) + shift[b]", 1, 1, 0, 2, 9},
    {OpId::rms_norm_gelu, "rms_norm_gelu", OpFamily::row_norm, "y = gelu_tanh(x / sqrt(mean(x^2) + eps) * w)", 1, 1,
     1, 0, 14},
    {OpId::gelu, "gelu", OpFamily::elementwise, "y = x * Phi(x)", 1, 1, 0, 0, 8},
    {OpId::gelu_tanh, "gelu_tanh", OpFamily::elementwise, "y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))", 1,
     1, 0, 0, 10},
    {OpId::silu, "silu", OpFamily::elementwise, "y = x * sigmoid(x)", 1, 1, 0, 0, 4},
    {OpId::gelu_and_mul, "gelu_and_mul", OpFamily::elementwise, "y = gelu(x[..., :d]) * x[..., d:]", 2, 1, 0, 0, 9},
    {OpId::gelu_tanh_and_mul, "gelu_tanh_and_mul", OpFamily::elementwise, "y = gelu_tanh(x[..., :d]) * x[..., d:]",
     2, 1, 0, 0, 11},
    {OpId::silu_and_mul, "silu_and_mul", OpFamily::elementwise, "y = silu(x[..., :d]) * x[..., d:]", 2, 1, 0, 0, 5},
    {OpId::geglu, "geglu", OpFamily::elementwise, "y = gelu(a) * b", 2, 1, 0, 0, 9},
    {OpId::rotary_embedding, "rotary_embedding", OpFamily::rope,
     "(x_i, x_j) <- (x_i cos - x_j sin, x_j cos + x_i sin) for each rotated pair (i, j)", 1, 1, 0, 0, 3},
    {OpId::softmax, "softmax", OpFamily::softmax, "y = exp(s x - max(s x)) / sum(exp(s x - max(s x)))", 1, 1, 0, 0, 5},
    {OpId::causal_softmax, "causal_softmax", OpFamily::softmax,
     "y = softmax(s x with key j > query i + s_k - s_q masked to -inf)", 1, 1, 0, 0, 5},
    {OpId::attention, "attention", OpFamily::attention,
     "o = softmax(scale q k^T [causal: key j > query i + s_k - s_q masked]) v; lse = log sum exp(scale q k^T)", 0, 0,
     0, 0, 0},
    {OpId::decode_attention, "decode_attention", OpFamily::attention,
     "o = softmax(scale q k_cache^T [causal]) v_cache over each sequence's cache (split-KV, merged by lse)", 0, 0, 0,
     0, 0},
    {OpId::quantize_int8_per_channel, "quantize_int8_per_channel", OpFamily::quant,
     "s[r] = max|w[r, :]| / 127; q = round(w / s) (i8)", 0, 0, 0, 0, 3},
    {OpId::quantize_per_token_int8, "quantize_per_token_int8", OpFamily::quant,
     "s[t] = max|x[t, :]| / 127; q = round(x / s) (i8)", 0, 0, 0, 0, 3},
    {OpId::quantize_int4_groupwise, "quantize_int4_groupwise", OpFamily::quant,
     "s[r, g] = max|w[r, group g]| / 7; q = round(w / s) (i4, kernel layout)", 0, 0, 0, 0, 3},
    {OpId::linear_w8a16, "linear_w8a16", OpFamily::quant, "y = x @ (q * s[n])^T + b, q i8 per channel", 0, 0, 0, 0,
     2},
    {OpId::linear_w4a16, "linear_w4a16", OpFamily::quant, "y = x @ (q * s[n, k / group])^T + b, q i4 group-wise", 0, 0,
     0, 0, 2},
    {OpId::linear_w8a8, "linear_w8a8", OpFamily::quant,
     "y = (xq @ q^T as exact i32) * sx[m] * sw[n] + b, xq and q i8 (INT8 tensor cores)", 0, 0, 0, 0, 2},
}};

bool is_linear(OpId id) {
  return id == OpId::linear_w8a16 || id == OpId::linear_w4a16 || id == OpId::linear_w8a8;
}

// The quantization ops' traffic. rows = m (linear) or the weight / token rows (quantizers), hidden = k.
uint64_t quant_bytes(OpId id, const OpShape& s, DType dtype) {
  const uint64_t e = dtype_size(dtype), rows = static_cast<uint64_t>(s.rows), k = static_cast<uint64_t>(s.hidden);
  const uint64_t groups = s.group > 0 ? k / static_cast<uint64_t>(s.group) : 1;  // fp32 scales per weight row
  switch (id) {
    case OpId::quantize_int8_per_channel:
    case OpId::quantize_per_token_int8: return rows * k * (e + 1) + rows * 4;
    case OpId::quantize_int4_groupwise: return rows * k * e + rows * k / 2 + rows * groups * 4;
    default: break;
  }
  const uint64_t n = static_cast<uint64_t>(s.out_features > 0 ? s.out_features : s.hidden);
  if (id == OpId::linear_w8a8)  // xq, qweight (i8) and their fp32 scales; out and bias in the output dtype
    return rows * k + n * k + 4 * (rows + n) + e * (rows * n + n);
  const uint64_t weight = id == OpId::linear_w8a16 ? n * k + n * 4 : n * k / 2 + n * groups * 4;
  return weight + e * (rows * k + rows * n + n);  // + x, out, bias
}

}  // namespace

std::span<const OpInfo> op_table() { return kOps; }

const OpInfo& op_info(OpId id) { return kOps[static_cast<size_t>(id)]; }

std::optional<OpId> parse_op(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return op.id;
  return std::nullopt;
}

int op_weight_bits(OpId id) { return id == OpId::linear_w8a16 ? 8 : id == OpId::linear_w4a16 ? 4 : 0; }

uint64_t op_bytes(OpId id, const OpShape& s, DType dtype) {
  const OpInfo& op = op_info(id);
  if (op.family == OpFamily::quant) return quant_bytes(id, s, dtype);
  const uint64_t e = dtype_size(dtype);
  const uint64_t row = static_cast<uint64_t>(s.rows) * static_cast<uint64_t>(s.hidden);
  return e * (row * static_cast<uint64_t>(op.row_tensors_read + op.row_tensors_written) +
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
  return e * (2 * qo + 2 * kv) + lse;
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

// The linear ops take f16 / bf16 activations only (the quantizers also take f32 weights).
bool op_supports(OpId id, DType dtype, const DeviceProfile& p) {
  if (is_linear(id) && dtype == DType::f32) return false;
  if (op_info(id).family == OpFamily::attention) return (dtype == DType::f16 || dtype == DType::bf16) && p.supports(dtype);
  return is_floating(dtype) && p.supports(dtype);
}

}  // namespace kernelkit
