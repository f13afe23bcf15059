// The activation family's cases (activation_cases.hpp).
#include "ops/activation/activation_cases.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <sstream>
#include <vector>

#include "ops/quant/quant_cases.hpp"

namespace kernelkit::testing {

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

std::string ActivationCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " " << rows << "x" << d;
  if (row_pad) os << " pad " << row_pad;
  if (static_scale) os << " static scale";
  return os.str();
}

namespace {

bool gated_op(OpId op) {
  return op == OpId::gelu_and_mul || op == OpId::gelu_tanh_and_mul || op == OpId::silu_and_mul ||
         op_quant_out_dtype(op).has_value();
}

OpId ungated(OpId op) {
  switch (op) {
    case OpId::gelu_and_mul:
      return OpId::gelu;
    case OpId::gelu_tanh_and_mul:
      return OpId::gelu_tanh;
    case OpId::silu_and_mul:
    case OpId::silu_and_mul_quant_int8:
    case OpId::silu_and_mul_quant_fp8:
      return OpId::silu;
    case OpId::geglu:
      return OpId::gelu;
    default:
      return op;
  }
}

// Host inputs of an activation case: x (width d, or 2d when gated), b (geglu), out (or q and the scales); rows
// `stride` elements apart.
struct ActData {
  int64_t in_width = 0, in_stride = 0, out_stride = 0;
  bool static_scale = false;
  HostBuffer x, b, out, q, q_scales;
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
  const auto qtype = op_quant_out_dtype(c.op);
  d.static_scale = c.static_scale;
  d.q = HostBuffer(qtype.value_or(DType::i8), qtype ? c.rows * c.d : 1);
  d.q_scales = HostBuffer(DType::f32, c.static_scale ? 1 : std::max<int64_t>(c.rows, 1));
  if (c.static_scale) d.q_scales.set(0, static_quant_scale(c.op));
  return d;
}

std::vector<CaseBuffer> act_buffers(ActData& d) {
  return {{&d.x, Role::in},
          {&d.b, Role::in},
          {&d.out, Role::out},
          {&d.q, Role::out},
          {&d.q_scales, d.static_scale ? Role::in : Role::out}};
}

// The buffers at p in act_buffers order.
Status call_act(const ActivationCase& c, const ActData& d, const std::vector<void*>& p, Device dev) {
  const auto xv = TensorView::strided(p[0], c.dtype, {c.rows, d.in_width}, {d.in_stride, 1}, dev);
  if (const auto qtype = op_quant_out_dtype(c.op))
    return silu_and_mul_quant(TensorView::contiguous(p[3], *qtype, {c.rows, c.d}, dev),
                              TensorView::contiguous(p[4], DType::f32, {c.static_scale ? 1 : c.rows}, dev), xv,
                              c.static_scale);
  const auto bv = TensorView::strided(p[1], c.dtype, {c.rows, c.d}, {d.in_stride, 1}, dev);
  const auto ov = TensorView::strided(p[2], c.dtype, {c.rows, c.d}, {d.out_stride, 1}, dev);
  return call_activation_op(c.op, ov, xv, c.op == OpId::geglu ? &bv : nullptr);
}

std::vector<void*> host_ptrs(ActData& d) {
  return {d.x.data(), d.b.data(), d.out.data(), d.q.data(), d.q_scales.data()};
}

// The fp32 intermediates behind each output (fp32_terms_magnitude): the rounding of an argument becomes relative
// error of the function's value, |z f'(z) / f(z)| per unit: for gelu's erfc(z), z = -x / sqrt 2, that is
// |z| (2 / sqrt pi) exp(-z^2) / erfc(z) (about 2 z^2 for negative x); for gelu_tanh's sigmoid(a), a = 2 sqrt(2/pi)
// (x + 0.044715 x^3), (1 - sigmoid(a)) |a|; only the negative side is exposed in both. silu's exp(-x) takes x exactly.
std::vector<double> fp32_terms(const ActivationCase& c, const ActData& d) {
  std::vector<double> mag(static_cast<size_t>(c.rows * d.out_stride));
  for (int64_t row = 0; row < c.rows; ++row)
    for (int64_t i = 0; i < c.d; ++i) {
      const int64_t k = row * d.out_stride + i, xi = row * d.in_stride + i;
      const double x = d.x.get(xi), want = d.out.get(k);
      double terms = 0;
      switch (ungated(c.op)) {
        case OpId::gelu: {
          const double z = -x / std::sqrt(2.0), tail = std::erfc(z);  // tail 0: want is 0 as well
          if (std::isfinite(z) && tail > 0) terms = std::fabs(want * z) * 2 / std::sqrt(M_PI) * std::exp(-z * z) / tail;
          break;
        }
        case OpId::gelu_tanh: {
          const double a = 2 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
          terms = std::fabs(want) * std::fabs(a) / (1 + std::exp(a));
          break;
        }
        default: break;
      }
      mag[static_cast<size_t>(k)] = fp32_terms_magnitude(want, terms, c.dtype);
    }
  return mag;
}

}  // namespace

