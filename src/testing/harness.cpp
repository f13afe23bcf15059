#include "testing/harness.hpp"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit::testing {

Tolerance tolerance(DType t) {
  switch (t) {
    case DType::bf16:
      return {0.0078125, 1e-4};  // 2^-7: one bf16 ulp in [1, 2)
    case DType::f16:
      return {0.0009765625, 1e-5};  // 2^-10: one f16 ulp in [1, 2)
    default:
      return {1e-5, 1e-6};  // fp32 math vs fp64: accumulation order over <= 2^16 terms
  }
}

std::vector<int64_t> grid_rows() { return {1, 7, 83, 4096}; }
std::vector<int64_t> grid_hidden() { return {64, 111, 500, 769, 2048, 4096, 5125, 8192}; }

std::string NormCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " " << rows << "x" << hidden;
  if (row_pad) os << " pad " << row_pad;
  if (!weight) os << " no-weight";
  if (!bias && (op == OpId::layer_norm || op == OpId::ada_layer_norm)) os << " no-bias";
  if (weight_offset != 0.0f) os << " offset " << weight_offset;
  if (magnitude > 1) os << " |x|~" << magnitude;
  return os.str();
}

namespace {

bool is_layer(OpId op) { return op == OpId::layer_norm || op == OpId::ada_layer_norm; }

// Host inputs of one case. ada_layer_norm sees x as [batch, seq, hidden]; the others as [rows, hidden].
struct NormData {
  int64_t stride = 0, batch = 1, seq = 1;
  HostBuffer x, residual, out, weight, bias, scale, shift;
};

struct NormPtrs {
  void *x = nullptr, *residual = nullptr, *out = nullptr, *weight = nullptr, *bias = nullptr, *scale = nullptr,
       *shift = nullptr;
};

NormPtrs host_ptrs(NormData& d) {
  return {d.x.data(), d.residual.data(), d.out.data(), d.weight.data(), d.bias.data(), d.scale.data(), d.shift.data()};
}

NormData make_inputs(const NormCase& c) {
  NormData d;
  d.stride = c.hidden + c.row_pad;
  if (c.op == OpId::ada_layer_norm) {
    d.batch = (c.rows >= 4 && c.rows % 4 == 0) ? 4 : c.rows;
    d.seq = d.batch ? c.rows / d.batch : 0;
  }
  const int64_t n = c.rows * d.stride;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.op) * 131 + c.hidden);
  auto fill = [&](HostBuffer& b, int64_t count, double lo, double hi) {
    b = HostBuffer(c.dtype, count);
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < count; ++i) b.set(i, u(rng));
  };
  // Extreme case: |x| in [m/2, m] with random sign (fp16 near 60000); otherwise centred off zero so layer norm's
  // mean subtraction matters.
  auto fill_act = [&](HostBuffer& b, double m) {
    b = HostBuffer(c.dtype, n);
    std::uniform_real_distribution<double> u(0.5, 1.0), s(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i) b.set(i, m > 1 ? (s(rng) < 0 ? -1 : 1) * m * u(rng) : 0.3 + s(rng));
  };
  const bool fused = c.op == OpId::fused_add_rms_norm;
  fill_act(d.x, fused ? c.magnitude / 2 : c.magnitude);  // x + residual stays finite in fp16
  if (fused) fill_act(d.residual, c.magnitude / 2);
  d.out = HostBuffer(c.dtype, n);
  fill(d.weight, c.hidden, c.weight_offset != 0 ? -0.5 : 0.5, c.weight_offset != 0 ? 0.5 : 1.5);
  fill(d.bias, c.hidden, -0.5, 0.5);
  fill(d.scale, d.batch * c.hidden, -0.5, 0.5);
  fill(d.shift, d.batch * c.hidden, -0.5, 0.5);
  return d;
}

