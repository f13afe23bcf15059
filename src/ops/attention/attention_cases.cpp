// Attention cases of the test harness: random inputs in the case's layout, the op on CUDA and on the CPU reference
// from identical inputs, outputs poisoned first, every element of out and lse compared.
//
// Tolerance of out (derived, not tuned): the kernel rounds P to the dtype for the P V product (relative error <= u =
// rtol / 2 per term) and rounds the output once; the reference rounds its exact value once. So
// |got - want| <= u |o| (reference rounding) + u |o| (kernel rounding) + u sum_j p_j |v_j| / l (P rounding)
//              =  rtol (|want| + m / 2),   m = sum_j p_j |v_j| / l = the reference run on |v|,
// which is the table's bound atol + rtol * max(|want|, magnitude) with magnitude = |want| + m / 2.
// lse (f32): rtol 1e-5 of |lse| + log(s_k) + 1, the size of its two terms max and log(sum) (the sum of up to s_k fp32
// exponentials carries a relative error of a few ulp times its length).
// attention with e4m3 k / v on CUDA adds one rounding of each dequantized value x = code * scale to T: |error| <=
// u |x| + eta (eta: half T's smallest subnormal). V's moves out by at most sum_j p_j (u |v_j| + eta) / l = u m + eta.
// K's moves score j by at most E_j = scale sum_i |q_i| (u |k_ji| + eta) (a soft-cap only shrinks it), so every
// weight p_j / l by a factor within exp(+-2 E), E the row's largest over its visible keys, and out by at most
// expm1(2 E) m (sum_j |p'_j - p_j| |v_j| / l), lse by at most E. To first order in u, as above.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "ops/attention/attention_cases.hpp"

#include "kernelkit/ops/rope.hpp"

