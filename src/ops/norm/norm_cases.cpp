// The norm family's cases (norm_cases.hpp).
#include "ops/norm/norm_cases.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "ops/quant/quant_cases.hpp"

namespace kernelkit::testing {

std::string NormCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " " << rows << "x" << hidden;
  if (row_pad) os << " pad " << row_pad;
  if (!weight) os << " no-weight";
  if (!bias && (op == OpId::layer_norm || op == OpId::ada_layer_norm)) os << " no-bias";
  if (weight_offset != 0.0f) os << " offset " << weight_offset;
  if (magnitude > 1) os << " |x|~" << magnitude;
  if (constant_rows) os << " constant rows";
  if (static_scale) os << " static scale";
  return os.str();
}

namespace {

// Host inputs of one case. ada_layer_norm sees x as [batch, seq, hidden]; the others as [rows, hidden].
struct NormData {
  int64_t stride = 0, batch = 1, seq = 1;
  bool static_scale = false;
  HostBuffer x, residual, out, weight, bias, scale, shift, q, q_scales;
};

struct NormPtrs {
  void *x = nullptr, *residual = nullptr, *out = nullptr, *weight = nullptr, *bias = nullptr, *scale = nullptr,
       *shift = nullptr, *q = nullptr, *q_scales = nullptr;
};

NormPtrs host_ptrs(NormData& d) {
  return {d.x.data(),     d.residual.data(), d.out.data(), d.weight.data(),  d.bias.data(),
          d.scale.data(), d.shift.data(),    d.q.data(),   d.q_scales.data()};
}

// The buffers of a case in NormPtrs order, with what the op does with each (fused_add_rms_norm writes x and residual
// in place; the others write out; the norm + quantization ops write q and the scales, or read a static scale).
std::vector<CaseBuffer> buffers(NormData& d) {
  return {{&d.x, Role::inout},   {&d.residual, Role::inout}, {&d.out, Role::out},
          {&d.weight, Role::in}, {&d.bias, Role::in},        {&d.scale, Role::in},
          {&d.shift, Role::in},  {&d.q, Role::out},          {&d.q_scales, d.static_scale ? Role::in : Role::out}};
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
    if (!c.constant_rows) return;
    for (int64_t row = 0; row < c.rows; ++row)
      for (int64_t i = 0; i < c.hidden; ++i)
        b.set(row * d.stride + i, (row % 2 ? -m : m) * (1 + static_cast<double>(row) / c.rows) / 2);
  };
  const bool fused = adds_residual(c.op);
  fill_act(d.x, fused ? c.magnitude / 2 : c.magnitude);  // x + residual stays finite in fp16
  if (fused) fill_act(d.residual, c.magnitude / 2);
  d.out = HostBuffer(c.dtype, n);
  fill(d.weight, c.hidden, c.weight_offset != 0 ? -0.5 : 0.5, c.weight_offset != 0 ? 0.5 : 1.5);
  fill(d.bias, c.hidden, -0.5, 0.5);
  fill(d.scale, d.batch * c.hidden, -0.5, 0.5);
  fill(d.shift, d.batch * c.hidden, -0.5, 0.5);
  if (const auto qtype = op_quant_out_dtype(c.op)) {
    d.static_scale = c.static_scale;
    d.q = HostBuffer(*qtype, c.rows * c.hidden);
    d.q_scales = HostBuffer(DType::f32, c.static_scale ? 1 : c.rows);
    if (c.static_scale) d.q_scales.set(0, static_quant_scale(c.op));
  }
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
  if (const auto qtype = op_quant_out_dtype(c.op)) {
    t.q = TensorView::contiguous(p.q, *qtype, {c.rows, c.hidden}, dev);
    t.q_scales = TensorView::contiguous(p.q_scales, DType::f32, {c.static_scale ? 1 : c.rows}, dev);
    t.static_scale = c.static_scale;
  }
  return call_norm_op(c.op, t, c.eps, c.weight_offset);
}

