// GPU cases of the quantization ops: the same inputs through the CPU reference and the CUDA kernels, every output
// compared (linear: the tolerance table plus the fp32 accumulation bound; quantizers: bit for bit).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "ops/quant/quant_cases.hpp"

#include "ops/quant/quant.hpp"

namespace kernelkit::testing {

int64_t layout_rows(int bits, int64_t n) {
  return bits == 4 ? (n + detail::kInt4TileRows - 1) / detail::kInt4TileRows * detail::kInt4TileRows : n;
}
int64_t layout_cols(int bits, int64_t k) {
  return bits == 4 ? (k + detail::kInt4RegionValues - 1) / detail::kInt4RegionValues * detail::kInt4RegionValues : k;
}

std::string WeightOnlyCase::name() const {
  std::ostringstream os;
  os << (bits == 8 ? "linear_w8a16" : "linear_w4a16");
  if (group) os << " g" << group;
  if (zeros) os << " zeros";
  if (perm != DType::f32) os << " act-order " << dtype_name(perm);
  os << " " << dtype_name(dtype) << " m" << m << " n" << n << " k" << k << (bias ? " bias" : "");
  if (x_pad) os << " x_pad " << x_pad;
  return os.str();
}

std::string QuantizeCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " " << rows << "x" << k;
  if (group) os << " g" << group;
  if (pad) os << " pad " << pad;
  if (static_scale) os << " static scale";
  if (scales_ld)
    os << (detail::scale_span(op) == detail::ScaleSpan::block ? " scales ld " : " column-major scales ld ")
       << scales_ld;
  return os.str();
}