namespace kernelkit::testing {

std::string AttentionCase::name() const {
  std::ostringstream os;
  os << op_info(op).name << " " << dtype_name(dtype) << " b" << batch << " s_q " << s_q << " s_k " << s_k << " h "
     << heads << "/" << kv_heads << " d " << head_dim;
  if (causal) os << " causal";
  if (bhsd) os << " bhsd";
  if (varlen) os << " varlen";
  if (max_seqlen) os << " max_seqlen";
  if (nan_idle_kv) os << " nan_idle_kv";
  if (paged) os << " paged " << page_size;
  if (magnitude > 1) os << " |x|~" << magnitude;
  if (kv_pad) os << " kv_pad " << kv_pad;
  if (window_left >= 0) os << " window " << window_left;
  if (softcap > 0) os << " softcap " << softcap;
  if (alibi) os << (alibi == 2 ? " alibi [b, h]" : " alibi");
  if (fp8) os << (scale_per_head ? " e4m3 cache (scales per head)" : " e4m3 cache");
  return os.str();
}

namespace {

struct AttnData {
  int64_t total_q = 0, total_k = 0;  // attention: packed tokens; decode: b * s_q and the pool's rows
  int64_t capacity = 0, max_pages = 0;
  HostBuffer q, k, v, out, lse;
  HostBuffer cu_q, cu_k, lens, table;  // i32
  HostBuffer alibi;                    // f32 slopes
  HostBuffer k_scale, v_scale;         // f32: an e4m3 cache's, [1] or [h_kv]
};

struct Ptrs {
  void *q, *k, *v, *out, *lse, *cu_q, *cu_k, *lens, *table, *alibi, *k_scale, *v_scale;
};

// The buffers of a case in Ptrs order (out and lse written, the rest read).
std::vector<CaseBuffer> buffers(AttnData& d) {
  return {{&d.q, Role::in},     {&d.k, Role::in},     {&d.v, Role::in},       {&d.out, Role::out},
          {&d.lse, Role::out},  {&d.cu_q, Role::in},  {&d.cu_k, Role::in},    {&d.lens, Role::in},
          {&d.table, Role::in}, {&d.alibi, Role::in}, {&d.k_scale, Role::in}, {&d.v_scale, Role::in}};
}
Ptrs ptrs(const std::vector<void*>& p) {
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
}

// An e4m3 case's scale of KV head h (AttentionCase::fp8, KvWriteCase::fp8): base (1 + h / 4) per head, else base.
double case_scale(double base, bool per_head, int64_t h) { return per_head ? base * (1.0 + h / 4.0) : base; }
HostBuffer case_scales(double base, bool per_head, int64_t kv_heads) {
  HostBuffer b(DType::f32, per_head ? kv_heads : 1);
  for (int64_t h = 0; h < b.size(); ++h) b.set(h, case_scale(base, per_head, h));
  return b;
}

HostBuffer i32_buffer(const std::vector<int64_t>& values) {
  HostBuffer b(DType::i32, static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) b.set(static_cast<int64_t>(i), static_cast<double>(values[i]));
  return b;
}

AttnData make_attention_inputs(const AttentionCase& c) {
  AttnData d;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.s_q * 131 + c.s_k * 7 + c.head_dim));
  const int64_t h = c.heads, hk = c.kv_heads, dim = c.head_dim;
  int64_t k_rows = 0;  // rows of h_kv x d in k / v
  if (c.op == OpId::decode_attention) {
    const int64_t page = c.page_size;
    d.capacity = (c.s_k + page - 1) / page * page + page;
    d.max_pages = d.capacity / page;
    d.total_q = c.batch * c.s_q;
    k_rows = c.batch * d.capacity;
    std::vector<int64_t> lens, table(static_cast<size_t>(c.batch * d.max_pages));
    for (int64_t i = 0; i < c.batch; ++i) lens.push_back(c.s_k * (c.batch - i) / c.batch);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    d.lens = i32_buffer(lens);
    d.table = i32_buffer(table);
  } else if (c.varlen) {
    std::vector<int64_t> cq{0}, ck{0};
    for (int64_t i = 0; i < c.batch; ++i) {
      const int64_t sq = i % 2 ? c.s_q / 2 : c.s_q, sk = i % 2 ? c.s_k / 2 + 1 : c.s_k;
      cq.push_back(cq.back() + sq);
      ck.push_back(ck.back() + sk);
    }
    d.total_q = cq.back();
    k_rows = ck.back();
    d.cu_q = i32_buffer(cq);
    d.cu_k = i32_buffer(ck);
  } else {
    d.total_q = c.batch * c.s_q;
    k_rows = c.batch * (c.s_k + c.kv_pad);
  }
  d.total_k = k_rows;
  std::uniform_real_distribution<double> u(-c.magnitude, c.magnitude);
  auto fill = [&](HostBuffer& b, int64_t n) {
    b = HostBuffer(c.dtype, n);
    for (int64_t i = 0; i < n; ++i) b.set(i, u(rng));
  };
  fill(d.q, d.total_q * h * dim);
  if (c.fp8) {
    // e4m3 codes of k / s and v / s, every 61st the largest and every 67th a subnormal one (AttentionCase::fp8).
    const bool decode = c.op == OpId::decode_attention;
    d.k_scale = case_scales(0x1p-6 * (decode ? 1.25 : 1.2345), c.scale_per_head, hk);
    d.v_scale = case_scales(0x1p-6 * (decode ? 0.75 : 0.7654), c.scale_per_head, hk);
    auto codes = [&](HostBuffer& b, const HostBuffer& scales, double magnitude) {
      b = HostBuffer(DType::f8e4m3, k_rows * hk * dim);
      for (int64_t i = 0; i < b.size(); ++i) {
        const double sign = (i / 61) % 2 ? -1.0 : 1.0;
        if (i % 61 == 60)
          b.set(i, sign * kE4m3Max);
        else if (i % 67 == 66)
          b.set(i, sign * std::ldexp(static_cast<double>(1 + i % 7), -9));
        else
          b.set(i, u(rng) / c.magnitude * magnitude / scales.get(scales.size() > 1 ? (i / dim) % hk : 0));
      }
    };
    codes(d.k, d.k_scale, c.magnitude);
    codes(d.v, d.v_scale, 1.0);
    // decode: the rows past each sequence's length: NaN codes, never to be read.
    const std::vector<int64_t> table = [&] {
      std::vector<int64_t> t(static_cast<size_t>(d.table.size()));
      for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int64_t>(d.table.get(static_cast<int64_t>(i)));
      return t;
    }();
    for (int64_t b = 0; b < c.batch && decode; ++b)
      for (auto j = static_cast<int64_t>(d.lens.get(b)); j < d.capacity; ++j) {
        const int64_t row =
            c.paged ? table[static_cast<size_t>(b * d.max_pages + j / c.page_size)] * c.page_size + j % c.page_size
                    : b * d.capacity + j;
        for (int64_t i = row * hk * dim; i < (row + 1) * hk * dim; ++i) d.k.set(i, NAN), d.v.set(i, NAN);
      }
  } else {
    fill(d.k, k_rows * hk * dim);
    fill(d.v, k_rows * hk * dim);
  }
  if (c.magnitude > 1 && !c.fp8)  // large logits, ordinary values: only q and k are scaled up
    for (int64_t i = 0; i < d.v.size(); ++i) d.v.set(i, d.v.get(i) / c.magnitude);
  if (c.nan_idle_kv && c.varlen)  // the keys of sequences without queries (AttentionCase::nan_idle_kv)
    for (int64_t b = 0; b < c.batch; ++b)
      if (d.cu_q.get(b + 1) == d.cu_q.get(b))
        for (auto i = static_cast<int64_t>(d.cu_k.get(b)) * hk * dim;
             i < static_cast<int64_t>(d.cu_k.get(b + 1)) * hk * dim; ++i) {
          d.k.set(i, NAN);
          d.v.set(i, NAN);
        }
  if (c.kv_pad > 0)  // the padding rows of every sequence: never part of the op's view
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t i = (b * (c.s_k + c.kv_pad) + c.s_k) * hk * dim; i < (b + 1) * (c.s_k + c.kv_pad) * hk * dim; ++i) {
        d.k.set(i, NAN);
        d.v.set(i, NAN);
      }
  if (c.alibi) {
    const int64_t rows = c.alibi == 2 ? c.batch : 1;
    d.alibi = HostBuffer(DType::f32, rows * h);
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t i = 0; i < h; ++i)
        d.alibi.set(b * h + i, std::exp2(-8.0 * static_cast<double>(i + 1) / static_cast<double>(h)) * (1 + b));
  }
  d.out = HostBuffer(c.dtype, d.total_q * h * dim);
  d.lse = HostBuffer(DType::f32, d.total_q * h);
  return d;
}