// Calls the public op for case `c` over the buffers at `p` on `dev` (CPU backend or CUDA).
Status call_op(const NormCase& c, const NormData& d, const NormPtrs& p, Device dev) {
  auto act = [&](void* ptr) {
    if (c.op == OpId::ada_layer_norm)
      return TensorView::strided(ptr, c.dtype, {d.batch, d.seq, c.hidden}, {d.seq * d.stride, d.stride, 1}, dev);
    return TensorView::strided(ptr, c.dtype, {c.rows, c.hidden}, {d.stride, 1}, dev);
  };
  NormTensors t;
  t.x = act(p.x);
  t.out = act(p.out);
  t.residual = act(p.residual);
  t.scale = TensorView::contiguous(p.scale, c.dtype, {d.batch, c.hidden}, dev);
  t.shift = TensorView::contiguous(p.shift, c.dtype, {d.batch, c.hidden}, dev);
  if (c.weight) t.weight = TensorView::contiguous(p.weight, c.dtype, {c.hidden}, dev);
  if (c.bias) t.bias = TensorView::contiguous(p.bias, c.dtype, {c.hidden}, dev);
  return call_norm_op(c.op, t, c.eps, c.weight_offset);
}

// Compares rows x hidden elements (row stride `stride`) of got against want; `scale` widens the tolerance for
// derived quantities (property checks), never for the kernel comparison (scale 1). `magnitude`, when given, is the
// size of the terms that were summed into `want` (a sum that cancels keeps the rounding error of its terms).
void compare(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
             int64_t stride, double scale, CaseResult* r, const std::vector<double>* magnitude = nullptr) {
  const Tolerance tol = tolerance(got.dtype());
  int shown = 0;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t i = 0; i < hidden; ++i) {
      const int64_t k = row * stride + i;
      const double g = got.get(k), w = want.get(k);
      const double mag = magnitude ? std::max(std::fabs(w), (*magnitude)[static_cast<size_t>(k)]) : std::fabs(w);
      const double allowed = scale * (tol.atol + tol.rtol * mag);
      const double err = std::fabs(g - w);
      ++r->checked;
      const bool bad = std::isfinite(w) ? !(err <= allowed) : std::isfinite(g);
      if (std::isfinite(err)) {
        r->max_abs_err = std::max(r->max_abs_err, err);
        r->worst_ratio = std::max(r->worst_ratio, err / allowed);
      }
      if (bad) {
        ++r->mismatches;
        if (shown++ < 4) {
          std::ostringstream os;
          os << "  " << label << "[" << row << ", " << i << "]: got " << g << ", want " << w << " (allowed " << allowed
             << ")\n";
          r->detail += os.str();
        }
      }
    }
}

}  // namespace

Status call_norm_op(OpId op, const NormTensors& t, float eps, float weight_offset, Stream stream) {
  switch (op) {
    case OpId::rms_norm:
      return rms_norm(t.out, t.x, t.weight, eps, weight_offset, stream);
    case OpId::fused_add_rms_norm:
      return fused_add_rms_norm(t.x, t.residual, t.weight, eps, weight_offset, stream);
    case OpId::layer_norm:
      return layer_norm(t.out, t.x, t.weight, t.bias, eps, stream);
    case OpId::ada_layer_norm:
      return ada_layer_norm(t.out, t.x, t.scale, t.shift, t.weight, t.bias, eps, stream);
    case OpId::rms_norm_gelu:
      return rms_norm_gelu(t.out, t.x, t.weight, eps, stream);
  }
  return invalid_argument("unknown op");
}

void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, CaseResult* r) {
  compare(label, got, want, rows, hidden, stride, 1.0, r);
}

void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, const std::vector<double>& magnitude, CaseResult* r) {
  compare(label, got, want, rows, hidden, stride, 1.0, r, &magnitude);
}

Status first_error(std::initializer_list<Status> steps) {
  for (const Status& s : steps)
    if (!s.ok()) return s;
  return Status::Ok();
}

Status need_device() {
  return cuda_device_count() > 0 ? Status::Ok() : Status(StatusCode::no_device, "no CUDA device");
}

// ---- Activations
// ------------------------------------------------------------------------------------------------------

std::string ActivationCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " " << rows << "x" << d;
  if (row_pad) os << " pad " << row_pad;
  return os.str();
}

Status call_activation_op(OpId op, const TensorView& out, const TensorView& x, const TensorView* b, Stream stream) {
  switch (op) {
    case OpId::gelu:
      return activation(Activation::gelu, out, x, stream);
    case OpId::gelu_tanh:
      return activation(Activation::gelu_tanh, out, x, stream);
    case OpId::silu:
      return activation(Activation::silu, out, x, stream);
    case OpId::gelu_and_mul:
      return gated_activation(Activation::gelu, out, x, stream);
    case OpId::gelu_tanh_and_mul:
      return gated_activation(Activation::gelu_tanh, out, x, stream);
    case OpId::silu_and_mul:
      return gated_activation(Activation::silu, out, x, stream);
    case OpId::geglu:
      if (!b) return invalid_argument("geglu needs b");
      return gated_activation(Activation::gelu, out, x, *b, stream);
    default:
      return invalid_argument(std::string(op_info(op).name) + " is not an activation op");
  }
}