// The fp32 intermediates behind each output (fp32_terms_magnitude): layer norm's x - mean cancels (terms |x| + |mean|,
// large when the mean dwarfs the spread), and the affine steps y w + b, y (1 + scale) + shift may cancel too; the
// RMS norms sum no terms of opposite sign.
std::vector<double> fp32_terms(const NormCase& c, const NormData& d) {
  const int64_t H = c.hidden;
  std::vector<double> mag(static_cast<size_t>(c.rows * d.stride));
  const bool layer = c.op == OpId::layer_norm || c.op == OpId::ada_layer_norm;
  for (int64_t row = 0; row < c.rows; ++row) {
    double mean = 0, ss = 0;
    for (int64_t i = 0; layer && i < H; ++i) mean += d.x.get(row * d.stride + i) / static_cast<double>(H);
    for (int64_t i = 0; layer && i < H; ++i) ss += std::pow(d.x.get(row * d.stride + i) - mean, 2);
    const double rstd = 1 / std::sqrt(ss / static_cast<double>(H) + c.eps);
    const int64_t b = row / std::max<int64_t>(d.seq, 1);
    for (int64_t i = 0; i < H; ++i) {
      const int64_t k = row * d.stride + i;
      double t = 0;
      if (layer) {
        t = (std::fabs(d.x.get(k)) + std::fabs(mean)) * rstd;
        if (c.weight) t *= std::fabs(d.weight.get(i));
        if (c.bias) t += std::fabs(d.bias.get(i));
        if (c.op == OpId::ada_layer_norm)
          t = t * std::fabs(1 + d.scale.get(b * H + i)) + std::fabs(d.shift.get(b * H + i));
      }
      mag[static_cast<size_t>(k)] = fp32_terms_magnitude(d.out.get(k), t, c.dtype);
    }
  }
  return mag;
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
    case OpId::rms_norm_quant_int8:
    case OpId::rms_norm_quant_fp8:
      return rms_norm_quant(t.q, t.q_scales, t.x, t.weight, eps, t.static_scale, weight_offset, stream);
    case OpId::fused_add_rms_norm_quant_int8:
    case OpId::fused_add_rms_norm_quant_fp8:
      return fused_add_rms_norm_quant(t.q, t.q_scales, t.x, t.residual, t.weight, eps, t.static_scale, weight_offset,
                                      stream);
    default:
      break;
  }
  return invalid_argument("unknown op");
}

bool adds_residual(OpId op) {
  return op == OpId::fused_add_rms_norm || op == OpId::fused_add_rms_norm_quant_int8 ||
         op == OpId::fused_add_rms_norm_quant_fp8;
}

CaseResult run_norm_case_cuda(const NormCase& c, int device) {
  return run_case(
      make_inputs(c), device, buffers,
      [&](const NormData& d, const std::vector<void*>& p, Device dev) {
        return call_op(c, d, NormPtrs{p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]}, dev);
      },
      [&](const NormData& got, const NormData& want, CaseResult* r) {
        if (c.op == OpId::fused_add_rms_norm) {
          compare_outputs("x", got.x, want.x, c.rows, c.hidden, got.stride, r);
          compare_outputs("residual", got.residual, want.residual, c.rows, c.hidden, got.stride, r);
          return;
        }
        if (op_quant_out_dtype(c.op)) {
          if (adds_residual(c.op))
            compare_outputs("residual", got.residual, want.residual, c.rows, c.hidden, got.stride, r);
          compare_quantized(got.q, got.q_scales, want.q, want.q_scales, c.rows, c.hidden, c.dtype, c.static_scale, r);
          return;
        }
        // A constant row's mean is exact in fp32 (a sum of equal 16-bit values), so it normalizes to 0 and the
        // output is the bias: no allowance for the rounding of large fp32 terms there.
        if (c.constant_rows)
          compare_outputs("out", got.out, want.out, c.rows, c.hidden, got.stride, r);
        else
          compare_outputs("out", got.out, want.out, c.rows, c.hidden, got.stride, fp32_terms(c, want), r);
        // Padding between rows must still hold the poison: nothing wrote outside the view.
        const auto* bytes = static_cast<const uint8_t*>(got.out.data());
        const auto e = static_cast<int64_t>(dtype_size(c.dtype));
        for (int64_t row = 0; row < c.rows; ++row)
          for (int64_t k = c.hidden * e; k < got.stride * e; ++k)
            if (bytes[row * got.stride * e + k] != 0xFF) {
              note_mismatch(r, "out padding written at row " + std::to_string(row));
              return;
            }
      });
}