CaseResult run_activation_case_cuda(const ActivationCase& c, int device) {
  return run_case(
      make_act_inputs(c), device, act_buffers,
      [&](const ActData& d, const std::vector<void*>& p, Device dev) { return call_act(c, d, p, dev); },
      [&](const ActData& got, const ActData& want, CaseResult* r) {
        if (op_quant_out_dtype(c.op))
          compare_quantized(got.q, got.q_scales, want.q, want.q_scales, c.rows, c.d, c.dtype, c.static_scale, r);
        else
          compare_outputs("out", got.out, want.out, c.rows, c.d, got.out_stride, fp32_terms(c, want), r);
      });
}

CaseResult check_activation_properties(const ActivationCase& c) {
  CaseResult r;
  ActData d = make_act_inputs(c);
  r.status = call_act(c, d, host_ptrs(d), Device::cpu());
  if (!r.status.ok()) return r;
  if (op_quant_out_dtype(c.op)) {
    // == quantize_per_token(silu_and_mul(x)), through the public unfused op.
    ActivationCase plain = c;
    plain.op = OpId::silu_and_mul;
    ActData p = make_act_inputs(plain);
    p.x = d.x;
    r.status = call_act(plain, p, host_ptrs(p), Device::cpu());
    if (!r.status.ok()) return r;
    check_quantized_composition(p.out, c.rows, c.d, p.out_stride, d.q, d.q_scales, c.static_scale,
                                static_quant_scale(c.op), &r);
    return r;
  }
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
  if (c.op != u.op) compare_outputs("out", d.out, expect, c.rows, c.d, d.out_stride, &r, 2.0);
  compare_outputs("act(x)-act(-x)", odd, x_only, c.rows, c.d, d.out_stride, mag, &r, 2.0);
  return r;
}

void verify_activation_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed,
                             std::vector<VerifyCase>* out) {
  for_each_row_shape(grid, [&](int64_t rows, int64_t hidden, int64_t pad) {
    const ActivationCase c{op, dtype, rows, hidden, pad, 3.0, (*seed)++, false};
    out->push_back({c.name(), [c, grid] {
                      return grid.cuda ? run_activation_case_cuda(c, grid.device) : check_activation_properties(c);
                    }});
  });
}

ActivationCase random_activation_case(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 13);
  constexpr OpId kOps[] = {OpId::gelu,
                           OpId::gelu_tanh,
                           OpId::silu,
                           OpId::gelu_and_mul,
                           OpId::gelu_tanh_and_mul,
                           OpId::silu_and_mul,
                           OpId::geglu,
                           OpId::silu_and_mul_quant_int8,
                           OpId::silu_and_mul_quant_fp8};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  ActivationCase c;
  c.op = kOps[pick(static_cast<int>(std::size(kOps)))];
  c.dtype = random_float_dtype(rng);
  if (op_quant_out_dtype(c.op)) {
    if (c.dtype == DType::f32) c.dtype = DType::bf16;  // f16 / bf16 only
    c.static_scale = pick(3) == 0;
  }
  const RandomRows r = random_rows(rng, int64_t{1} << 20);
  c.rows = r.rows;
  c.d = r.hidden;
  c.row_pad = r.pad;
  constexpr double kMagnitudes[] = {0.5, 3.0, 30.0};
  c.magnitude = kMagnitudes[pick(3)];
  c.seed = seed;
  return c;
}

}  // namespace kernelkit::testing