// Calls the public op for case `c` over the buffers at `p` on `dev`.
Status call_attention(const AttentionCase& c, const AttnData& d, const Ptrs& p, Device dev) {
  const DType t = c.dtype;
  const int64_t B = c.batch, h = c.heads, hk = c.kv_heads, D = c.head_dim;
  AttentionOptions o;
  o.causal = c.causal;
  o.window_left = c.window_left;
  o.softcap = c.softcap;
  if (c.alibi)
    o.alibi_slopes = c.alibi == 2 ? TensorView::contiguous(p.alibi, DType::f32, {c.batch, c.heads}, dev)
                                  : TensorView::contiguous(p.alibi, DType::f32, {c.heads}, dev);
  if (c.op == OpId::decode_attention) {
    KvCache cache;
    const int64_t S = c.s_q;
    const DType ct = c.fp8 ? DType::f8e4m3 : t;
    if (c.paged) {
      cache.k = TensorView::contiguous(p.k, ct, {B * d.max_pages, c.page_size, hk, D}, dev);
      cache.v = TensorView::contiguous(p.v, ct, {B * d.max_pages, c.page_size, hk, D}, dev);
      cache.block_table = TensorView::contiguous(p.table, DType::i32, {B, d.max_pages}, dev);
    } else {
      cache.k = TensorView::contiguous(p.k, ct, {B, d.capacity, hk, D}, dev);
      cache.v = TensorView::contiguous(p.v, ct, {B, d.capacity, hk, D}, dev);
    }
    if (c.fp8) {
      cache.k_scale = TensorView::contiguous(p.k_scale, DType::f32, {d.k_scale.size()}, dev);
      cache.v_scale = TensorView::contiguous(p.v_scale, DType::f32, {d.v_scale.size()}, dev);
    }
    cache.seqlens_k = TensorView::contiguous(p.lens, DType::i32, {B}, dev);
    return decode_attention(TensorView::contiguous(p.out, t, {B, S, h, D}, dev),
                            TensorView::contiguous(p.lse, DType::f32, {B, h, S}, dev),
                            TensorView::contiguous(p.q, t, {B, S, h, D}, dev), cache, o);
  }
  const DType kt = c.fp8 ? DType::f8e4m3 : t;  // k and v
  if (c.fp8) {
    o.k_scale = TensorView::contiguous(p.k_scale, DType::f32, {d.k_scale.size()}, dev);
    o.v_scale = TensorView::contiguous(p.v_scale, DType::f32, {d.v_scale.size()}, dev);
  }
  if (c.varlen) {
    o.cu_seqlens_q = TensorView::contiguous(p.cu_q, DType::i32, {B + 1}, dev);
    o.cu_seqlens_k = TensorView::contiguous(p.cu_k, DType::i32, {B + 1}, dev);
    if (c.max_seqlen) {  // sequence 0 is the longest (make_attention_inputs)
      o.max_seqlen_q = c.s_q;
      o.max_seqlen_k = c.s_k;
    }
    return attention(TensorView::contiguous(p.out, t, {d.total_q, h, D}, dev),
                     TensorView::contiguous(p.lse, DType::f32, {h, d.total_q}, dev),
                     TensorView::contiguous(p.q, t, {d.total_q, h, D}, dev),
                     TensorView::contiguous(p.k, kt, {d.total_k, hk, D}, dev),
                     TensorView::contiguous(p.v, kt, {d.total_k, hk, D}, dev), o);
  }
  // [b, s, heads, d], or stored [b, heads, s, d] and seen through strides; k / v stored with `pad` rows more a
  // sequence (kv_pad) are seen through their batch stride.
  auto view = [&](void* ptr, DType dt, int64_t s, int64_t heads, int64_t pad = 0) {
    if (c.bhsd) return TensorView::strided(ptr, dt, {B, s, heads, D}, {heads * s * D, D, s * D, 1}, dev);
    if (pad) return TensorView::strided(ptr, dt, {B, s, heads, D}, {(s + pad) * heads * D, heads * D, D, 1}, dev);
    return TensorView::contiguous(ptr, dt, {B, s, heads, D}, dev);
  };
  return attention(view(p.out, t, c.s_q, h), TensorView::contiguous(p.lse, DType::f32, {B, h, c.s_q}, dev),
                   view(p.q, t, c.s_q, h), view(p.k, kt, c.s_k, hk, c.kv_pad), view(p.v, kt, c.s_k, hk, c.kv_pad), o);
}