CaseResult check_norm_properties(const NormCase& c) {
  CaseResult r;
  NormData d = make_inputs(c);
  const int64_t H = c.hidden, S = d.stride;
  auto run = [&](const NormCase& cc, NormData& dd) { return call_op(cc, dd, host_ptrs(dd), Device::cpu()); };
  auto fail = [&](const std::string& what) { note_mismatch(&r, what); };
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
      compare_outputs("residual", d.residual, plain.x, c.rows, H, S, &r, 0.0);
      compare_outputs("x", d.x, plain.out, c.rows, H, S, &r, 0.0);
      break;
    }
    case OpId::rms_norm:
    case OpId::layer_norm: {
      // Unweighted output: mean 0 (layer norm) and second moment v / (v + eps), v the input's (RMS: mean square,
      // layer norm: variance; 1 unless eps matters: one-element or constant rows give 0); weighted = unweighted * w
      // + b.
      pc.weight = pc.bias = false;
      r.status = run(pc, plain);
      const Tolerance tol = tolerance(c.dtype);
      const bool centered = c.op == OpId::layer_norm;
      auto second_moment = [&](const HostBuffer& b, int64_t row) {
        double s1 = 0, s2 = 0;
        for (int64_t i = 0; i < H; ++i) {
          const double v = b.get(row * S + i);
          s1 += v;
          s2 += v * v;
        }
        const double mean = s1 / H;
        return std::pair{mean, centered ? s2 / H - mean * mean : s2 / H};
      };
      for (int64_t row = 0; row < c.rows; ++row) {
        const auto [mean, stat] = second_moment(plain.out, row);
        const double v = second_moment(d.x, row).second;
        const double want = v / (v + c.eps);
        if (!(std::fabs(stat - want) <= 4 * tol.rtol + 1e-4))
          fail("row " + std::to_string(row) + ": second moment " + std::to_string(stat) + ", expected " +
               std::to_string(want));
        if (centered && !(std::fabs(mean) <= 4 * tol.rtol + 1e-4))
          fail("row " + std::to_string(row) + ": mean " + std::to_string(mean) + ", expected 0");
      }
      expect_each([&](int64_t row, int64_t i, double* m) {
        double y = plain.out.get(row * S + i);
        if (c.weight) y *= c.weight_offset + d.weight.get(i);
        *m = std::fabs(y);
        if (centered && c.bias) {
          y += d.bias.get(i);
          *m += std::fabs(d.bias.get(i));
        }
        return y;
      });
      compare_outputs("out", d.out, expect, c.rows, H, S, mag, &r, 2.0);
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
      compare_outputs("out", d.out, expect, c.rows, H, S, mag, &r, 3.0);
      break;
    }
    case OpId::rms_norm_quant_int8:
    case OpId::rms_norm_quant_fp8:
    case OpId::fused_add_rms_norm_quant_int8:
    case OpId::fused_add_rms_norm_quant_fp8: {
      // == quantize_per_token_*(rms_norm(x)) (fused add: of rms_norm(round(x + residual)), the residual that sum)
      // bit for bit; a static scale gives every y / s its nearest code.
      pc.op = OpId::rms_norm;
      if (adds_residual(c.op)) {
        for (int64_t k = 0; k < c.rows * S; ++k) plain.x.set(k, plain.x.get(k) + plain.residual.get(k));
        compare_outputs("residual", d.residual, plain.x, c.rows, H, S, &r, 0.0);
      }
      r.status = run(pc, plain);
      if (!r.status.ok()) return r;
      check_quantized_composition(plain.out, c.rows, H, S, d.q, d.q_scales, c.static_scale, static_quant_scale(c.op),
                                  &r);
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
      compare_outputs("out", d.out, expect, c.rows, H, S, &r, 3.0);
      break;
    }
  }
  return r;
}

void verify_norm_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed, std::vector<VerifyCase>* out) {
  for_each_row_shape(grid, [&](int64_t rows, int64_t hidden, int64_t pad) {
    NormCase c;
    c.op = op;
    c.dtype = dtype;
    c.rows = rows;
    c.hidden = hidden;
    c.row_pad = pad;
    c.seed = (*seed)++;
    out->push_back({c.name(), [c, grid] { return grid.cuda ? run_norm_case_cuda(c, grid.device) : check_norm_properties(c); }});
  });
}

NormCase random_norm_case(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 11);
  constexpr OpId kOps[] = {OpId::rms_norm,
                           OpId::fused_add_rms_norm,
                           OpId::layer_norm,
                           OpId::ada_layer_norm,
                           OpId::rms_norm_gelu,
                           OpId::rms_norm_quant_int8,
                           OpId::rms_norm_quant_fp8,
                           OpId::fused_add_rms_norm_quant_int8,
                           OpId::fused_add_rms_norm_quant_fp8};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  NormCase c;
  c.op = kOps[pick(static_cast<int>(std::size(kOps)))];
  c.dtype = random_float_dtype(rng);
  if (op_quant_out_dtype(c.op)) {
    if (c.dtype == DType::f32) c.dtype = DType::bf16;  // f16 / bf16 only
    c.static_scale = pick(3) == 0;
  }
  const RandomRows r = random_rows(rng, int64_t{1} << 20);
  c.rows = r.rows;
  c.hidden = r.hidden;
  c.row_pad = r.pad;
  c.weight = pick(4) != 0;
  c.bias = pick(2) == 0;
  c.weight_offset = (c.op == OpId::rms_norm || op_quant_out_dtype(c.op)) && pick(3) == 0 ? 1.0f : 0.0f;
  constexpr double kMagnitudes[] = {1.0, 1.0, 100.0, 30000.0};
  c.magnitude = kMagnitudes[pick(4)];
  c.seed = seed;
  return c;
}

}  // namespace kernelkit::testing