namespace {

bool gated_op(OpId op) { return op == OpId::gelu_and_mul || op == OpId::gelu_tanh_and_mul || op == OpId::silu_and_mul; }

OpId ungated(OpId op) {
  switch (op) {
    case OpId::gelu_and_mul:
      return OpId::gelu;
    case OpId::gelu_tanh_and_mul:
      return OpId::gelu_tanh;
    case OpId::silu_and_mul:
      return OpId::silu;
    case OpId::geglu:
      return OpId::gelu;
    default:
      return op;
  }
}

// Host inputs of an activation case: x (width d, or 2d when gated), b (geglu), out; rows `stride` elements apart.
struct ActData {
  int64_t in_width = 0, in_stride = 0, out_stride = 0;
  HostBuffer x, b, out;
};

ActData make_act_inputs(const ActivationCase& c) {
  ActData d;
  d.in_width = gated_op(c.op) ? 2 * c.d : c.d;
  d.in_stride = d.in_width + c.row_pad;
  d.out_stride = c.d + c.row_pad;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.op) * 977 + c.d);
  std::uniform_real_distribution<double> u(-c.magnitude, c.magnitude);
  auto fill = [&](HostBuffer& buf, int64_t n) {
    buf = HostBuffer(c.dtype, n);
    for (int64_t i = 0; i < n; ++i) buf.set(i, u(rng));
  };
  fill(d.x, c.rows * d.in_stride);
  fill(d.b, c.op == OpId::geglu ? c.rows * d.in_stride : 1);
  d.out = HostBuffer(c.dtype, c.rows * d.out_stride);
  return d;
}

Status call_act(const ActivationCase& c, const ActData& d, void* x, void* b, void* out, Device dev) {
  const auto xv = TensorView::strided(x, c.dtype, {c.rows, d.in_width}, {d.in_stride, 1}, dev);
  const auto bv = TensorView::strided(b, c.dtype, {c.rows, c.d}, {d.in_stride, 1}, dev);
  const auto ov = TensorView::strided(out, c.dtype, {c.rows, c.d}, {d.out_stride, 1}, dev);
  return call_activation_op(c.op, ov, xv, c.op == OpId::geglu ? &bv : nullptr);
}

}  // namespace

CaseResult run_activation_case_cuda(const ActivationCase& c, int device) {
  CaseResult r;
  if (r.status = need_device(); !r.status.ok()) return r;
  ActData d = make_act_inputs(c);
  ActData want = d;
  if (Status s = call_act(c, want, want.x.data(), want.b.data(), want.out.data(), Device::cpu()); !s.ok()) {
    r.status = Status(s.code(), "reference: " + s.message());
    return r;
  }
  DeviceBuffer x, b, out;
  if (r.status = first_error({x.alloc(d.x.bytes()), x.upload(d.x), b.alloc(std::max<size_t>(d.b.bytes(), 16)),
                              b.upload(d.b), out.alloc(d.out.bytes()), out.poison()});
      !r.status.ok())
    return r;
  r.status = call_act(c, d, x.data(), b.data(), out.data(), Device::cuda(device));
  if (!r.status.ok()) return r;
  HostBuffer got = d.out;
  if (r.status = first_error({device_synchronize(), out.download(&got)}); !r.status.ok()) return r;
  compare("out", got, want.out, c.rows, c.d, d.out_stride, 1.0, &r);
  return r;
}