// attention over e4m3 k / v: E of each query row (the top of the file), in out's row order and in lse's.
struct ScoreError {
  std::vector<double> out_rows, lse;
};
ScoreError kv_score_error(const AttentionCase& c, const AttnData& d) {
  const int64_t H = c.heads, HK = c.kv_heads, D = c.head_dim, group = H / HK;
  const double u = tolerance(c.dtype).rtol / 2, eta = c.dtype == DType::f16 ? 0x1p-25 : 0x1p-134;
  const double scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));  // the op's default
  ScoreError e{std::vector<double>(static_cast<size_t>(d.total_q * H)),
               std::vector<double>(static_cast<size_t>(d.total_q * H))};
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t q0 = c.varlen ? static_cast<int64_t>(d.cu_q.get(b)) : 0;
    const int64_t k0 = c.varlen ? static_cast<int64_t>(d.cu_k.get(b)) : 0;
    const int64_t s_q = c.varlen ? static_cast<int64_t>(d.cu_q.get(b + 1)) - q0 : c.s_q;
    const int64_t s_k = c.varlen ? static_cast<int64_t>(d.cu_k.get(b + 1)) - k0 : c.s_k;
    // Element offsets of (token t, head h) of q / out and of k (as call_attention lays them out).
    auto q_at = [&](int64_t t, int64_t hh) {
      if (c.varlen) return ((q0 + t) * H + hh) * D;
      return c.bhsd ? ((b * H + hh) * s_q + t) * D : ((b * s_q + t) * H + hh) * D;
    };
    auto k_at = [&](int64_t j, int64_t kh) {
      if (c.varlen) return ((k0 + j) * HK + kh) * D;
      return c.bhsd ? ((b * HK + kh) * s_k + j) * D : ((b * (s_k + c.kv_pad) + j) * HK + kh) * D;
    };
    for (int64_t kh = 0; kh < HK; ++kh) {
      const double ks = d.k_scale.get(d.k_scale.size() > 1 ? kh : 0);
      // Each key's rounding bound u |k_ji| + eta, then each query row's largest score error over its visible keys.
      std::vector<double> kb(static_cast<size_t>(s_k * D));
      for (int64_t j = 0; j < s_k; ++j)
        for (int64_t i = 0; i < D; ++i)
          kb[static_cast<size_t>(j * D + i)] = u * std::fabs(d.k.get(k_at(j, kh) + i) * ks) + eta;
      for (int64_t g = 0; g < group; ++g)
        for (int64_t t = 0; t < s_q; ++t) {
          const int64_t hh = kh * group + g, p = t + s_k - s_q;
          const int64_t hi = c.causal ? std::min(p + 1, s_k) : s_k;
          const int64_t lo = c.window_left >= 0 ? std::max<int64_t>(0, p - c.window_left) : 0;
          double worst = 0;
          for (int64_t j = lo; j < hi; ++j) {
            double sum = 0;
            for (int64_t i = 0; i < D; ++i)
              sum += std::fabs(d.q.get(q_at(t, hh) + i)) * kb[static_cast<size_t>(j * D + i)];
            worst = std::max(worst, scale * sum);
          }
          e.out_rows[static_cast<size_t>(q_at(t, hh) / D)] = worst;
          e.lse[static_cast<size_t>(c.varlen ? hh * d.total_q + q0 + t : (b * H + hh) * s_q + t)] = worst;
        }
    }
  }
  return e;
}

}  // namespace