CaseResult run_weight_only_case_cuda(const WeightOnlyCase& c, int device) {
  CaseResult r;
  if (device >= 0 && !(r.status = need_device()).ok()) return r;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.m * 131 + c.n * 7 + c.k));
  std::uniform_real_distribution<double> uw(-0.1, 0.1), ux(-1.0, 1.0), ub(-0.5, 0.5);
  const int64_t groups = c.group > 0 ? c.k / c.group : 1;
  const int64_t code_cols = c.bits == 8 ? c.k : c.k / 2;
  HostBuffer q(c.bits == 8 ? DType::i8 : DType::i4x2, c.n * code_cols);
  HostBuffer s(DType::f32, c.n * groups), z(DType::i8, c.zeros ? c.n * groups : 1);
  const TensorView qv_cpu = TensorView::contiguous(q.data(), q.dtype(), {c.n, code_cols});
  const TensorView sv_cpu = c.group == 0 ? TensorView::contiguous(s.data(), DType::f32, {c.n})
                                         : TensorView::contiguous(s.data(), DType::f32, {c.n, groups});
  if (!c.zeros && (c.bits == 8 ? c.group == 0 : c.group >= 64)) {
    // Weights quantized on the CPU (the reference quantizers), as a user's would be.
    HostBuffer w(DType::f32, c.n * c.k);
    for (int64_t i = 0; i < w.size(); ++i) w.set(i, uw(rng));
    const TensorView wv = TensorView::contiguous(w.data(), DType::f32, {c.n, c.k});
    r.status = c.bits == 8 ? quantize_int8_per_channel(qv_cpu, sv_cpu, wv)
                           : quantize_int4_groupwise(qv_cpu, sv_cpu, wv, c.group);
    if (!r.status.ok()) return r;
  } else {
    // Checkpoint-style weights: every code (-8 / -128 included), random positive scales, zero points over the codes'
    // range (4-bit: mostly a checkpoint's [-8, 8], every 4th group anywhere in int8, which the kernels take exactly).
    std::uniform_real_distribution<double> us(0.5, 1.5);
    std::vector<int8_t> plain(static_cast<size_t>(c.n * c.k));
    for (auto& v : plain)
      v = static_cast<int8_t>(c.bits == 8 ? static_cast<int>(rng() % 256) - 128 : static_cast<int>(rng() % 16) - 8);
    if (c.bits == 8) {
      std::memcpy(q.data(), plain.data(), plain.size());
    } else if (!(r.status = pack_int4(qv_cpu, TensorView::contiguous(plain.data(), DType::i8, {c.n, c.k}))).ok()) {
      return r;
    }
    for (int64_t i = 0; i < s.size(); ++i) s.set(i, us(rng) * (c.bits == 8 ? 1e-3 : 2e-2));
    for (int64_t i = 0; i < (c.zeros ? z.size() : 0); ++i)
      z.set(i, c.bits == 8 || i % 4 == 3 ? static_cast<int>(rng() % 256) - 128 : static_cast<int>(rng() % 17) - 8);
  }

  const int64_t xs = c.k + c.x_pad;
  HostBuffer x(c.dtype, std::max<int64_t>(1, c.m * xs)), bias(c.dtype, c.n), out(c.dtype, c.m * c.n);
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, ux(rng));
  for (int64_t i = 0; i < bias.size(); ++i) bias.set(i, ub(rng));
  if (c.accumulate)  // out starts random and is added to
    for (int64_t i = 0; i < out.size(); ++i) out.set(i, ux(rng));
  // act-order: weight column j multiplies input order[j] of x (a random permutation).
  std::vector<int64_t> order(static_cast<size_t>(c.k));
  for (int64_t j = 0; j < c.k; ++j) order[j] = j;
  const bool act_order = c.perm != DType::f32;
  if (act_order) std::shuffle(order.begin(), order.end(), rng);
  HostBuffer perm(act_order ? c.perm : DType::i32, c.k);
  for (int64_t j = 0; j < c.k; ++j) perm.set(j, static_cast<double>(order[j]));
  HostBuffer want = out;
  const auto call = [&](const std::vector<void*>& p, Device d) {
    const TensorView xv = TensorView::strided(p[0], c.dtype, {c.m, c.k}, {xs, 1}, d);
    const TensorView qv = TensorView::contiguous(p[1], q.dtype(), {c.n, code_cols}, d);
    const TensorView sv = c.group == 0 ? TensorView::contiguous(p[2], DType::f32, {c.n}, d)
                                       : TensorView::contiguous(p[2], DType::f32, {c.n, groups}, d);
    const TensorView ov = TensorView::contiguous(p[5], c.dtype, {c.m, c.n}, d);
    std::optional<TensorView> bv, zv, pv;
    if (c.bias) bv = TensorView::contiguous(p[3], c.dtype, {c.n}, d);
    if (c.zeros) zv = TensorView::contiguous(p[4], DType::i8, {c.n, groups}, d);
    if (act_order) pv = TensorView::contiguous(p[6], c.perm, {c.k}, d);
    return linear_weight_only(ov, xv, qv, sv, c.bits, c.group, bv, nullptr, c.accumulate, zv, pv);
  };
  HostBuffer got = out;
  const Role written = c.accumulate ? Role::inout : Role::out;
  const auto buffers = [&](HostBuffer* result) -> std::vector<CaseBuffer> {
    return {{&x, Role::in}, {&q, Role::in},    {&s, Role::in},   {&bias, Role::in},
            {&z, Role::in}, {result, written}, {&perm, Role::in}};
  };
  if (r.status = run_reference(buffers(&want), call); !r.status.ok()) return r;
  if (r.status = run_under_test(buffers(&got), call, device); !r.status.ok()) return r;

  // sum_j |x w| per output, from the dequantized weights (the reference's own values, decoded independently).
  std::vector<double> wd(static_cast<size_t>(c.n * c.k)), xd(static_cast<size_t>(c.m * c.k));
  const auto* qb = static_cast<const uint8_t*>(q.data());
  for (int64_t row = 0; row < c.n; ++row)
    for (int64_t j = 0; j < c.k; ++j) {
      int v;
      if (c.bits == 8) {
        v = static_cast<int8_t>(qb[row * c.k + j]);
      } else {
        // The kernel layout (ops.hpp): the word of k = j in lane 4 (row % 8) + (j % 64) / 16 of its row tile's
        // region, in the lane's first 8 bytes for rows 0-7 of the tile, and nibble P(j % 8) of the word.
        const int64_t lane = 4 * (row % 8) + j % 64 / 16;
        const int64_t word = ((row / 16 * (c.k / 64) + j / 64) * 32 + lane) * 16 + row % 16 / 8 * 8 + j % 16 / 8 * 4;
        const int nib = static_cast<int>(j % 8 / 2 + 4 * (j % 2));
        const uint8_t byte = qb[word + nib / 2];
        v = (byte >> (4 * (nib % 2))) & 0xF;
        v = v >= 8 ? v - 16 : v;
      }
      const int64_t g = row * groups + (c.group > 0 ? j / c.group : 0);
      wd[static_cast<size_t>(row * c.k + j)] = (v - (c.zeros ? z.get(g) : 0.0)) * s.get(g);
    }
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t j = 0; j < c.k; ++j) xd[static_cast<size_t>(t * c.k + j)] = x.get(t * xs + order[j]);
  // The reference itself is held to the dot products of these independently decoded values (with act-order, x in
  // the case's own order): a reference that ignored perm, the zero points or the layout would fail here.
  const Tolerance tol = tolerance(c.dtype);
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t row = 0; row < c.n; ++row) {
      double l1 = c.bias ? std::fabs(bias.get(row)) : 0.0;
      double dot = (c.bias ? bias.get(row) : 0.0) + (c.accumulate ? out.get(t * c.n + row) : 0.0);
      const double* xr = &xd[static_cast<size_t>(t * c.k)];
      const double* wr = &wd[static_cast<size_t>(row * c.k)];
      for (int64_t j = 0; j < c.k; ++j) l1 += std::fabs(xr[j] * wr[j]), dot += xr[j] * wr[j];
      const double want_v = want.get(t * c.n + row);
      if (!(std::fabs(want_v - dot) <= tol.atol + tol.rtol * std::fabs(dot) + 1e-9 * l1))
        note_mismatch(&r, "reference out[" + std::to_string(t) + ", " + std::to_string(row) +
                              "] = " + std::to_string(want_v) + " but the decoded weights give " + std::to_string(dot));
      check_element(&r, "out", got.get(t * c.n + row), want_v, tol.atol + tol.rtol * std::fabs(want_v) + 1e-6 * l1, t,
                    row);
    }
  return r;
}

