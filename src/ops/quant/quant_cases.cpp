// GPU cases of the quantization ops: the same inputs through the CPU reference and the CUDA kernels, every output
// compared (linear: the tolerance table plus the fp32 accumulation bound; quantizers: bit for bit).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {
namespace {

Status up(DeviceBuffer& d, const HostBuffer& h) {
  KK_RETURN_IF_ERROR(d.alloc(std::max<size_t>(h.bytes(), 16)));
  return d.upload(h);
}

void note(CaseResult* r, const std::string& what) {
  ++r->mismatches;
  if (r->mismatches <= 4) r->detail += "  " + what + "\n";
}

// One checked output element out[t, row]: counted, its error tracked against the allowed one, a mismatch noted.
void check_element(CaseResult* r, double got, double want, double allowed, int64_t t, int64_t row) {
  const double err = std::fabs(got - want);
  ++r->checked;
  if (std::isfinite(err)) {
    r->max_abs_err = std::max(r->max_abs_err, err);
    r->worst_ratio = std::max(r->worst_ratio, err / allowed);
  }
  if (!(err <= allowed)) {
    std::ostringstream os;
    os << "out[" << t << ", " << row << "]: got " << got << ", want " << want << " (allowed " << allowed << ")";
    note(r, os.str());
  }
}

}  // namespace

std::string WeightOnlyCase::name() const {
  std::ostringstream os;
  os << (bits == 8 ? "linear_w8a16" : "linear_w4a16");
  if (bits == 4) os << " g" << group;
  os << " " << dtype_name(dtype) << " m" << m << " n" << n << " k" << k << (bias ? " bias" : "");
  if (x_pad) os << " x_pad " << x_pad;
  return os.str();
}

std::string QuantizeCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " " << rows << "x" << k;
  if (group) os << " g" << group;
  if (pad) os << " pad " << pad;
  return os.str();
}