CaseResult check_activation_properties(const ActivationCase& c) {
  CaseResult r;
  ActData d = make_act_inputs(c);
  r.status = call_act(c, d, d.x.data(), d.b.data(), d.out.data(), Device::cpu());
  if (!r.status.ok()) return r;
  // Ungated act over the activated part, and over its negation.
  ActivationCase u = c;
  u.op = ungated(c.op);
  ActData plain = make_act_inputs(u);
  plain.in_width = c.d;
  plain.in_stride = d.in_stride;
  plain.x = d.x;
  ActData neg = plain;
  for (int64_t row = 0; row < c.rows; ++row)
    for (int64_t i = 0; i < c.d; ++i) neg.x.set(row * d.in_stride + i, -plain.x.get(row * d.in_stride + i));
  for (ActData* p : {&plain, &neg}) {
    p->out = HostBuffer(c.dtype, c.rows * d.out_stride);
    const auto xv = TensorView::strided(p->x.data(), c.dtype, {c.rows, c.d}, {d.in_stride, 1});
    const auto ov = TensorView::strided(p->out.data(), c.dtype, {c.rows, c.d}, {d.out_stride, 1});
    r.status = call_activation_op(u.op, ov, xv);
    if (!r.status.ok()) return r;
  }
  HostBuffer expect(c.dtype, c.rows * d.out_stride), odd(c.dtype, c.rows * d.out_stride),
      x_only(c.dtype, c.rows * d.out_stride);
  std::vector<double> mag(static_cast<size_t>(c.rows * d.out_stride));
  for (int64_t row = 0; row < c.rows; ++row)
    for (int64_t i = 0; i < c.d; ++i) {
      const int64_t k = row * d.out_stride, xi = row * d.in_stride + i;
      const double mult = c.op == OpId::geglu ? d.b.get(xi) : gated_op(c.op) ? d.x.get(xi + c.d) : 1.0;
      expect.set(k + i, plain.out.get(k + i) * mult);
      // act(x) - act(-x) = x: both sides carry one rounding of a value of size ~|x|.
      odd.set(k + i, plain.out.get(k + i) - neg.out.get(k + i));
      x_only.set(k + i, plain.x.get(xi));
      mag[static_cast<size_t>(k + i)] = std::fabs(plain.out.get(k + i)) + std::fabs(neg.out.get(k + i));
    }
  if (c.op != u.op) compare("out", d.out, expect, c.rows, c.d, d.out_stride, 2.0, &r);
  compare("act(x)-act(-x)", odd, x_only, c.rows, c.d, d.out_stride, 2.0, &r, &mag);
  return r;
}

// ---- RoPE
// ---------------------------------------------------------------------------------------------------------------

std::string RopeCase::name() const {
  std::ostringstream os;
  os << "rotary_embedding " << dtype_name(dtype) << " " << (style == RopeStyle::neox ? "neox" : "gptj") << " t"
     << tokens << " h" << heads << "/" << kv_heads << " d" << head_dim << " rot" << rot_dim
     << (in_place ? " in-place" : "");
  return os.str();
}

namespace {

// One fused qkv buffer [tokens, heads + 2 kv_heads, head_dim]; q and k are strided views into it (v is untouched).
struct RopeData {
  int64_t width = 0, max_pos = 0;
  HostBuffer qkv, out, pos, cache;
};

RopeData make_rope_inputs(const RopeCase& c) {
  RopeData d;
  d.width = (c.heads + 2 * c.kv_heads) * c.head_dim;
  d.max_pos = 4 * c.tokens + 3;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + c.head_dim * 7 + c.rot_dim);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  d.qkv = HostBuffer(c.dtype, c.tokens * d.width);
  for (int64_t i = 0; i < d.qkv.size(); ++i) d.qkv.set(i, u(rng));
  d.out = HostBuffer(c.dtype, c.tokens * d.width);
  d.pos = HostBuffer(DType::i64, c.tokens);
  std::uniform_int_distribution<int64_t> p(0, d.max_pos - 1);
  for (int64_t t = 0; t < c.tokens; ++t) d.pos.set(t, t == 0 ? 0 : p(rng));  // token 0 at position 0: identity
  d.cache = HostBuffer(DType::f32, d.max_pos * c.rot_dim);
  rope_cos_sin_table(static_cast<float*>(d.cache.data()), d.max_pos, c.rot_dim);  // Llama's table
  return d;
}

// q/k views into `base` (the fused buffer layout) on `dev`.
std::pair<TensorView, TensorView> qk_views(const RopeCase& c, const RopeData& d, void* base, Device dev) {
  const int64_t e = static_cast<int64_t>(dtype_size(c.dtype));
  auto* k = static_cast<char*>(base) + c.heads * c.head_dim * e;
  return {TensorView::strided(base, c.dtype, {c.tokens, c.heads, c.head_dim}, {d.width, c.head_dim, 1}, dev),
          TensorView::strided(k, c.dtype, {c.tokens, c.kv_heads, c.head_dim}, {d.width, c.head_dim, 1}, dev)};
}