CaseResult run_attention_case_cuda(const AttentionCase& c, int device) {
  return run_case(
      make_attention_inputs(c), device, buffers,
      [&](const AttnData& d, const std::vector<void*>& p, Device dev) { return call_attention(c, d, ptrs(p), dev); },
      [&](const AttnData& got, const AttnData& want, CaseResult* r) {
        // The reference once more on |v|: sum_j p_j |v_j| / l, the tolerance's m.
        AttnData abs_v = want;
        for (int64_t i = 0; i < abs_v.v.size(); ++i) abs_v.v.set(i, std::fabs(abs_v.v.get(i)));
        if (r->status = run_reference(buffers(abs_v), [&](const std::vector<void*>& p, Device dev) {
              return call_attention(c, abs_v, ptrs(p), dev);
            });
            !r->status.ok())
          return;
        const int64_t rows = got.total_q * c.heads;
        // attention over e4m3 k / v: its rounding to T (see the top of the file), in units of the tables' rtol.
        const bool rounded_kv = c.fp8 && c.op == OpId::attention;
        const double rtol = tolerance(c.dtype).rtol, rtol_lse = tolerance(DType::f32).rtol;
        const double eta = c.dtype == DType::f16 ? 0x1p-25 : 0x1p-134;
        const ScoreError err = rounded_kv ? kv_score_error(c, want) : ScoreError{};
        std::vector<double> mag(static_cast<size_t>(rows * c.head_dim));
        for (size_t i = 0; i < mag.size(); ++i) {
          const auto k2 = static_cast<int64_t>(i);
          const double m = abs_v.out.get(k2);
          mag[i] = std::fabs(want.out.get(k2)) + m / 2;
          if (rounded_kv)
            mag[i] += m / 2 + eta / rtol + std::expm1(2 * err.out_rows[i / static_cast<size_t>(c.head_dim)]) * m / rtol;
        }
        compare_outputs("out", got.out, want.out, rows, c.head_dim, c.head_dim, mag, r);
        std::vector<double> lse_mag(static_cast<size_t>(rows));
        const double log_sk = std::log(static_cast<double>(std::max<int64_t>(c.s_k, 1)));
        for (size_t i = 0; i < lse_mag.size(); ++i) {
          const double w = want.lse.get(static_cast<int64_t>(i));
          lse_mag[i] = (std::isfinite(w) ? std::fabs(w) : 0.0) + log_sk + 1 + (rounded_kv ? err.lse[i] / rtol_lse : 0);
        }
        compare_outputs("lse", got.lse, want.lse, 1, rows, rows, lse_mag, r);
      });
}

CaseResult check_attention_properties(const AttentionCase& c) {
  // Every output is a convex combination of visible v rows (or 0 when none is visible): within [min v, max v] over
  // all of v up to one rounding; lse is finite or -inf, never NaN or +inf.
  CaseResult r;
  AttnData d = make_attention_inputs(c);
  r.status = call_attention(c, d, ptrs(buffer_data(buffers(d))), Device::cpu());
  if (!r.status.ok()) return r;
  double vmin = INFINITY, vmax = -INFINITY;  // over every value (an e4m3 cache's dequantized; its NaN rows skipped)
  for (int64_t i = 0; i < d.v.size(); ++i) {
    const double x =
        c.fp8 ? d.v.get(i) * d.v_scale.get(d.v_scale.size() > 1 ? (i / c.head_dim) % c.kv_heads : 0) : d.v.get(i);
    if (!std::isnan(x)) vmin = std::min(vmin, x), vmax = std::max(vmax, x);
  }
  const double slack = tolerance(c.dtype).rtol * std::max(std::fabs(vmin), std::fabs(vmax));
  const int64_t rows = d.total_q * c.heads;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t x = 0; x < c.head_dim; ++x) {
      const double y = d.out.get(row * c.head_dim + x);
      ++r.checked;
      if (!(y >= vmin - slack && y <= vmax + slack)) {
        ++r.mismatches;
        if (r.detail.size() < 400) r.detail += "  out row " + std::to_string(row) + " outside [min v, max v]\n";
      }
    }
  }
  for (int64_t i = 0; i < d.lse.size(); ++i) {
    const double l = d.lse.get(i);
    if (std::isnan(l) || l == INFINITY) {
      ++r.mismatches;
      if (r.detail.size() < 400) r.detail += "  lse " + std::to_string(i) + " is " + std::to_string(l) + "\n";
    }
  }
  return r;
}

std::string KvWriteCase::name() const {
  std::ostringstream os;
  os << "write_kv_cache " << dtype_name(dtype) << " tokens " << tokens << " h " << heads << "/" << kv_heads << " d "
     << head_dim << " cache [" << blocks << ", " << block << "]";
  if (!slots_i64) os << " i32 slots";
  if (rope)
    os << " rope " << (rope == 1 ? "neox " : "gptj ") << (rot_dim ? rot_dim : head_dim) << (q_in_place ? "" : " q_out");
  if (fp8) os << (scale_per_head ? " e4m3 (scales per head)" : " e4m3");
  return os.str();
}