std::string W8A8Case::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " m" << m << " n" << n << " k" << k << (bias ? " bias" : "");
  if (x_pad) os << " x_pad " << x_pad;
  if (per_tensor) os << " per_tensor";
  if (fast_accumulation) os << " fast";
  if (row_major_x_scales) os << " row-major x_scales";
  if (w_scales_ld) os << " w_scales ld " << w_scales_ld;
  if (accumulate) os << " accumulate";
  return os.str();
}

CaseResult run_w8a8_case(const W8A8Case& c, int device) {
  CaseResult r;
  if (device >= 0 && !(r.status = need_device()).ok()) return r;
  const bool fp8 = op_fp8_dtype(c.op).has_value(), block = c.op == OpId::linear_fp8_blockwise;
  const DType value = fp8 ? DType::f8e4m3 : DType::i8;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.m * 131 + c.n * 7 + c.k));
  std::uniform_int_distribution<int> uq(-127, 127), ucode(0, 253);
  std::uniform_real_distribution<double> us(1e-3, 2e-2), ub(-0.5, 0.5);
  const int64_t xs = c.k + c.x_pad, B = kQuantBlockSize;
  // The scales: per token and channel, per tensor, or blocks. sx[t, b] at t * sx_t + b * sx_b (token-major: ld m, or
  // row major), sw[r / B, b] at (r / B) * sw_ld + b; b the k block (always 0 but for block scales).
  const int64_t k_blocks = block ? c.k / B : 1, n_blocks = block ? (c.n + B - 1) / B : 1;
  const int64_t sx_t = block ? (c.row_major_x_scales ? k_blocks : 1) : 1, sx_b = c.row_major_x_scales ? 1 : c.m;
  const int64_t sw_ld = block ? (c.w_scales_ld > 0 ? c.w_scales_ld : fp8_block_scales_ld(c.k)) : 1;
  const int64_t sxn = c.per_tensor ? 1 : c.m * k_blocks, swn = c.per_tensor ? 1 : block ? n_blocks * sw_ld : c.n;
  HostBuffer x(value, std::max<int64_t>(1, c.m * xs)), w(value, std::max<int64_t>(1, c.n * c.k));
  HostBuffer sx(DType::f32, std::max<int64_t>(1, sxn)), sw(DType::f32, std::max<int64_t>(1, swn));
  HostBuffer bias(c.dtype, std::max<int64_t>(1, c.n)), out(c.dtype, std::max<int64_t>(1, c.m * c.n));
  // INT8: values in [-127, 127]; e4m3: each of the 254 finite codes (0x7f and 0xff are NaN), subnormals included.
  for (HostBuffer* b : {&x, &w})
    for (int64_t i = 0; i < b->size(); ++i) {
      if (!fp8) {
        b->set(i, uq(rng));
        continue;
      }
      const int code = ucode(rng);
      static_cast<uint8_t*>(b->data())[i] = static_cast<uint8_t>(code < 127 ? code : code + 1);
    }
  for (HostBuffer* b : {&sx, &sw})  // a block row's padding too: read by nothing, so any value
    for (int64_t i = 0; i < b->size(); ++i) b->set(i, us(rng));
  for (int64_t i = 0; i < bias.size(); ++i) bias.set(i, ub(rng));
  if (c.accumulate)  // out starts random and is added to
    for (int64_t i = 0; i < out.size(); ++i) out.set(i, ub(rng));
  const HostBuffer y0 = out;
  const auto sx_at = [&](int64_t t, int64_t b) { return sx.get(c.per_tensor ? 0 : block ? t * sx_t + b * sx_b : t); };
  const auto sw_at = [&](int64_t row, int64_t b) {
    return sw.get(c.per_tensor ? 0 : block ? row / B * sw_ld + b : row);
  };
  const auto call = [&](const std::vector<void*>& p, Device d) {
    void *xp = p[0], *sxp = p[1], *wp = p[2], *swp = p[3], *bp = p[4], *op = p[5];
    std::optional<TensorView> bv;
    if (c.bias) bv = TensorView::contiguous(bp, c.dtype, {c.n}, d);
    const TensorView ov = TensorView::contiguous(op, c.dtype, {c.m, c.n}, d),
                     xv = TensorView::strided(xp, value, {c.m, c.k}, {xs, 1}, d),
                     sxv = block ? TensorView::strided(sxp, DType::f32, {c.m, k_blocks}, {sx_t, sx_b}, d)
                                 : TensorView::contiguous(sxp, DType::f32, {sxn}, d),
                     wv = TensorView::contiguous(wp, value, {c.n, c.k}, d),
                     swv = block ? TensorView::strided(swp, DType::f32, {n_blocks, k_blocks}, {sw_ld, 1}, d)
                                 : TensorView::contiguous(swp, DType::f32, {swn}, d);
    return fp8 ? linear_fp8(ov, xv, sxv, wv, swv, bv, nullptr, c.fast_accumulation, c.accumulate)
               : linear_w8a8(ov, xv, sxv, wv, swv, bv);
  };
  // The op under test only: the reference is the dot products below, computed independently of the library.
  r.status = run_under_test({{&x, Role::in},
                             {&sx, Role::in},
                             {&w, Role::in},
                             {&sw, Role::in},
                             {&bias, Role::in},
                             {&out, c.accumulate ? Role::inout : Role::out}},
                            call, device);
  if (!r.status.ok()) return r;

  // Exact dot products here (int64; e4m3 products are exact in fp64 and their sums good to fp64 precision), of each
  // span of k sharing a pair of scales (all of k, or a 128-wide block), scaled in fp64, rounded once to the output
  // dtype.
  const Tolerance tol = tolerance(c.dtype);
  // x's and w's values, decoded once (the sums below read m n k of each).
  std::vector<double> xd(x.size()), wd(w.size());
  for (auto [buf, vals] : {std::pair{&x, &xd}, std::pair{&w, &wd}})
    for (int64_t i = 0; i < buf->size(); ++i) {
      const uint8_t b = static_cast<const uint8_t*>(buf->data())[i];
      (*vals)[i] = fp8 ? static_cast<double>(e4m3_bits_to_float(b)) : static_cast<double>(static_cast<int8_t>(b));
    }
  // The sums' error beyond the fp32 epilogue. INT8: none (exact int32). FP8: Hopper's FP8 MMA keeps about 14 bits
  // (DeepSeek-V3 report, section 3.3.2): at each 32-value MMA step the products and the running partial sum are
  // aligned to the largest of them and truncated, so each term loses less than u = 2^-13 of that largest term, and a
  // term smaller than u at most itself. cuBLASLt promotes the partial sum to fp32 every 4 such steps (128 values, the
  // report's and CUTLASS's promotion interval; with block scales, each block's sum scaled as it is promoted), where the
  // partial sum restarts from zero; the fp32 sums then add k 2^-24 of the scaled |products|. Fast accumulation never
  // promotes: the partial sum runs over all of k. The bound is on the scaled terms: with block scales each block's at
  // its own scales.
  const int64_t span = block ? B : c.k, promote = c.fast_accumulation ? c.k : B, step = 32;
  const double unit = std::ldexp(1.0, -13), fp32_sums = c.fast_accumulation ? 0.0 : c.k * std::ldexp(1.0, -24);
  alignas(8) unsigned char rounded[8];
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t row = 0; row < c.n; ++row) {
      double scaled = 0, scaled_l1 = 0, mma_error = 0;
      for (int64_t j0 = 0; j0 < c.k; j0 += span) {
        double dot = 0, l1 = 0, span_error = 0, partial = 0;
        for (int64_t s0 = j0; s0 < std::min(c.k, j0 + span); s0 += step) {
          if ((s0 - j0) % promote == 0) partial = 0;
          double p[32], largest = std::fabs(partial);
          const int64_t n_step = std::min<int64_t>(step, std::min(c.k, j0 + span) - s0);
          for (int64_t j = 0; j < n_step; ++j) {
            p[j] = xd[t * xs + s0 + j] * wd[row * c.k + s0 + j];
            largest = std::max(largest, std::fabs(p[j]));
          }
          if (fp8) {
            const double u = unit * largest;
            span_error += std::min(std::fabs(partial), u);
            for (int64_t j = 0; j < n_step; ++j) span_error += std::min(std::fabs(p[j]), u);
          }
          for (int64_t j = 0; j < n_step; ++j) {
            dot += p[j];
            partial += p[j];
            l1 += std::fabs(p[j]);
          }
        }
        const double s = sx_at(t, j0 / B) * sw_at(row, j0 / B);
        scaled += dot * s;
        scaled_l1 += l1 * s;
        mma_error += span_error * s;
      }
      // accumulate: out's starting value y joins the sum. cuBLASLt's epilogue with beta = 1 may round the partial sum
      // (scaled sums + y) to the output type before it adds the bias (as measured for linear's y +=): one more
      // rounding, rtol (|scaled| + |y|).
      const double y = c.accumulate ? y0.get(t * c.n + row) : 0.0;
      double want = scaled + y + (c.bias ? bias.get(row) : 0.0);
      store_from_double(rounded, c.dtype, 0, want);
      want = load_as_double(rounded, c.dtype, 0);
      // The kernel's fp32 epilogue: the sum's conversion or rounding, two products and the bias add (~2^-22 relative).
      const double allowed =
          tol.atol + tol.rtol * std::fabs(want) + std::ldexp(1.0, -22) * (std::fabs(scaled) + std::fabs(want)) +
          mma_error + fp32_sums * scaled_l1 + (c.accumulate ? tol.rtol * (std::fabs(scaled) + std::fabs(y)) : 0.0);
      check_element(&r, "out", out.get(t * c.n + row), want, allowed, t, row);
    }
  return r;
}