Status call_rope(const RopeCase& c, const RopeData& d, void* in, void* out, void* pos, void* cache, Device dev) {
  auto [q, k] = qk_views(c, d, in, dev);
  auto [qo, ko] = qk_views(c, d, c.in_place ? in : out, dev);
  return rotary_embedding(qo, ko, q, k, TensorView::contiguous(pos, DType::i64, {c.tokens}, dev),
                          TensorView::contiguous(cache, DType::f32, {d.max_pos, c.rot_dim}, dev), c.style);
}

}  // namespace

CaseResult run_rope_case_cuda(const RopeCase& c, int device) {
  CaseResult r;
  if (r.status = need_device(); !r.status.ok()) return r;
  RopeData d = make_rope_inputs(c);
  RopeData want = d;
  want.out = want.qkv;  // out of place: everything but q/k heads keeps the input values in both
  d.out = d.qkv;
  if (Status s =
          call_rope(c, want, want.qkv.data(), want.out.data(), want.pos.data(), want.cache.data(), Device::cpu());
      !s.ok()) {
    r.status = Status(s.code(), "reference: " + s.message());
    return r;
  }
  DeviceBuffer in, out, pos, cache;
  if (r.status = first_error({in.alloc(d.qkv.bytes()), in.upload(d.qkv), out.alloc(d.out.bytes()), out.poison(),
                              pos.alloc(d.pos.bytes()), pos.upload(d.pos), cache.alloc(d.cache.bytes()),
                              cache.upload(d.cache)});
      !r.status.ok())
    return r;
  r.status = call_rope(c, d, in.data(), out.data(), pos.data(), cache.data(), Device::cuda(device));
  if (!r.status.ok()) return r;
  HostBuffer got = c.in_place ? d.qkv : d.out;
  if (r.status = first_error({device_synchronize(), (c.in_place ? in : out).download(&got)}); !r.status.ok()) return r;
  // q and k heads of every token (v is not written: out of place it stays poisoned, so it is not compared).
  const int64_t qk = (c.heads + c.kv_heads) * c.head_dim;
  compare("qk", got, c.in_place ? want.qkv : want.out, c.tokens, qk, d.width, 1.0, &r);
  return r;
}

CaseResult check_rope_properties(const RopeCase& c) {
  CaseResult r;
  RopeData d = make_rope_inputs(c);
  const HostBuffer input = d.qkv;  // in place overwrites d.qkv
  d.out = d.qkv;
  r.status = call_rope(c, d, d.qkv.data(), d.out.data(), d.pos.data(), d.cache.data(), Device::cpu());
  if (!r.status.ok()) return r;
  const HostBuffer& result = c.in_place ? d.qkv : d.out;
  const Tolerance tol = tolerance(c.dtype);
  auto fail = [&](const std::string& what) {
    ++r.mismatches;
    if (r.detail.size() < 400) r.detail += "  " + what + "\n";
  };
  const int64_t half = c.rot_dim / 2, nh = c.heads + c.kv_heads;
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t base = t * d.width + h * c.head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const int64_t i0 = c.style == RopeStyle::neox ? j : 2 * j,
                      i1 = c.style == RopeStyle::neox ? j + half : 2 * j + 1;
        const double x0 = input.get(base + i0), x1 = input.get(base + i1), y0 = result.get(base + i0),
                     y1 = result.get(base + i1);
        const double nx = std::hypot(x0, x1), ny = std::hypot(y0, y1);
        ++r.checked;
        if (!(std::fabs(nx - ny) <= 2 * (tol.atol + tol.rtol * nx)))
          fail("pair norm changed at token " + std::to_string(t));
        if (d.pos.get(t) == 0 && !(y0 == x0 && y1 == x1))
          fail("position 0 is not the identity at head " + std::to_string(h));
      }
      for (int64_t i = c.rot_dim; i < c.head_dim; ++i)
        if (result.get(base + i) != input.get(base + i)) fail("tail element changed at token " + std::to_string(t));
    }
  // Per-token tables (half width, and HF's full width) give exactly the cache's result.
  for (bool full : {false, true}) {
    const int64_t w = full ? c.rot_dim : half;
    HostBuffer cs(DType::f32, c.tokens * w), sn(DType::f32, c.tokens * w), in2 = input, out2 = input;
    for (int64_t t = 0; t < c.tokens; ++t) {
      const int64_t m = static_cast<int64_t>(d.pos.get(t));
      for (int64_t j = 0; j < w; ++j) {
        // HF layout: neox duplicates the halves, gptj repeats each value in a pair.
        const int64_t pj = !full ? j : (c.style == RopeStyle::neox ? j % half : j / 2);
        cs.set(t * w + j, d.cache.get(m * c.rot_dim + pj));
        sn.set(t * w + j, d.cache.get(m * c.rot_dim + half + pj));
      }
    }
    auto [q, k] = qk_views(c, d, in2.data(), Device::cpu());
    auto [qo, ko] = qk_views(c, d, out2.data(), Device::cpu());
    r.status = rotary_embedding(qo, ko, q, k, TensorView::contiguous(cs.data(), DType::f32, {c.tokens, w}),
                                TensorView::contiguous(sn.data(), DType::f32, {c.tokens, w}), c.rot_dim, c.style);
    if (!r.status.ok()) return r;
    compare(full ? "full-width tables" : "half-width tables", out2, result, c.tokens, nh * c.head_dim, d.width, 0.0,
            &r);
  }
  return r;
}