namespace {

constexpr int64_t kKvCaseMaxPosition = 4096;

struct KvData {
  HostBuffer k, v, k_cache, v_cache, slots, q, q_out, positions, table, k_scale, v_scale;
};

std::vector<CaseBuffer> kv_buffers(KvData& d, bool q_in_place) {
  return {{&d.k, Role::in},          {&d.v, Role::in},         {&d.k_cache, Role::inout},
          {&d.v_cache, Role::inout}, {&d.slots, Role::in},     {&d.q, q_in_place ? Role::inout : Role::in},
          {&d.q_out, Role::out},     {&d.positions, Role::in}, {&d.table, Role::in},
          {&d.k_scale, Role::in},    {&d.v_scale, Role::in}};
}

KvData make_kv_inputs(const KvWriteCase& c) {
  KvData d;
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c.tokens * 31 + c.head_dim));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto fill = [&](HostBuffer& b, int64_t n) {
    b = HostBuffer(c.dtype, n);
    for (int64_t i = 0; i < n; ++i) b.set(i, u(rng));
  };
  const int64_t row = c.kv_heads * c.head_dim;
  fill(d.k, c.tokens * row);
  fill(d.v, c.tokens * row);
  fill(d.k_cache, c.blocks * c.block * row);
  fill(d.v_cache, c.blocks * c.block * row);
  if (c.fp8) {  // magnitudes 2^-20 .. 2, either sign; e4m3 caches of codes in [-1, 1] (KvWriteCase::fp8)
    std::uniform_real_distribution<double> e(-20.0, 1.0);
    for (HostBuffer* b : {&d.k, &d.v})
      for (int64_t i = 0; i < b->size(); ++i) b->set(i, std::copysign(std::exp2(e(rng)), u(rng)));
    for (HostBuffer* b : {&d.k_cache, &d.v_cache}) {
      HostBuffer codes(DType::f8e4m3, b->size());
      for (int64_t i = 0; i < b->size(); ++i) codes.set(i, b->get(i));
      *b = codes;
    }
    d.k_scale = case_scales(0x1p-8 * 1.25, c.scale_per_head, c.kv_heads);
    d.v_scale = case_scales(0x1p-8 * 0.75, c.scale_per_head, c.kv_heads);
  }
  std::vector<int64_t> perm(static_cast<size_t>(c.blocks * c.block));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  d.slots = HostBuffer(c.slots_i64 ? DType::i64 : DType::i32, c.tokens);
  for (int64_t t = 0; t < c.tokens; ++t)
    d.slots.set(t, t % 5 == 4 ? -1.0 : static_cast<double>(perm[static_cast<size_t>(t)]));
  if (c.rope) {
    fill(d.q, c.tokens * c.heads * c.head_dim);
    if (!c.q_in_place) d.q_out = HostBuffer(c.dtype, d.q.size());
    d.positions = HostBuffer(DType::i64, c.tokens);
    std::uniform_int_distribution<int64_t> pos(0, kKvCaseMaxPosition - 1);
    for (int64_t t = 0; t < c.tokens; ++t) d.positions.set(t, static_cast<double>(pos(rng)));
    const int64_t rot = c.rot_dim ? c.rot_dim : c.head_dim;
    d.table = HostBuffer(DType::f32, kKvCaseMaxPosition * rot);
    rope_cos_sin_table(static_cast<float*>(d.table.data()), kKvCaseMaxPosition, rot);
  }
  return d;
}

// write_kv_cache for case `c` over the buffers at `p` (kv_buffers order) on `dev`.
Status call_kv_write(const KvWriteCase& c, const std::vector<void*>& p, Device dev) {
  const DType t = c.dtype;
  const int64_t T = c.tokens, hk = c.kv_heads, D = c.head_dim;
  std::optional<KvWriteRope> rope;
  if (c.rope) {
    const TensorView q = TensorView::contiguous(p[5], t, {T, c.heads, D}, dev);
    rope = KvWriteRope{c.q_in_place ? q : TensorView::contiguous(p[6], t, {T, c.heads, D}, dev), q,
                       TensorView::contiguous(p[7], DType::i64, {T}, dev),
                       TensorView::contiguous(p[8], DType::f32, {kKvCaseMaxPosition, c.rot_dim ? c.rot_dim : D}, dev),
                       c.rope == 1 ? RopeStyle::neox : RopeStyle::gptj};
  }
  const DType ct = c.fp8 ? DType::f8e4m3 : t;
  std::optional<TensorView> k_scale, v_scale;
  if (c.fp8) {
    const int64_t n = c.scale_per_head ? hk : 1;
    k_scale = TensorView::contiguous(p[9], DType::f32, {n}, dev);
    v_scale = TensorView::contiguous(p[10], DType::f32, {n}, dev);
  }
  return write_kv_cache(
      TensorView::contiguous(p[2], ct, {c.blocks, c.block, hk, D}, dev),
      TensorView::contiguous(p[3], ct, {c.blocks, c.block, hk, D}, dev),
      TensorView::contiguous(p[0], t, {T, hk, D}, dev), TensorView::contiguous(p[1], t, {T, hk, D}, dev),
      TensorView::contiguous(p[4], c.slots_i64 ? DType::i64 : DType::i32, {T}, dev), rope, k_scale, v_scale);
}