Status call_quantizer(OpId op, const TensorView& q, const TensorView& scales, const TensorView& w, int group,
                      bool static_scale, bool column_major_scales) {
  switch (op) {
    case OpId::quantize_int8_per_channel:
      return quantize_int8_per_channel(q, scales, w);
    case OpId::quantize_per_token_int8:
      return quantize_per_token_int8(q, scales, w);
    case OpId::quantize_per_token_fp8:
      return quantize_per_token_fp8(q, scales, w);
    case OpId::quantize_int4_groupwise:
      return quantize_int4_groupwise(q, scales, w, group);
    case OpId::quantize_per_tensor_int8:
      return quantize_per_tensor_int8(q, scales, w, static_scale);
    case OpId::quantize_per_tensor_fp8:
      return quantize_per_tensor_fp8(q, scales, w, static_scale);
    case OpId::quantize_per_token_group_int8:
      return quantize_per_token_group_int8(q, scales, w, group, column_major_scales);
    case OpId::quantize_per_token_group_fp8:
      return quantize_per_token_group_fp8(q, scales, w, group, column_major_scales);
    case OpId::quantize_blockwise_int8:
      return quantize_blockwise_int8(q, scales, w);
    case OpId::quantize_blockwise_fp8:
      return quantize_blockwise_fp8(q, scales, w);
    default:
      return invalid_argument(std::string(op_info(op).name) + " is not a quantizer");
  }
}