// ---- Softmax
// ------------------------------------------------------------------------------------------------------------

std::string SoftmaxCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " " << rows << "x" << hidden;
  if (op == OpId::causal_softmax) os << " s_q " << s_q;
  if (scale != 1.0f) os << " scale " << scale;
  if (magnitude > 100) os << " |x|~" << magnitude;
  if (row_pad) os << " pad " << row_pad;
  return os.str();
}

namespace {

struct SoftmaxData {
  int64_t stride = 0;
  HostBuffer x, out;
};

SoftmaxData make_softmax_inputs(const SoftmaxCase& c) {
  SoftmaxData d;
  d.stride = c.hidden + c.row_pad;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + c.hidden * 13 + c.rows);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  d.x = HostBuffer(c.dtype, c.rows * d.stride);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < d.stride; ++j)
      // Every 5th row is all -inf: its output must be zeros, not NaN.
      d.x.set(r * d.stride + j, r % 5 == 3 ? -INFINITY : c.magnitude * u(rng));
  d.out = HostBuffer(c.dtype, c.rows * d.stride);
  return d;
}

Status call_softmax(const SoftmaxCase& c, const SoftmaxData& d, void* x, void* out, Device dev) {
  if (c.op == OpId::causal_softmax) {
    const int64_t heads = c.rows / c.s_q;
    return causal_softmax(
        TensorView::strided(out, c.dtype, {heads, c.s_q, c.hidden}, {c.s_q * d.stride, d.stride, 1}, dev),
        TensorView::strided(x, c.dtype, {heads, c.s_q, c.hidden}, {c.s_q * d.stride, d.stride, 1}, dev), c.scale);
  }
  return softmax(TensorView::strided(out, c.dtype, {c.rows, c.hidden}, {d.stride, 1}, dev),
                 TensorView::strided(x, c.dtype, {c.rows, c.hidden}, {d.stride, 1}, dev), c.scale);
}

}  // namespace

CaseResult run_softmax_case_cuda(const SoftmaxCase& c, int device) {
  CaseResult r;
  if (r.status = need_device(); !r.status.ok()) return r;
  SoftmaxData d = make_softmax_inputs(c);
  SoftmaxData want = d;
  if (Status s = call_softmax(c, want, want.x.data(), want.out.data(), Device::cpu()); !s.ok()) {
    r.status = Status(s.code(), "reference: " + s.message());
    return r;
  }
  DeviceBuffer x, out;
  if (r.status = first_error({x.alloc(d.x.bytes()), x.upload(d.x), out.alloc(d.out.bytes()), out.poison()});
      !r.status.ok())
    return r;
  r.status = call_softmax(c, d, x.data(), out.data(), Device::cuda(device));
  if (!r.status.ok()) return r;
  HostBuffer got = d.out;
  if (r.status = first_error({device_synchronize(), out.download(&got)}); !r.status.ok()) return r;
  compare("out", got, want.out, c.rows, c.hidden, d.stride, 1.0, &r);
  return r;
}