// Every element of got against want, bit for bit (copies; 1-byte codes compared as bytes, so +0 and -0 differ).
void compare_exact(const char* label, const HostBuffer& got, const HostBuffer& want, CaseResult* r) {
  const bool bytes = dtype_size(want.dtype()) == 1;
  for (int64_t i = 0; i < want.size(); ++i) {
    ++r->checked;
    if (bytes ? static_cast<const uint8_t*>(got.data())[i] == static_cast<const uint8_t*>(want.data())[i]
              : got.get(i) == want.get(i))
      continue;
    ++r->mismatches;
    if (r->detail.size() < 400)
      r->detail += std::string("  ") + label + "[" + std::to_string(i) + "] = " + std::to_string(got.get(i)) +
                   ", want " + std::to_string(want.get(i)) + "\n";
  }
}

}  // namespace

CaseResult run_kv_write_case_cuda(const KvWriteCase& c, int device) {
  return run_case(
      make_kv_inputs(c), device, [&](KvData& d) { return kv_buffers(d, c.q_in_place); },
      [&](const KvData&, const std::vector<void*>& p, Device dev) { return call_kv_write(c, p, dev); },
      [&](const KvData& got, const KvData& want, CaseResult* r) {
        const int64_t row = c.kv_heads * c.head_dim;
        if (c.rope && c.fp8) {  // rotated k one T ulp apart at most: its code one e4m3 step
          for (int64_t i = 0; i < want.k_cache.size(); ++i) {
            const double g = got.k_cache.get(i), w = want.k_cache.get(i);
            check_element(r, "k_cache", g, w, e4m3_spacing(std::max(std::fabs(g), std::fabs(w))), i / row, i % row);
          }
        } else if (c.rope) {  // rotated: fp32 math against fp64, one rounding
          compare_outputs("k_cache", got.k_cache, want.k_cache, c.blocks * c.block, row, row, r);
          const HostBuffer& gq = c.q_in_place ? got.q : got.q_out;
          compare_outputs("q_out", gq, c.q_in_place ? want.q : want.q_out, c.tokens, c.heads * c.head_dim,
                          c.heads * c.head_dim, r);
        } else {
          compare_exact("k_cache", got.k_cache, want.k_cache, r);
        }
        compare_exact("v_cache", got.v_cache, want.v_cache, r);
      });
}

CaseResult check_kv_write_properties(const KvWriteCase& c) {
  CaseResult r;
  KvData d = make_kv_inputs(c);
  const KvData old = d;
  r.status = call_kv_write(c, buffer_data(kv_buffers(d, c.q_in_place)), Device::cpu());
  if (!r.status.ok()) return r;
  // The rows each slot must hold: k (rotated out of place by rotary_embedding on the CPU with RoPE) and v.
  HostBuffer k_want = old.k, q_want = old.q;
  if (c.rope) {
    const Device cpu = Device::cpu();
    const int64_t T = c.tokens, D = c.head_dim;
    HostBuffer q_in = old.q, k_in = old.k;
    r.status = rotary_embedding(
        TensorView::contiguous(q_want.data(), c.dtype, {T, c.heads, D}, cpu),
        TensorView::contiguous(k_want.data(), c.dtype, {T, c.kv_heads, D}, cpu),
        TensorView::contiguous(q_in.data(), c.dtype, {T, c.heads, D}, cpu),
        TensorView::contiguous(k_in.data(), c.dtype, {T, c.kv_heads, D}, cpu),
        TensorView::contiguous(d.positions.data(), DType::i64, {T}, cpu),
        TensorView::contiguous(d.table.data(), DType::f32, {kKvCaseMaxPosition, c.rot_dim ? c.rot_dim : D}, cpu),
        c.rope == 1 ? RopeStyle::neox : RopeStyle::gptj);
    if (!r.status.ok()) return r;
    compare_exact("q_out", c.q_in_place ? d.q : d.q_out, q_want, &r);
  }
  const int64_t row = c.kv_heads * c.head_dim;
  HostBuffer k_cache_want = old.k_cache, v_cache_want = old.v_cache;
  // The value x of element i of a row as the cache holds it: x, or its e4m3 code at its head's scale (by the
  // format's definition: fp32(x / s) to nearest even, saturating).
  auto code = [&](double x, const HostBuffer& scales, int64_t i) {
    if (!c.fp8) return x;
    const double s = scales.get(scales.size() > 1 ? i / c.head_dim : 0);
    return static_cast<double>(e4m3_bits_to_float(float_to_e4m3_bits(static_cast<float>(x / s), true)));
  };
  for (int64_t t = 0; t < c.tokens; ++t) {
    const auto slot = static_cast<int64_t>(d.slots.get(t));
    for (int64_t i = 0; slot >= 0 && i < row; ++i) {
      k_cache_want.set(slot * row + i, code(k_want.get(t * row + i), old.k_scale, i));
      v_cache_want.set(slot * row + i, code(old.v.get(t * row + i), old.v_scale, i));
    }
  }
  compare_exact("k_cache", d.k_cache, k_cache_want, &r);
  compare_exact("v_cache", d.v_cache, v_cache_want, &r);
  compare_exact("k", d.k, old.k, &r);  // k itself is left as it is
  return r;
}