CaseResult run_quantize_case_cuda(const QuantizeCase& c, int device) {
  CaseResult r;
  if (device >= 0 && !(r.status = need_device()).ok()) return r;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.rows * 131 + c.k));
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const detail::ScaleSpan span = detail::scale_span(c.op);
  const int64_t ws = c.k + c.pad, block = kQuantBlockSize;
  const int64_t block_rows = (c.rows + block - 1) / block, block_cols = (c.k + block - 1) / block;
  const bool zero_block = span == detail::ScaleSpan::block && block_rows * block_cols > 1;
  HostBuffer w(c.dtype, std::max<int64_t>(1, c.rows * ws));
  for (int64_t i = 0; i < w.size(); ++i) {
    const int64_t row = i / ws, col = i % ws;
    const bool zero = zero_block ? row < block && col < block : row == 0;
    w.set(i, zero ? 0.0 : row == 1 && col % 7 == 0 ? 1e-4 * u(rng) : u(rng));
  }
  const bool int4 = c.op == OpId::quantize_int4_groupwise, fp8 = op_fp8_dtype(c.op).has_value();
  const int64_t qcols = int4 ? c.k / 2 : c.k;
  // The scales' shape: [rows], [rows, k / group] or [k / group, scales_ld] (column major), [1], or the blocks' (rows
  // scales_ld apart when given).
  int64_t s_rows = c.rows, s_cols = 1, s_ld = 1;
  if (span == detail::ScaleSpan::group && c.scales_ld > 0)
    s_rows = c.k / c.group, s_cols = c.rows, s_ld = c.scales_ld;
  else if (span == detail::ScaleSpan::group)
    s_cols = s_ld = c.k / c.group;
  else if (span == detail::ScaleSpan::tensor)
    s_rows = 1;
  else if (span == detail::ScaleSpan::block)
    s_rows = block_rows, s_cols = block_cols, s_ld = c.scales_ld > 0 ? c.scales_ld : block_cols;
  HostBuffer q(int4 ? DType::i4x2 : op_fp8_dtype(c.op).value_or(DType::i8), c.rows * qcols),
      s(DType::f32, std::max<int64_t>(1, (s_rows - 1) * s_ld + s_cols));
  if (c.static_scale) s.set(0, 1.5 / detail::code_max(fp8));
  const auto call = [&](const std::vector<void*>& p, Device d) {
    void *wp = p[0], *qp = p[1], *sp = p[2];
    const TensorView wv = TensorView::strided(wp, c.dtype, {c.rows, c.k}, {ws, 1}, d);
    const TensorView qv = TensorView::contiguous(qp, q.dtype(), {c.rows, qcols}, d);
    const TensorView sv = span == detail::ScaleSpan::row || span == detail::ScaleSpan::tensor
                              ? TensorView::contiguous(sp, DType::f32, {s_rows}, d)
                              : TensorView::strided(sp, DType::f32, {s_rows, s_cols}, {s_ld, 1}, d);
    return call_quantizer(c.op, qv, sv, wv, c.group, c.static_scale,
                          span == detail::ScaleSpan::group && c.scales_ld > 0);
  };
  HostBuffer q_want = q, s_want = s, q_got = q, s_got = s;
  const Role s_role = c.static_scale ? Role::in : Role::out;
  if (!c.static_scale) s_want.poison();  // as the op under test's: a layout's padding compares equal when untouched
  if (r.status = run_reference({{&w, Role::in}, {&q_want, Role::out}, {&s_want, s_role}}, call); !r.status.ok())
    return r;
  if (r.status = run_under_test({{&w, Role::in}, {&q_got, Role::out}, {&s_got, s_role}}, call, device); !r.status.ok())
    return r;
  const auto* qg = static_cast<const uint8_t*>(q_got.data());
  const auto* qw = static_cast<const uint8_t*>(q_want.data());
  for (int64_t i = 0; i < static_cast<int64_t>(q.bytes()); ++i) {
    ++r.checked;
    if (qg[i] != qw[i]) {
      std::ostringstream os;
      os << "q byte " << i << " (row " << i / qcols << "): got 0x" << std::hex << int{qg[i]} << ", want 0x"
         << int{qw[i]};
      note_mismatch(&r, os.str());
    }
  }
  for (int64_t i = 0; i < s.size(); ++i) {
    ++r.checked;
    const float g = static_cast<const float*>(s_got.data())[i], want = static_cast<const float*>(s_want.data())[i];
    if (std::memcmp(&g, &want, sizeof(float)) != 0) {
      std::ostringstream os;
      os << "scale " << i << ": got " << g << ", want " << want;
      note_mismatch(&r, os.str());
    }
  }
  return r;
}

