// The Llama decoder layer on kernelkit ops (llama.hpp). Per call with T = b s tokens, workspace rows of T:
//   norm  [T, hidden]          rms_norm(x), later rms_norm(h)
//   qkv   [T, (h + 2 kv) d]    q | k | v, RoPE applied to q and k in place; k, v also copied into the cache
//   attn  [T, h d]             attention output
//   proj  [T, hidden]          o_proj output, turned into norm(h) by fused_add_rms_norm (x becomes h in place)
//   gate_up [T, 2 inter], act [T, inter]; down_proj accumulates into x: out = h + mlp.
// FP8 projections read e4m3 codes with one f32 scale per token instead of norm and act (neither is allocated):
//   codes [T, k], scales [T]   the input of the next projection (k = hidden, h d or inter), one buffer reused:
//                              rms_norm_quant(x) -> qkv; quantize_per_token_fp8(attn) -> o_proj;
//                              fused_add_rms_norm_quant(o, x) (x becomes h) -> gate_up; silu_and_mul_quant -> down,
//                              which accumulates into x (linear_fp8's out +=).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernelkit/llama.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/profile.hpp"

namespace kernelkit {
namespace {

Status err(const std::string& what) { return invalid_argument("LlamaLayer: " + what); }

Status expect_shape(const TensorView& t, const char* arg, std::initializer_list<int64_t> shape, DType dtype,
                    Device device) {
  TensorView want = TensorView::contiguous(nullptr, dtype, shape, device);
  bool same = t.ndim == want.ndim && t.dtype == dtype && t.device == device;
  for (int d = 0; same && d < t.ndim; ++d) same = t.shape[d] == want.shape[d];
  if (!same)
    return err(std::string(arg) + " must be " + std::string(dtype_name(dtype)) + " " + want.shape_string() + " on " +
               to_string(device) + ", got " + std::string(dtype_name(t.dtype)) + " " + t.shape_string() + " on " +
               to_string(t.device));
  return Status::Ok();
}

// Row-major view [rows, cols] of `buf` with row stride `stride` (elements), starting `offset` elements in.
TensorView rows_of(const Buffer& buf, DType dt, int64_t rows, int64_t cols, int64_t stride, int64_t offset = 0) {
  return TensorView::strided(static_cast<char*>(buf.data()) + offset * static_cast<int64_t>(dtype_size(dt)), dt,
                             {rows, cols}, {stride, 1}, buf.device());
}

}  // namespace

Status LlamaLayer::init(const LlamaLayerConfig& c, const LlamaLayerWeights& w, DType dtype, Device device,
                        int64_t max_tokens) {
  if (c.hidden <= 0 || c.intermediate <= 0 || c.heads <= 0 || c.kv_heads <= 0 || c.head_dim <= 0 ||
      c.heads % c.kv_heads != 0 || c.head_dim % 2 != 0)
    return err("config needs positive sizes, heads a multiple of kv_heads and an even head_dim");
  if (max_tokens <= 0 || c.max_position <= 0) return err("max_tokens and max_position must be > 0");
  const int64_t qkv_rows = (c.heads + 2 * c.kv_heads) * c.head_dim;
  KK_RETURN_IF_ERROR(expect_shape(w.input_norm, "weights.input_norm", {c.hidden}, dtype, device));
  KK_RETURN_IF_ERROR(expect_shape(w.post_norm, "weights.post_norm", {c.hidden}, dtype, device));
  cfg_ = c;
  w_ = w;
  dtype_ = dtype;
  device_ = device;
  KK_RETURN_IF_ERROR(check_linear(w.qkv, "weights.qkv", qkv_rows, c.hidden));
  KK_RETURN_IF_ERROR(check_linear(w.o, "weights.o", c.hidden, c.heads * c.head_dim));
  KK_RETURN_IF_ERROR(check_linear(w.gate_up, "weights.gate_up", 2 * c.intermediate, c.hidden));
  KK_RETURN_IF_ERROR(check_linear(w.down, "weights.down", c.hidden, c.intermediate));
  KK_RETURN_IF_ERROR(check_fp8(w));
  fp8_ = w.qkv.form == LinearForm::fp8;
  max_tokens_ = max_tokens;
  if (device.type == DeviceType::cuda) KK_RETURN_IF_ERROR(gemm_.init(device.index));

  const size_t e = dtype_size(dtype), T = static_cast<size_t>(max_tokens);
  for (auto [buf, elems] : {std::pair{&qkv_, T * qkv_rows},
                            {&attn_, T * c.heads * c.head_dim},
                            {&proj_, T * c.hidden},
                            {&gate_up_, T * 2 * c.intermediate}})
    KK_RETURN_IF_ERROR(buf->alloc(device, elems * e));
  if (fp8_) {
    const size_t widest = static_cast<size_t>(std::max({c.hidden, c.heads * c.head_dim, c.intermediate}));
    KK_RETURN_IF_ERROR(codes_.alloc(device, T * widest));  // one byte a code
    KK_RETURN_IF_ERROR(code_scales_.alloc(device, T * sizeof(float)));
  } else {
    KK_RETURN_IF_ERROR(norm_.alloc(device, T * c.hidden * e));
    KK_RETURN_IF_ERROR(act_.alloc(device, T * c.intermediate * e));
  }
  KK_RETURN_IF_ERROR(positions_.alloc(device, T * sizeof(int64_t)));
  KK_RETURN_IF_ERROR(host_positions_.alloc(Device::cpu(), T * sizeof(int64_t)));

  // The cos/sin table f32 [max_position, head_dim] (the whole head rotates, neox).
  std::vector<float> table(static_cast<size_t>(c.max_position * c.head_dim));
  rope_cos_sin_table(table.data(), c.max_position, c.head_dim, c.rope_theta);
  KK_RETURN_IF_ERROR(cos_sin_.alloc(device, table.size() * sizeof(float)));
  KK_RETURN_IF_ERROR(copy_rows(cos_sin_.data(), 0, table.data(), 0, table.size() * sizeof(float), 1, device, nullptr,
                               /*from_host=*/true));
  return Status::Ok();  // a copy from pageable host memory has left `table` when copy_rows returns
}

Status LlamaLayer::check_cache(const TensorView& cache, const char* arg, int64_t batch, int64_t needed) const {
  if (cache.ndim != 4 || cache.shape[0] != batch || cache.shape[2] != cfg_.kv_heads ||
      cache.shape[3] != cfg_.head_dim || cache.dtype != dtype_ || !(cache.device == device_))
    return err(std::string(arg) + " must be " + std::string(dtype_name(dtype_)) + " [b=" + std::to_string(batch) +
               ", capacity, kv_heads=" + std::to_string(cfg_.kv_heads) + ", head_dim=" +
               std::to_string(cfg_.head_dim) + "] on " + to_string(device_) + ", got " + cache.shape_string());
  if (cache.shape[1] < needed)
    return err(std::string(arg) + " holds " + std::to_string(cache.shape[1]) + " positions, " +
               std::to_string(needed) + " needed");
  if (cache.strides[3] != 1 || cache.strides[2] != cfg_.head_dim || cache.strides[1] != cfg_.kv_heads * cfg_.head_dim)
    return err(std::string(arg) + " must be contiguous within each sequence ([capacity, kv_heads, head_dim] rows)");
  return Status::Ok();
}

namespace {
const char* form_name(LinearForm f) {
  switch (f) {
    case LinearForm::dense:
      return "dense";
    case LinearForm::weight_only:
      return "weight-only";
    case LinearForm::fp8:
      return "FP8";
  }
  return "?";
}
}  // namespace

Status LlamaLayer::check_linear(const LayerLinear& l, const char* arg, int64_t out, int64_t in) const {
  const std::string a(arg);
  if (l.form == LinearForm::dense) {
    if (l.bits != 0)
      return err(a + ".bits is " + std::to_string(l.bits) +
                 " but its form is dense: make weight-only weights with LayerLinear::quantized");
    return expect_shape(l.w, arg, {out, in}, dtype_, device_);
  }
  if (l.form == LinearForm::fp8) {  // linear_fp8 checks the rest (contiguity, alignment on CUDA)
    KK_RETURN_IF_ERROR(expect_shape(l.qweight, (a + ".qweight").c_str(), {out, in}, DType::f8e4m3, device_));
    return expect_shape(l.scales, (a + ".scales").c_str(), {out}, DType::f32, device_);
  }
  if (l.form != LinearForm::weight_only)
    return err(a + ".form " + std::to_string(static_cast<int>(l.form)) + " is not dense, weight_only or fp8");
  if (l.bits != 8 && l.bits != 4) return err(a + ".bits must be 8 or 4, got " + std::to_string(l.bits));
  // The quantized layout, dtypes and scales are checked by linear_weight_only itself; here the shape of the layer.
  const int64_t cols = l.bits == 8 ? in : in / 2;
  if (l.qweight.ndim != 2 || l.qweight.shape[0] != out || l.qweight.shape[1] != cols || !(l.qweight.device == device_))
    return err(a + ".qweight must be [" + std::to_string(out) + ", " + std::to_string(cols) + "] on " +
               to_string(device_) + ", got " + l.qweight.shape_string());
  return Status::Ok();
}

// FP8 takes all four projections or none; its GEMM's k (hidden, heads head_dim, intermediate) a multiple of 16; and on
// CUDA a profile with FP8 (the one the ops will launch under: KERNELKIT_PROFILE, else the device's).
Status LlamaLayer::check_fp8(const LlamaLayerWeights& w) const {
  const bool fp8 = w.qkv.form == LinearForm::fp8;
  for (auto [l, arg] : {std::pair{&w.o, "weights.o"}, {&w.gate_up, "weights.gate_up"}, {&w.down, "weights.down"}})
    if ((l->form == LinearForm::fp8) != fp8)
      return err(std::string(arg) + " is " + form_name(l->form) + " but weights.qkv is " + form_name(w.qkv.form) +
                 ": FP8 takes all four projections or none (the norms and SwiGLU then write e4m3 codes for them)");
  if (!fp8) return Status::Ok();
  const LlamaLayerConfig& c = cfg_;
  for (auto [k, what] :
       {std::pair{c.hidden, "hidden"}, {c.heads * c.head_dim, "heads * head_dim"}, {c.intermediate, "intermediate"}})
    if (k % 16 != 0)
      return err(std::string("FP8 projections need config.") + what + " to be a multiple of 16 (linear_fp8's k), got " +
                 std::to_string(k));
  if (device_.type != DeviceType::cuda) return Status::Ok();
  std::optional<DeviceProfile> forced;
  KK_RETURN_IF_ERROR(profile_override(&forced));
  DeviceProfile prof;
  if (forced)
    prof = *forced;
  else
    KK_RETURN_IF_ERROR(active_profile(device_.index, &prof));
  if (!prof.supports(DType::f8e4m3))
    return unsupported("LlamaLayer: weights.qkv.qweight dtype f8e4m3 " + prof.dtype_refusal(DType::f8e4m3) +
                       " (here: LayerLinear::quantized, bits 8 or 4)");
  return Status::Ok();
}

Status LlamaLayer::project(const TensorView& y, const TensorView& x, const LayerLinear& l, bool accumulate,
                           Stream stream) {
  if (l.form == LinearForm::dense) {
    LinearOptions opt;
    opt.accumulate = accumulate;
    return linear(y, x, l.w, nullptr, opt, gemm_.impl() ? &gemm_ : nullptr, stream);
  }
  // Any token count: a GEMV for decode, tensor cores for prefill.
  return linear_weight_only(y, x, l.qweight, l.scales, l.bits, l.group, std::nullopt, stream, accumulate);
}

Status LlamaLayer::prefill(const TensorView& x, const TensorView& k_cache, const TensorView& v_cache, Stream stream) {
  if (x.ndim != 3) return err("prefill: x must be [b, s, hidden], got " + x.shape_string());
  return forward(x, x.shape[0], x.shape[1], k_cache, v_cache, 0, stream);
}

Status LlamaLayer::decode(const TensorView& x, const TensorView& k_cache, const TensorView& v_cache,
                          int64_t position, Stream stream) {
  if (x.ndim != 2) return err("decode: x must be [b, hidden], got " + x.shape_string());
  if (position < 0) return err("decode: position must be >= 0, got " + std::to_string(position));
  return forward(x, x.shape[0], 1, k_cache, v_cache, position, stream);
}

// seq > 1 or position == 0: prefill of positions 0 .. seq-1; seq == 1 with position p: decode at p.
Status LlamaLayer::forward(const TensorView& x, int64_t b, int64_t s, const TensorView& k_cache,
                           const TensorView& v_cache, int64_t position, Stream stream) {
  const LlamaLayerConfig& c = cfg_;
  const int64_t T = b * s, H = c.hidden, D = c.head_dim, qkv_w = (c.heads + 2 * c.kv_heads) * D;
  const int64_t last = position + s;  // positions used: [position, last)
  if (T <= 0 || T > max_tokens_)
    return err("a call takes 1 .. " + std::to_string(max_tokens_) + " tokens (init's max_tokens), got " +
               std::to_string(T));
  if (last > c.max_position)
    return err("positions up to " + std::to_string(last - 1) + " exceed max_position " + std::to_string(c.max_position));
  if (x.size(-1) != H || x.dtype != dtype_ || !(x.device == device_) || x.stride(-1) != 1 ||
      (x.ndim == 3 ? x.strides[1] != H || x.strides[0] != s * H : x.strides[0] != H))
    return err("x must be contiguous " + std::string(dtype_name(dtype_)) + " [.., hidden=" + std::to_string(H) +
               "] on " + to_string(device_) + ", got " + x.shape_string());
  KK_RETURN_IF_ERROR(check_cache(k_cache, "k_cache", b, last));
  KK_RETURN_IF_ERROR(check_cache(v_cache, "v_cache", b, last));
  const size_t e = dtype_size(dtype_);
  const TensorView x2 = TensorView::contiguous(x.data, dtype_, {T, H}, device_);

  // Positions of the T tokens (sequence-major), staged on the host.
  auto* hp = static_cast<int64_t*>(host_positions_.data());
  for (int64_t t = 0; t < T; ++t) hp[t] = position + t % s;
  void* pos = positions_.data();
  if (device_.type == DeviceType::cpu) pos = hp;
  else KK_RETURN_IF_ERROR(copy_rows(pos, 0, hp, 0, T * sizeof(int64_t), 1, device_, stream, true));

  // 1. q | k | v = qkv_proj(rms_norm(x)); RoPE on q and k in place.
  // FP8: the codes [T, k] and scales [T] of the next projection's input (one buffer, reused by each step), and that
  // projection: y [T, out] (+)= dequant(codes) @ dequant(W)^T.
  auto codes = [&](int64_t k) { return rows_of(codes_, DType::f8e4m3, T, k, k); };
  const TensorView scales = fp8_ ? TensorView::contiguous(code_scales_.data(), DType::f32, {T}, device_) : TensorView();
  auto project_fp8 = [&](const TensorView& y, int64_t k, const LayerLinear& l, bool accumulate) {
    return linear_fp8(y, codes(k), scales, l.qweight, l.scales, std::nullopt, stream, /*fast_accumulation=*/false,
                      accumulate);
  };
  const TensorView qkv = rows_of(qkv_, dtype_, T, qkv_w, qkv_w);
  if (fp8_) {
    KK_RETURN_IF_ERROR(rms_norm_quant(codes(H), scales, x2, w_.input_norm, c.eps, false, 0.0f, stream));
    KK_RETURN_IF_ERROR(project_fp8(qkv, H, w_.qkv, false));
  } else {
    const TensorView norm = rows_of(norm_, dtype_, T, H, H);
    KK_RETURN_IF_ERROR(rms_norm(norm, x2, w_.input_norm, c.eps, 0.0f, stream));
    KK_RETURN_IF_ERROR(project(qkv, norm, w_.qkv, false, stream));
  }
  char* base = static_cast<char*>(qkv_.data());
  // `heads` heads starting `offset` elements into each fused row: [T, heads, D], or [b, s, heads, D] for attention.
  auto fused = [&](int64_t offset, int64_t heads, bool by_sequence) {
    void* p = base + offset * static_cast<int64_t>(e);
    if (by_sequence) return TensorView::strided(p, dtype_, {b, s, heads, D}, {s * qkv_w, qkv_w, D, 1}, device_);
    return TensorView::strided(p, dtype_, {T, heads, D}, {qkv_w, D, 1}, device_);
  };
  const int64_t k_off = c.heads * D, v_off = (c.heads + c.kv_heads) * D;
  const TensorView q3 = fused(0, c.heads, false), k3 = fused(k_off, c.kv_heads, false);
  KK_RETURN_IF_ERROR(rotary_embedding(q3, k3, q3, k3, TensorView::contiguous(pos, DType::i64, {T}, device_),
                                      TensorView::contiguous(cos_sin_.data(), DType::f32, {c.max_position, D}, device_),
                                      RopeStyle::neox, stream));

  // 2. The new keys and values into the caches: sequence i's s rows at [position, last).
  const size_t kv_row = static_cast<size_t>(c.kv_heads * D) * e;
  for (int64_t i = 0; i < b; ++i)
    for (auto [cache, offset] : {std::pair{&k_cache, k_off}, {&v_cache, v_off}}) {
      char* dst = static_cast<char*>(cache->data) + (i * cache->strides[0] + position * cache->strides[1]) * e;
      const char* src = base + ((i * s) * qkv_w + offset) * static_cast<int64_t>(e);
      KK_RETURN_IF_ERROR(copy_rows(dst, kv_row, src, qkv_w * e, kv_row, s, device_, stream));
    }

  // 3. Attention: prefill reads k and v straight from the fused rows (causal); decode reads the cache up to `last`.
  const TensorView attn = TensorView::contiguous(attn_.data(), dtype_, {b, s, c.heads, D}, device_);
  const TensorView q4 = fused(0, c.heads, true);
  if (s > 1 || position == 0) {
    const TensorView k4 = fused(k_off, c.kv_heads, true), v4 = fused(v_off, c.kv_heads, true);
    AttentionOptions opt;
    opt.causal = true;
    KK_RETURN_IF_ERROR(attention(attn, std::nullopt, q4, k4, v4, opt, stream));
  } else {
    KvCache kv;
    kv.k = k_cache;
    kv.v = v_cache;
    kv.k.shape[1] = kv.v.shape[1] = last;  // the valid prefix of each sequence
    KK_RETURN_IF_ERROR(decode_attention(attn, std::nullopt, q4, kv, {}, stream));
  }

  // 4. h = x + o_proj(attn) with norm(h) for the MLP: fused_add_rms_norm(x=o, residual=x) leaves h in x.
  const TensorView proj = rows_of(proj_, dtype_, T, H, H), attn2 = rows_of(attn_, dtype_, T, c.heads * D, c.heads * D);
  const TensorView gu = rows_of(gate_up_, dtype_, T, 2 * c.intermediate, 2 * c.intermediate);
  if (fp8_) {
    // 4 and 5 with FP8 projections: attn, norm(h) and silu(gate) * up leave as codes; down's out += adds h.
    KK_RETURN_IF_ERROR(quantize_per_token_fp8(codes(c.heads * D), scales, attn2, stream));
    KK_RETURN_IF_ERROR(project_fp8(proj, c.heads * D, w_.o, false));
    KK_RETURN_IF_ERROR(fused_add_rms_norm_quant(codes(H), scales, proj, x2, w_.post_norm, c.eps, false, 0.0f, stream));
    KK_RETURN_IF_ERROR(project_fp8(gu, H, w_.gate_up, false));
    KK_RETURN_IF_ERROR(silu_and_mul_quant(codes(c.intermediate), scales, gu, false, stream));
    return project_fp8(x2, c.intermediate, w_.down, true);
  }
  KK_RETURN_IF_ERROR(project(proj, attn2, w_.o, false, stream));
  KK_RETURN_IF_ERROR(fused_add_rms_norm(proj, x2, w_.post_norm, c.eps, 0.0f, stream));

  // 5. out = h + down(silu(gate) * up): the residual add is the down projection's accumulate.
  const TensorView act = rows_of(act_, dtype_, T, c.intermediate, c.intermediate);
  KK_RETURN_IF_ERROR(project(gu, proj, w_.gate_up, false, stream));
  KK_RETURN_IF_ERROR(gated_activation(Activation::silu, act, gu, stream));
  return project(x2, act, w_.down, true, stream);
}

}  // namespace kernelkit