void verify_attention_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed,
                            std::vector<VerifyCase>* out) {
  if (op == OpId::write_kv_cache) {
    // A paged and a contiguous-shaped cache, RoPE neox / gptj, partial rotary, q_out out of place, i32 slots, one
    // token (KvWriteCase's fields; dtype and seed set below).
    const KvWriteCase kvs[] = {
        {DType::f16, 37, 8, 2, 128, 8, 16, 0, 0, true, true},  {DType::f16, 21, 8, 8, 64, 2, 64, 0, 0, false, true},
        {DType::f16, 37, 8, 2, 128, 8, 16, 1, 0, true, false}, {DType::f16, 19, 4, 1, 128, 4, 32, 2, 64, true, true},
        {DType::f16, 13, 8, 2, 80, 16, 1, 1, 32, false, true}, {DType::f16, 1, 32, 8, 128, 1, 16, 1, 0, true, true}};
    for (KvWriteCase c : kvs) {
      c.dtype = dtype;
      c.seed = (*seed)++;
      out->push_back({c.name(), [c, grid] {
                        return grid.cuda ? run_kv_write_case_cuda(c, grid.device) : check_kv_write_properties(c);
                      }});
    }
    return;
  }
  // (batch, s_q, s_k, heads, kv_heads): one token, GQA 4 and 8, s_q < s_k, s_q > s_k; a long one on the GPU.
  std::vector<std::array<int64_t, 5>> shapes = {{2, 1, 1, 8, 8}, {2, 7, 7, 8, 2}, {1, 7, 127, 8, 1}, {1, 127, 33, 4, 4}};
  if (!grid.quick && grid.cuda) shapes.push_back({1, 1000, 1000, 4, 1});
  const bool decode = op == OpId::decode_attention;
  for (const auto& s : shapes)
    for (int64_t d : {int64_t{64}, int64_t{128}})
      for (bool causal : {false, true})
        for (int layout = 0; layout < 2; ++layout) {  // attention: dense / varlen; decode: contiguous / paged
          AttentionCase c;
          c.op = op;
          c.dtype = dtype;
          c.batch = s[0];
          c.s_q = decode ? std::min<int64_t>(s[1], 4) : s[1];
          c.s_k = s[2];
          c.heads = s[3];
          c.kv_heads = s[4];
          c.head_dim = d;
          c.causal = causal;
          c.varlen = !decode && layout == 1;
          c.paged = decode && layout == 1;
          c.seed = (*seed)++;
          c.max_seqlen = c.varlen && c.seed / 2 % 2 == 1;  // every other varlen case
          out->push_back({c.name(),
                          [c, grid] {
                            return grid.cuda ? run_attention_case_cuda(c, grid.device) : check_attention_properties(c);
                          },
                          static_cast<double>(c.batch * c.heads * c.s_q * c.s_k * c.head_dim)});
        }
  // Head dims between the kernels' sizes, sliding windows, soft-caps, ALiBi and page sizes other than 16 (decode:
  // paged).
  struct Extra {
    int64_t head_dim, window;
    float softcap;
    int64_t page;
    bool causal;
    int alibi;
  };
  const Extra extras[] = {{80, 16, 0.0f, 1, true, 0},
                          {40, -1, 20.0f, 32, false, 0},
                          {192, 8, 10.0f, 64, true, 0},
                          {128, -1, 0.0f, 16, true, 1},
                          {64, 32, 0.0f, 8, false, 2}};
  for (const Extra& e : extras) {
    AttentionCase c;
    c.op = op;
    c.dtype = dtype;
    c.batch = 2;
    c.s_q = decode ? 2 : 70;
    c.s_k = 130;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = e.head_dim;
    c.causal = e.causal;
    c.window_left = e.window;
    c.softcap = e.softcap;
    c.alibi = e.alibi;
    c.magnitude = e.softcap > 0 ? 4.0 : 1.0;
    c.paged = decode;
    c.page_size = e.page;
    c.seed = (*seed)++;
    out->push_back({c.name(), [c, grid] {
                      return grid.cuda ? run_attention_case_cuda(c, grid.device) : check_attention_properties(c);
                    }});
  }
}

}  // namespace kernelkit::testing