float static_quant_scale(OpId op) { return 3.0f / static_cast<float>(detail::code_max(op_fp8_dtype(op).has_value())); }

void compare_quantized(const HostBuffer& q_got, const HostBuffer& s_got, const HostBuffer& q_want,
                       const HostBuffer& s_want, int64_t rows, int64_t hidden, DType dtype, bool static_scale,
                       CaseResult* r) {
  const Tolerance tol = tolerance(dtype);
  const bool fp8 = q_want.dtype() == DType::f8e4m3;
  const double qmax = detail::code_max(fp8);
  // The distance from code value v to its neighbours: 1 (int8), or e4m3's spacing at |v| (2^-9 below 2^-6).
  auto step = [&](double v) { return fp8 ? e4m3_spacing(v) : 1.0; };
  for (int64_t row = 0; row < rows; ++row) {
    const double sg = s_got.get(static_scale ? 0 : row), sw = s_want.get(static_scale ? 0 : row);
    if (!static_scale) {
      // s = max |y| / qmax (fp32): the max moves by the norm's tolerance at most.
      check_element(r, "scales", sg, sw, (tol.atol + tol.rtol * sw * qmax) / qmax * (1 + 1e-6), row, 0);
    }
    for (int64_t i = 0; i < hidden; ++i) {
      const double qg = q_got.get(row * hidden + i), qw = q_want.get(row * hidden + i);
      const double dg = qg * sg, dw = qw * sw;
      const double half_steps = 0.5 * (step(qg) * sg + step(qw) * sw);
      const double allowed = half_steps + tol.atol + tol.rtol * (std::fabs(dw) + 0.5 * step(qw) * sw);
      check_element(r, "q * s", std::isfinite(qg) ? dg : qg, dw, allowed * (1 + 1e-6), row, i);
    }
  }
}