CaseResult run_weight_only_case_cuda(const WeightOnlyCase& c, int device) {
  CaseResult r;
  if (device >= 0 && cuda_device_count() == 0) {
    r.status = Status(StatusCode::no_device, "no CUDA device");
    return r;
  }
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.m * 131 + c.n * 7 + c.k));
  std::uniform_real_distribution<double> uw(-0.1, 0.1), ux(-1.0, 1.0), ub(-0.5, 0.5);
  // Weights quantized on the CPU (the reference quantizers).
  HostBuffer w(DType::f32, c.n * c.k);
  for (int64_t i = 0; i < w.size(); ++i) w.set(i, uw(rng));
  const int64_t groups = c.bits == 4 ? c.k / c.group : 1;
  HostBuffer q(c.bits == 8 ? DType::i8 : DType::i4x2, c.bits == 8 ? c.n * c.k : c.n * c.k / 2);
  HostBuffer s(DType::f32, c.n * groups);
  const Device cpu = Device::cpu(), gpu = Device::cuda(std::max(device, 0));
  const TensorView wv = TensorView::contiguous(w.data(), DType::f32, {c.n, c.k});
  const TensorView qv_cpu = TensorView::contiguous(q.data(), q.dtype(), {c.n, c.bits == 8 ? c.k : c.k / 2});
  const TensorView sv_cpu = c.bits == 8 ? TensorView::contiguous(s.data(), DType::f32, {c.n})
                                        : TensorView::contiguous(s.data(), DType::f32, {c.n, groups});
  r.status = c.bits == 8 ? quantize_int8_per_channel(qv_cpu, sv_cpu, wv)
                         : quantize_int4_groupwise(qv_cpu, sv_cpu, wv, c.group);
  if (!r.status.ok()) return r;

  const int64_t xs = c.k + c.x_pad;
  HostBuffer x(c.dtype, std::max<int64_t>(1, c.m * xs)), bias(c.dtype, c.n), out(c.dtype, c.m * c.n);
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, ux(rng));
  for (int64_t i = 0; i < bias.size(); ++i) bias.set(i, ub(rng));
  if (c.accumulate)  // out starts random and is added to
    for (int64_t i = 0; i < out.size(); ++i) out.set(i, ux(rng));
  HostBuffer want = out;
  auto views = [&](void* xp, void* qp, void* sp, void* bp, void* op, Device d) {
    struct V {
      TensorView x, q, s, out;
      std::optional<TensorView> b;
    } v;
    v.x = TensorView::strided(xp, c.dtype, {c.m, c.k}, {xs, 1}, d);
    v.q = TensorView::contiguous(qp, q.dtype(), {c.n, c.bits == 8 ? c.k : c.k / 2}, d);
    v.s = c.bits == 8 ? TensorView::contiguous(sp, DType::f32, {c.n}, d)
                      : TensorView::contiguous(sp, DType::f32, {c.n, groups}, d);
    v.out = TensorView::contiguous(op, c.dtype, {c.m, c.n}, d);
    if (c.bias) v.b = TensorView::contiguous(bp, c.dtype, {c.n}, d);
    return v;
  };
  {
    auto v = views(x.data(), q.data(), s.data(), bias.data(), want.data(), cpu);
    const Status st = linear_weight_only(v.out, v.x, v.q, v.s, c.bits, c.group, v.b, nullptr, c.accumulate);
    if (!st.ok()) {
      r.status = Status(st.code(), "reference: " + st.message());
      return r;
    }
  }
  HostBuffer got = out;
  if (device < 0) {  // the harness's self-check: the op under test is the CPU backend again, on poisoned output
    if (!c.accumulate) std::memset(got.data(), 0xFF, got.bytes());
    auto v = views(x.data(), q.data(), s.data(), bias.data(), got.data(), cpu);
    if (r.status = linear_weight_only(v.out, v.x, v.q, v.s, c.bits, c.group, v.b, nullptr, c.accumulate); !r.status.ok()) return r;
  } else {
    DeviceBuffer dx, dq, ds, db, dout;
    if (r.status = first_error({up(dx, x), up(dq, q), up(ds, s), up(db, bias), up(dout, out), c.accumulate ? Status::Ok() : dout.poison()});
        !r.status.ok())
      return r;
    auto v = views(dx.data(), dq.data(), ds.data(), db.data(), dout.data(), gpu);
    if (r.status = linear_weight_only(v.out, v.x, v.q, v.s, c.bits, c.group, v.b, nullptr, c.accumulate); !r.status.ok()) return r;
    if (r.status = first_error({device_synchronize(), dout.download(&got)}); !r.status.ok()) return r;
  }

  // sum_j |x w| per output, from the dequantized weights (the reference's own values, decoded independently).
  std::vector<double> wd(static_cast<size_t>(c.n * c.k)), xd(static_cast<size_t>(c.m * c.k));
  const auto* qb = static_cast<const uint8_t*>(q.data());
  for (int64_t row = 0; row < c.n; ++row)
    for (int64_t j = 0; j < c.k; ++j) {
      int v;
      if (c.bits == 8) {
        v = static_cast<int8_t>(qb[row * c.k + j]);
      } else {
        const int nib = static_cast<int>(j % 8 / 2 + 4 * (j % 2));  // the kernel layout (ops.hpp)
        const uint8_t byte = qb[(row * c.k + j / 8 * 8) / 2 + nib / 2];
        v = (byte >> (4 * (nib % 2))) & 0xF;
        v = v >= 8 ? v - 16 : v;
      }
      wd[static_cast<size_t>(row * c.k + j)] = v * s.get(row * groups + (c.bits == 8 ? 0 : j / c.group));
    }
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t j = 0; j < c.k; ++j) xd[static_cast<size_t>(t * c.k + j)] = x.get(t * xs + j);
  const Tolerance tol = tolerance(c.dtype);
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t row = 0; row < c.n; ++row) {
      double l1 = c.bias ? std::fabs(bias.get(row)) : 0.0;
      const double* xr = &xd[static_cast<size_t>(t * c.k)];
      const double* wr = &wd[static_cast<size_t>(row * c.k)];
      for (int64_t j = 0; j < c.k; ++j) l1 += std::fabs(xr[j] * wr[j]);
      const double want_v = want.get(t * c.n + row);
      check_element(&r, got.get(t * c.n + row), want_v, tol.atol + tol.rtol * std::fabs(want_v) + 1e-6 * l1, t, row);
    }
  return r;
}