CaseResult check_softmax_properties(const SoftmaxCase& c) {
  CaseResult r;
  SoftmaxData d = make_softmax_inputs(c);
  r.status = call_softmax(c, d, d.x.data(), d.out.data(), Device::cpu());
  if (!r.status.ok()) return r;
  const Tolerance tol = tolerance(c.dtype);
  auto fail = [&](const std::string& what) {
    ++r.mismatches;
    if (r.detail.size() < 400) r.detail += "  " + what + "\n";
  };
  for (int64_t row = 0; row < c.rows; ++row) {
    const int64_t limit = c.op == OpId::causal_softmax ? row % c.s_q + c.hidden - c.s_q : c.hidden - 1;
    const bool empty = row % 5 == 3 || limit < 0;
    double sum = 0;
    for (int64_t j = 0; j < c.hidden; ++j) {
      const double y = d.out.get(row * d.stride + j);
      ++r.checked;
      if (!(y >= 0.0 && y <= 1.0))
        fail("row " + std::to_string(row) + ": entry " + std::to_string(y) + " outside [0, 1]");
      if ((empty || j > limit) && y != 0.0)
        fail("row " + std::to_string(row) + ": masked entry " + std::to_string(j) + " is not 0");
      sum += y;
    }
    // Each entry carries one rounding of at most half an ulp (relative rtol / 2, or an absolute subnormal step), so
    // the sum is 1 within rtol plus the subnormal steps.
    const double allowed = 2 * tol.rtol + 1e-7 * static_cast<double>(c.hidden);
    if (!empty && !(std::fabs(sum - 1.0) <= allowed))
      fail("row " + std::to_string(row) + " sums to " + std::to_string(sum));
  }
  return r;
}

CaseResult run_norm_case_cuda(const NormCase& c, int device) {
  CaseResult r;
  if (r.status = need_device(); !r.status.ok()) return r;
  NormData d = make_inputs(c);
  NormData want = d;  // the reference runs in place on its own copy
  {
    NormPtrs hp = host_ptrs(want);
    Status s = call_op(c, want, hp, Device::cpu());
    if (!s.ok()) {
      r.status = Status(s.code(), "reference: " + s.message());
      return r;
    }
  }
  DeviceBuffer x, res, out, w, b, sc, sh;
  auto up = [](DeviceBuffer& db, const HostBuffer& hb) -> Status {
    KK_RETURN_IF_ERROR(db.alloc(std::max<size_t>(hb.bytes(), 16)));
    return db.upload(hb);
  };
  if (r.status = first_error({up(x, d.x), up(res, d.residual), up(out, d.out), up(w, d.weight), up(b, d.bias),
                              up(sc, d.scale), up(sh, d.shift), out.poison()});
      !r.status.ok())
    return r;
  const NormPtrs dp{x.data(), res.data(), out.data(), w.data(), b.data(), sc.data(), sh.data()};
  r.status = call_op(c, d, dp, Device::cuda(device));
  if (!r.status.ok()) return r;
  NormData got = d;
  if (r.status =
          first_error({device_synchronize(), x.download(&got.x), res.download(&got.residual), out.download(&got.out)});
      !r.status.ok())
    return r;
  if (c.op == OpId::fused_add_rms_norm) {
    compare("x", got.x, want.x, c.rows, c.hidden, d.stride, 1.0, &r);
    compare("residual", got.residual, want.residual, c.rows, c.hidden, d.stride, 1.0, &r);
  } else {
    compare("out", got.out, want.out, c.rows, c.hidden, d.stride, 1.0, &r);
    // Padding between rows must still hold the poison: nothing wrote outside the view.
    const auto* bytes = static_cast<const uint8_t*>(got.out.data());
    const size_t e = dtype_size(c.dtype);
    for (int64_t row = 0; row < c.rows; ++row)
      for (int64_t i = c.hidden; i < d.stride; ++i)
        for (size_t k = 0; k < e; ++k)
          if (bytes[(row * d.stride + i) * e + k] != 0xFF) {
            ++r.mismatches;
            r.detail += "  out padding written at row " + std::to_string(row) + "\n";
            row = c.rows;
            i = d.stride;
            break;
          }
  }
  return r;
}