void check_quantized_composition(const HostBuffer& y, int64_t rows, int64_t hidden, int64_t stride, const HostBuffer& q,
                                 const HostBuffer& scales, bool static_scale, float static_value, CaseResult* r) {
  const bool fp8 = q.dtype() == DType::f8e4m3;
  HostBuffer want_q(q.dtype(), rows * hidden), want_s(DType::f32, rows);
  if (static_scale) {
    if (scales.get(0) != static_value) note_mismatch(r, "the static scale was written");
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t i = 0; i < hidden; ++i) {
        const float v = static_cast<float>(y.get(row * stride + i)) / static_value;
        want_q.set(row * hidden + i, fp8 ? e4m3_bits_to_float(float_to_e4m3_bits(v, true))
                                         : std::clamp(std::nearbyint(static_cast<double>(v)), -127.0, 127.0));
      }
  } else {
    const TensorView yv = TensorView::strided(const_cast<void*>(y.data()), y.dtype(), {rows, hidden}, {stride, 1});
    const TensorView qv = TensorView::contiguous(want_q.data(), q.dtype(), {rows, hidden});
    const TensorView sv = TensorView::contiguous(want_s.data(), DType::f32, {rows});
    r->status = fp8 ? quantize_per_token_fp8(qv, sv, yv) : quantize_per_token_int8(qv, sv, yv);
    if (!r->status.ok()) return;
    compare_outputs("scales", scales, want_s, 1, rows, rows, r, 0.0);
  }
  compare_outputs("q", q, want_q, rows, hidden, hidden, r, 0.0);
}