std::string W8A8Case::name() const {
  std::ostringstream os;
  os << "linear_w8a8 " << dtype_name(dtype) << " m" << m << " n" << n << " k" << k << (bias ? " bias" : "");
  if (x_pad) os << " x_pad " << x_pad;
  return os.str();
}

CaseResult run_w8a8_case(const W8A8Case& c, int device) {
  CaseResult r;
  if (device >= 0 && cuda_device_count() == 0) {
    r.status = Status(StatusCode::no_device, "no CUDA device");
    return r;
  }
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.m * 131 + c.n * 7 + c.k));
  std::uniform_int_distribution<int> uq(-127, 127);
  std::uniform_real_distribution<double> us(1e-3, 2e-2), ub(-0.5, 0.5);
  const int64_t xs = c.k + c.x_pad;
  HostBuffer x(DType::i8, std::max<int64_t>(1, c.m * xs)), w(DType::i8, std::max<int64_t>(1, c.n * c.k));
  HostBuffer sx(DType::f32, std::max<int64_t>(1, c.m)), sw(DType::f32, std::max<int64_t>(1, c.n));
  HostBuffer bias(c.dtype, std::max<int64_t>(1, c.n)), out(c.dtype, std::max<int64_t>(1, c.m * c.n));
  for (HostBuffer* b : {&x, &w})
    for (int64_t i = 0; i < b->size(); ++i) b->set(i, uq(rng));
  for (HostBuffer* b : {&sx, &sw})
    for (int64_t i = 0; i < b->size(); ++i) b->set(i, us(rng));
  for (int64_t i = 0; i < bias.size(); ++i) bias.set(i, ub(rng));
  std::memset(out.data(), 0xFF, out.bytes());  // poison: NaN in f16 and bf16
  auto call = [&](void* xp, void* sxp, void* wp, void* swp, void* bp, void* op, Device d) {
    std::optional<TensorView> bv;
    if (c.bias) bv = TensorView::contiguous(bp, c.dtype, {c.n}, d);
    return linear_w8a8(TensorView::contiguous(op, c.dtype, {c.m, c.n}, d),
                       TensorView::strided(xp, DType::i8, {c.m, c.k}, {xs, 1}, d),
                       TensorView::contiguous(sxp, DType::f32, {c.m}, d),
                       TensorView::contiguous(wp, DType::i8, {c.n, c.k}, d),
                       TensorView::contiguous(swp, DType::f32, {c.n}, d), bv);
  };
  if (device < 0) {
    r.status = call(x.data(), sx.data(), w.data(), sw.data(), bias.data(), out.data(), Device::cpu());
  } else {
    DeviceBuffer dx, dsx, dw, dsw, db, dout;
    r.status = first_error({up(dx, x), up(dsx, sx), up(dw, w), up(dsw, sw), up(db, bias), up(dout, out)});
    if (r.status.ok())
      r.status = call(dx.data(), dsx.data(), dw.data(), dsw.data(), db.data(), dout.data(), Device::cuda(device));
    if (r.status.ok()) r.status = first_error({device_synchronize(), dout.download(&out)});
  }
  if (!r.status.ok()) return r;

  // Exact integer sums here (independently of the library), scaled in fp64, rounded once to the output dtype.
  const Tolerance tol = tolerance(c.dtype);
  const auto* xb = static_cast<const int8_t*>(x.data());
  const auto* wb = static_cast<const int8_t*>(w.data());
  alignas(8) unsigned char rounded[8];
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t row = 0; row < c.n; ++row) {
      int64_t dot = 0;
      for (int64_t j = 0; j < c.k; ++j) dot += int64_t{xb[t * xs + j]} * int64_t{wb[row * c.k + j]};
      const double scaled = static_cast<double>(dot) * sx.get(t) * sw.get(row);
      double want = scaled + (c.bias ? bias.get(row) : 0.0);
      store_from_double(rounded, c.dtype, 0, want);
      want = load_as_double(rounded, c.dtype, 0);
      // The kernel's fp32 epilogue: the int32 -> fp32 conversion, two products and the bias add (~2^-22 relative).
      const double allowed =
          tol.atol + tol.rtol * std::fabs(want) + std::ldexp(1.0, -22) * (std::fabs(scaled) + std::fabs(want));
      check_element(&r, out.get(t * c.n + row), want, allowed, t, row);
    }
  return r;
}

