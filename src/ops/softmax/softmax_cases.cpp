// The softmax family's cases (softmax_cases.hpp).
#include "ops/softmax/softmax_cases.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

namespace kernelkit::testing {

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

// Inputs that are -inf. Every 5th row is all -inf: its output must be zeros, not NaN. Every 7th has -inf over its
// first half (a padding mask), so some threads see nothing but -inf while the row has a finite max.
bool input_is_minus_inf(int64_t row, int64_t j, int64_t hidden) {
  return row % 5 == 3 || (row % 7 == 5 && j < hidden / 2);
}

SoftmaxData make_softmax_inputs(const SoftmaxCase& c) {
  SoftmaxData d;
  d.stride = c.hidden + c.row_pad;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + c.hidden * 13 + c.rows);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  d.x = HostBuffer(c.dtype, c.rows * d.stride);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < d.stride; ++j)
      d.x.set(r * d.stride + j, input_is_minus_inf(r, j, c.hidden) ? -INFINITY : c.magnitude * u(rng));
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
  return run_case(
      make_softmax_inputs(c), device,
      [](SoftmaxData& d) { return std::vector<CaseBuffer>{{&d.x, Role::in}, {&d.out, Role::out}}; },
      [&](const SoftmaxData& d, const std::vector<void*>& p, Device dev) { return call_softmax(c, d, p[0], p[1], dev); },
      [&](const SoftmaxData& got, const SoftmaxData& want, CaseResult* r) {
        // p_j = exp(s_j - max) / l with s = scale x: the fp32 exponent s_j - max is off by a few roundings of
        // |s_j| + |max|, which p_j carries as relative error (large logits, e.g. |s| ~ 800, are ill-conditioned).
        std::vector<double> mag(static_cast<size_t>(c.rows * got.stride));
        for (int64_t row = 0; row < c.rows; ++row) {
          double top = 0;
          for (int64_t j = 0; j < c.hidden; ++j) {
            const double s = std::fabs(c.scale * want.x.get(row * got.stride + j));
            if (std::isfinite(s)) top = std::max(top, s);
          }
          for (int64_t j = 0; j < c.hidden; ++j) {
            const int64_t k = row * got.stride + j;
            const double s = std::fabs(c.scale * want.x.get(k)), p = want.out.get(k);
            const double terms = std::isfinite(s) ? std::fabs(p) * (s + top) : 0;
            mag[static_cast<size_t>(k)] = fp32_terms_magnitude(p, terms, c.dtype);
          }
        }
        compare_outputs("out", got.out, want.out, c.rows, c.hidden, got.stride, mag, r);
      });
}

CaseResult check_softmax_properties(const SoftmaxCase& c) {
  CaseResult r;
  SoftmaxData d = make_softmax_inputs(c);
  r.status = call_softmax(c, d, d.x.data(), d.out.data(), Device::cpu());
  if (!r.status.ok()) return r;
  const Tolerance tol = tolerance(c.dtype);
  auto fail = [&](const std::string& what) { note_mismatch(&r, what); };
  for (int64_t row = 0; row < c.rows; ++row) {
    const int64_t limit = c.op == OpId::causal_softmax ? row % c.s_q + c.hidden - c.s_q : c.hidden - 1;
    bool empty = true;  // every visible input -inf
    for (int64_t j = 0; j <= limit && empty; ++j) empty = input_is_minus_inf(row, j, c.hidden);
    double sum = 0;
    for (int64_t j = 0; j < c.hidden; ++j) {
      const double y = d.out.get(row * d.stride + j);
      ++r.checked;
      if (!(y >= 0.0 && y <= 1.0))
        fail("row " + std::to_string(row) + ": entry " + std::to_string(y) + " outside [0, 1]");
      if ((empty || j > limit || input_is_minus_inf(row, j, c.hidden)) && y != 0.0)
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

void verify_softmax_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed,
                          std::vector<VerifyCase>* out) {
  for_each_row_shape(grid, [&](int64_t rows, int64_t hidden, int64_t pad) {
    // causal_softmax: the rows are one head's queries (s_q = rows).
    const SoftmaxCase c{op, dtype, rows, hidden, op == OpId::causal_softmax ? rows : 1, 0.125f, 8.0, pad, (*seed)++};
    out->push_back({c.name(), [c, grid] {
                      return grid.cuda ? run_softmax_case_cuda(c, grid.device) : check_softmax_properties(c);
                    }});
  });
}

SoftmaxCase random_softmax_case(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 17);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  SoftmaxCase c;
  c.op = pick(2) ? OpId::softmax : OpId::causal_softmax;
  c.dtype = random_float_dtype(rng);
  const RandomRows r = random_rows(rng, int64_t{1} << 20);
  c.rows = r.rows;
  c.hidden = r.hidden;
  c.row_pad = r.pad;
  if (c.op == OpId::causal_softmax) {  // queries per head: a divisor of the rows (s_q <= s_k, s_q > s_k alike)
    constexpr int64_t kQueries[] = {1, 2, 3, 4, 7, 16};
    c.s_q = kQueries[pick(6)];
    c.rows = std::max<int64_t>(c.s_q, c.rows / c.s_q * c.s_q);
  }
  constexpr float kScales[] = {1.0f, 0.125f, 4.0f};
  c.scale = kScales[pick(3)];
  constexpr double kMagnitudes[] = {0.1, 4.0, 200.0};
  c.magnitude = kMagnitudes[pick(3)];
  c.seed = seed;
  return c;
}

}  // namespace kernelkit::testing