void verify_quant_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed, std::vector<VerifyCase>* out) {
  // The CPU backend runs the same cases with the CPU backend as the op under test (device -1), on the small shapes
  // only (its reference is m n k fp64 multiply-adds).
  const int device = grid.cuda ? grid.device : -1;
  const bool small = grid.quick || !grid.cuda;
  if (op == OpId::linear_w8a8 || op == OpId::linear_fp8) {
    // FP8: n a multiple of 8 (cuBLASLt wants out's rows 16-byte aligned), per-tensor scales at m 300, out += at m 17.
    const bool fp8 = op == OpId::linear_fp8;
    for (int64_t m : {1, 17, 300})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{fp8 ? 8 : 7, 80}, {fp8 ? 1032 : 1031, 2048}}) {
        if (small && (m == 300 || n > 8)) continue;
        W8A8Case c{dtype, m, n, k, m != 17, m == 17 ? 16 : 0, (*seed)++, op, fp8 && m == 300};
        c.accumulate = fp8 && m == 17;
        out->push_back({c.name(), [c, device] { return run_w8a8_case(c, device); }, c.work()});
      }
  } else if (op == OpId::linear_fp8_blockwise) {
    // Two k blocks and a partial last n block (136 = 128 + 8); a decoder-sized layer whose k / 128 pads its weight
    // scales' rows (4160 = 32 blocks + 64, k 1152: 9 blocks, rows of 12); out += at m 17.
    for (int64_t m : {1, 17, 300})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{136, 256}, {4160, 1152}}) {
        if (small && (m == 300 || n > 136)) continue;
        W8A8Case c{dtype, m, n, k, m != 17, m == 17 ? 16 : 0, (*seed)++, op};
        c.accumulate = m == 17;
        out->push_back({c.name(), [c, device] { return run_w8a8_case(c, device); }, c.work()});
      }
  } else if (op == OpId::linear_w8a16 || op == OpId::linear_w4a16) {
    // The quantizers' forms, and the checkpoints' (GPTQ / AWQ: groups of 32, INT8 groups, zero points) on the GEMV
    // and the first tensor-core m at the large shape.
    const int bits = op_weight_bits(op);
    // GPTQ act-order (a permutation of k): i32 indices at INT4, i64 at INT8.
    struct Form {
      int group;
      bool zeros, checkpoint;
      DType perm = DType::f32;
    };
    const std::vector<Form> forms =
        bits == 8
            ? std::vector<Form>{{0, false, false}, {32, false, true}, {128, true, true}, {128, true, true, DType::i64}}
            : std::vector<Form>{{64, false, false},
                                {128, false, false},
                                {32, false, true},
                                {128, true, true},
                                {128, true, true, DType::i32}};
    for (const Form f : forms)
      for (int64_t m : {1, 3, 8, 64})
        for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 640}, {1031, 2048}}) {
          if (small && (m == 64 || n > 7)) continue;
          if (f.checkpoint && n > 7 && m > 3) continue;
          WeightOnlyCase c{dtype, bits, f.group, m, layout_rows(bits, n), k, m != 3, m == 3 ? 8 : 0, (*seed)++};
          c.zeros = f.zeros;
          c.perm = f.perm;
          out->push_back({c.name(), [c, device] { return run_weight_only_case_cuda(c, device); }, c.work()});
        }
  } else {  // the quantizers, bit for bit
    // Per tensor: static at 7 rows; per-token-group: groups of 64 at 7 rows and column-major scales (ld rounded up
    // to 4) at 83; blocks: k with a partial last block, at 83 rows with the scales' rows padded as linear_fp8 reads
    // them.
    const detail::ScaleSpan span = detail::scale_span(op);
    for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{83}})
      for (int64_t k : {int64_t{256}, int64_t{4096}}) {
        if (small && k > 256) continue;
        QuantizeCase c{op, dtype, rows, k, 0, rows == 7 ? 8 : 0, (*seed)++};
        if (op == OpId::quantize_int4_groupwise) c.rows = layout_rows(4, rows);
        if (span == detail::ScaleSpan::group) c.group = op != OpId::quantize_int4_groupwise && rows == 7 ? 64 : 128;
        if (span == detail::ScaleSpan::group && op != OpId::quantize_int4_groupwise && rows == 83) c.scales_ld = 84;
        if (span == detail::ScaleSpan::tensor) c.static_scale = rows == 7;
        if (span == detail::ScaleSpan::block) c.k = k + 44;
        if (span == detail::ScaleSpan::block && rows == 83) c.scales_ld = fp8_block_scales_ld(c.k);
        out->push_back({c.name(), [c, device] { return run_quantize_case_cuda(c, device); }});
      }
  }
}

}  // namespace kernelkit::testing