CaseResult run_quantize_case_cuda(const QuantizeCase& c, int device) {
  CaseResult r;
  if (device >= 0 && cuda_device_count() == 0) {
    r.status = Status(StatusCode::no_device, "no CUDA device");
    return r;
  }
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.rows * 131 + c.k));
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const int64_t ws = c.k + c.pad;
  HostBuffer w(c.dtype, std::max<int64_t>(1, c.rows * ws));
  for (int64_t i = 0; i < w.size(); ++i) w.set(i, i < ws ? 0.0 : u(rng));  // row 0: all zeros
  const bool int4 = c.op == OpId::quantize_int4_groupwise;
  const int64_t qcols = int4 ? c.k / 2 : c.k, scols = int4 ? c.k / c.group : 1;
  HostBuffer q(int4 ? DType::i4x2 : DType::i8, c.rows * qcols), s(DType::f32, c.rows * scols);
  auto call = [&](void* wp, void* qp, void* sp, Device d) {
    const TensorView wv = TensorView::strided(wp, c.dtype, {c.rows, c.k}, {ws, 1}, d);
    const TensorView qv = TensorView::contiguous(qp, q.dtype(), {c.rows, qcols}, d);
    const TensorView sv = int4 ? TensorView::contiguous(sp, DType::f32, {c.rows, scols}, d)
                               : TensorView::contiguous(sp, DType::f32, {c.rows}, d);
    switch (c.op) {
      case OpId::quantize_int8_per_channel:
        return quantize_int8_per_channel(qv, sv, wv);
      case OpId::quantize_per_token_int8:
        return quantize_per_token_int8(qv, sv, wv);
      default:
        return quantize_int4_groupwise(qv, sv, wv, c.group);
    }
  };
  HostBuffer q_want = q, s_want = s;
  if (Status st = call(w.data(), q_want.data(), s_want.data(), Device::cpu()); !st.ok()) {
    r.status = Status(st.code(), "reference: " + st.message());
    return r;
  }
  HostBuffer q_got = q, s_got = s;
  if (device < 0) {  // the harness's self-check: the CPU backend again, on poisoned outputs
    std::memset(q_got.data(), 0xFF, q_got.bytes());
    std::memset(s_got.data(), 0xFF, s_got.bytes());
    if (r.status = call(w.data(), q_got.data(), s_got.data(), Device::cpu()); !r.status.ok()) return r;
  } else {
    DeviceBuffer dw, dq, ds;
    if (r.status = first_error({up(dw, w), up(dq, q), up(ds, s), dq.poison(), ds.poison()}); !r.status.ok()) return r;
    if (r.status = call(dw.data(), dq.data(), ds.data(), Device::cuda(device)); !r.status.ok()) return r;
    if (r.status = first_error({device_synchronize(), dq.download(&q_got), ds.download(&s_got)}); !r.status.ok())
      return r;
  }
  const auto* qg = static_cast<const uint8_t*>(q_got.data());
  const auto* qw = static_cast<const uint8_t*>(q_want.data());
  for (int64_t i = 0; i < static_cast<int64_t>(q.bytes()); ++i) {
    ++r.checked;
    if (qg[i] != qw[i]) {
      std::ostringstream os;
      os << "q byte " << i << " (row " << i / qcols << "): got 0x" << std::hex << int{qg[i]} << ", want 0x"
         << int{qw[i]};
      note(&r, os.str());
    }
  }
  for (int64_t i = 0; i < s.size(); ++i) {
    ++r.checked;
    const float g = static_cast<const float*>(s_got.data())[i], want = static_cast<const float*>(s_want.data())[i];
    if (std::memcmp(&g, &want, sizeof(float)) != 0) {
      std::ostringstream os;
      os << "scale " << i << ": got " << g << ", want " << want;
      note(&r, os.str());
    }
  }
  return r;
}

}  // namespace kernelkit::testing
