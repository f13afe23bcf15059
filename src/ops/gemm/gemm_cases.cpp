#include "ops/gemm/gemm_cases.hpp"

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

namespace kernelkit::testing {

std::string LinearCase::name() const {
  std::ostringstream os;
  os << "linear " << dtype_name(dtype) << " m" << m << " n" << n << " k" << k
     << (epilogue == LinearEpilogue::bias ? " +bias" : epilogue == LinearEpilogue::bias_gelu ? " +bias+gelu" : "")
     << (allow_tf32 ? " tf32" : "") << (accumulate ? " y+=" : "") << (row_pad ? " pad " + std::to_string(row_pad) : "");
  return os.str();
}

CaseResult run_linear_case(const LinearCase& c, Device device) {
  CaseResult r;
  if (device.type == DeviceType::cuda && !(r.status = need_device()).ok()) return r;
  const int64_t xs = c.k + c.row_pad, ws = c.k + c.row_pad, ys = c.n + c.row_pad;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.m * 131 + c.n * 17 + c.k));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  HostBuffer x(c.dtype, c.m * xs), w(c.dtype, c.n * ws), bias(c.dtype, c.n), y(c.dtype, c.m * ys);
  for (HostBuffer* b : {&x, &w, &bias})
    for (int64_t i = 0; i < b->size(); ++i) b->set(i, u(rng));
  for (int64_t i = 0; i < y.size(); ++i) y.set(i, NAN);
  HostBuffer y0(c.dtype, c.m * ys);  // accumulate: the starting y (padding stays NaN)
  if (c.accumulate)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < ys; ++j) y.set(i * ys + j, j < c.n ? u(rng) : NAN);
  for (int64_t i = 0; i < y.size(); ++i) y0.set(i, y.get(i));
  const bool has_bias = c.epilogue != LinearEpilogue::none;
  const LinearOptions opt{c.epilogue, c.allow_tf32, c.accumulate};

  const auto call = [&](const std::vector<void*>& p, Device d) {
    const TensorView yv = TensorView::strided(p[0], c.dtype, {c.m, c.n}, {ys, 1}, d);
    const TensorView xv = TensorView::strided(p[1], c.dtype, {c.m, c.k}, {xs, 1}, d);
    const TensorView wv = TensorView::strided(p[2], c.dtype, {c.n, c.k}, {ws, 1}, d);
    const TensorView bv = TensorView::contiguous(p[3], c.dtype, {c.n}, d);
    return linear(yv, xv, wv, has_bias ? &bv : nullptr, opt);
  };
  // The op under test only: the check below evaluates the formula in fp64 independently of the library.
  r.status = run_under_test({{&y, c.accumulate ? Role::inout : Role::out}, {&x, Role::in}, {&w, Role::in},
                             {&bias, Role::in}},
                            call, device.type == DeviceType::cpu ? -1 : device.index);
  if (!r.status.ok()) return r;

  const Tolerance tol = tolerance(c.dtype);
  const double acc = c.allow_tf32 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -20);
  std::ostringstream detail;
  alignas(8) unsigned char rounded[8];
  // The stored (rounded) inputs as doubles, once: the check is m n k multiply-adds.
  std::vector<double> xd(static_cast<size_t>(c.m * c.k)), wd(static_cast<size_t>(c.n * c.k));
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t l = 0; l < c.k; ++l) xd[static_cast<size_t>(i * c.k + l)] = x.get(i * xs + l);
  for (int64_t j = 0; j < c.n; ++j)
    for (int64_t l = 0; l < c.k; ++l) wd[static_cast<size_t>(j * c.k + l)] = w.get(j * ws + l);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double want = 0, mag = 0;
      for (int64_t l = 0; l < c.k; ++l) {
        const double p = xd[static_cast<size_t>(i * c.k + l)] * wd[static_cast<size_t>(j * c.k + l)];
        want += p;
        mag += std::fabs(p);
      }
      // Extra error allowed beyond the one rounding of the output, measured on the H200:
      // - y += (accumulate): cuBLASLt's bias epilogue with beta = 1 rounds the partial sum x w^T + y to the output
      //   type before adding the bias (fp16/bf16 errors of one ulp of |x w^T| + |y|, seen after cancellation);
      // - bias+gelu: the GELU epilogue evaluates tanh approximately (tanh.approx.f32, relative error <= 2^-11), which
      //   moves gelu(a) = a/2 (1 + tanh(.)) by at most |a|/2 2^-11.
      double extra = 0;
      if (c.accumulate) {
        extra += tol.rtol * (std::fabs(want) + std::fabs(y0.get(i * ys + j)));
        want += y0.get(i * ys + j);
      }
      if (has_bias) want += bias.get(j);
      if (c.epilogue == LinearEpilogue::bias_gelu) {  // gelu_tanh, written out here independently of the library
        extra += 0.5 * std::fabs(want) * std::ldexp(1.0, -11);
        want = 0.5 * want * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (want + 0.044715 * want * want * want)));
      }
      store_from_double(rounded, c.dtype, 0, want);  // the one rounding of the output
      want = load_as_double(rounded, c.dtype, 0);
      const double got = y.get(i * ys + j), bound = tol.atol + tol.rtol * std::fabs(want) + acc * mag + extra;
      const double err = std::fabs(got - want);
      ++r.checked;
      r.max_abs_err = std::max(r.max_abs_err, std::isfinite(err) ? err : r.max_abs_err);
      r.worst_ratio = std::max(r.worst_ratio, std::isfinite(err) ? err / bound : INFINITY);
      if (!(err <= bound)) {
        if (r.mismatches++ < 5) detail << "  y[" << i << ", " << j << "] = " << got << ", expected " << want << "\n";
      }
    }
    for (int64_t j = c.n; j < ys; ++j)  // row padding: never written
      if (!std::isnan(y.get(i * ys + j))) {
        if (r.mismatches++ < 5) detail << "  padding y[" << i << ", " << j << "] was written\n";
      }
  }
  r.detail = detail.str();
  return r;
}

}  // namespace kernelkit::testing