CaseResult check_norm_properties(const NormCase& c) {
  CaseResult r;
  NormData d = make_inputs(c);
  const int64_t H = c.hidden, S = d.stride;
  auto run = [&](const NormCase& cc, NormData& dd) { return call_op(cc, dd, host_ptrs(dd), Device::cpu()); };
  auto fail = [&](const std::string& what) {
    ++r.mismatches;
    if (r.detail.size() < 400) r.detail += "  " + what + "\n";
  };
  // Expected values computed in double from other ops' outputs; each side carries one rounding, so allow two.
  // f returns the expected value and sets the magnitude of the terms it summed.
  HostBuffer expect(c.dtype, c.rows * S);
  std::vector<double> mag(static_cast<size_t>(c.rows * S));
  auto expect_each = [&](const std::function<double(int64_t, int64_t, double*)>& f) {
    for (int64_t row = 0; row < c.rows; ++row)
      for (int64_t i = 0; i < H; ++i) expect.set(row * S + i, f(row, i, &mag[static_cast<size_t>(row * S + i)]));
  };
  NormData plain = d;  // the same inputs through the unfused / unweighted op
  NormCase pc = c;
  r.status = run(c, d);
  if (!r.status.ok()) return r;
  switch (c.op) {
    case OpId::fused_add_rms_norm: {
      // residual == round(x + residual); x == rms_norm(residual) through the public unfused op, bit for bit.
      pc.op = OpId::rms_norm;
      for (int64_t k = 0; k < c.rows * S; ++k) plain.x.set(k, plain.x.get(k) + plain.residual.get(k));
      r.status = run(pc, plain);  // plain.x now holds round(x + r); rms_norm writes plain.out
      compare("residual", d.residual, plain.x, c.rows, H, S, 0.0, &r);
      compare("x", d.x, plain.out, c.rows, H, S, 0.0, &r);
      break;
    }
    case OpId::rms_norm:
    case OpId::layer_norm: {
      // Unweighted output: rms 1 (RMS) or mean 0 and variance 1 (layer norm); weighted = unweighted * w + b.
      pc.weight = pc.bias = false;
      r.status = run(pc, plain);
      const Tolerance tol = tolerance(c.dtype);
      for (int64_t row = 0; row < c.rows; ++row) {
        double s1 = 0, s2 = 0;
        for (int64_t i = 0; i < H; ++i) {
          const double y = plain.out.get(row * S + i);
          s1 += y;
          s2 += y * y;
        }
        const double mean = s1 / H, ms = s2 / H;
        const double stat = c.op == OpId::rms_norm ? ms : ms - mean * mean;
        if (!(std::fabs(stat - 1.0) <= 4 * tol.rtol + 1e-4))
          fail("row " + std::to_string(row) + ": second moment " + std::to_string(stat) + ", expected 1");
        if (c.op == OpId::layer_norm && !(std::fabs(mean) <= 4 * tol.rtol + 1e-4))
          fail("row " + std::to_string(row) + ": mean " + std::to_string(mean) + ", expected 0");
      }
      const bool layer = c.op == OpId::layer_norm;
      expect_each([&](int64_t row, int64_t i, double* m) {
        double y = plain.out.get(row * S + i);
        if (c.weight) y *= c.weight_offset + d.weight.get(i);
        *m = std::fabs(y);
        if (layer && c.bias) {
          y += d.bias.get(i);
          *m += std::fabs(d.bias.get(i));
        }
        return y;
      });
      compare("out", d.out, expect, c.rows, H, S, 2.0, &r, &mag);
      break;
    }
    case OpId::ada_layer_norm: {
      // == layer_norm(x) * (1 + scale[b]) + shift[b]
      pc.op = OpId::layer_norm;
      r.status = run(pc, plain);
      expect_each([&](int64_t row, int64_t i, double* m) {
        const int64_t b = row / std::max<int64_t>(1, d.seq);
        const double y = plain.out.get(row * S + i) * (1 + d.scale.get(b * H + i));
        *m = std::fabs(y) + std::fabs(d.shift.get(b * H + i));
        return y + d.shift.get(b * H + i);
      });
      compare("out", d.out, expect, c.rows, H, S, 3.0, &r, &mag);
      break;
    }
    case OpId::rms_norm_gelu: {
      // == gelu_tanh(rms_norm(x)): the fused op equals the composition.
      pc.op = OpId::rms_norm;
      r.status = run(pc, plain);
      expect_each([&](int64_t row, int64_t i, double* m) {
        const double v = plain.out.get(row * S + i);
        *m = std::fabs(v);
        return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      });
      compare("out", d.out, expect, c.rows, H, S, 3.0, &r);
      break;
    }
  }
  return r;
}

}  // namespace kernelkit::testing
