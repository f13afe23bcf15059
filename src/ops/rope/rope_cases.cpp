// The RoPE family's cases (rope_cases.hpp).
#include "ops/rope/rope_cases.hpp"

#include <cmath>
#include <random>
#include <sstream>

namespace kernelkit::testing {

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
  RopeData inputs = make_rope_inputs(c);
  inputs.out = inputs.qkv;  // out of place: everything but the q / k heads keeps the input values in the reference
  return run_case(
      inputs, device,
      [&](RopeData& d) {
        return std::vector<CaseBuffer>{{&d.qkv, c.in_place ? Role::inout : Role::in},
                                       {&d.out, c.in_place ? Role::in : Role::out},
                                       {&d.pos, Role::in},
                                       {&d.cache, Role::in}};
      },
      [&](const RopeData& d, const std::vector<void*>& p, Device dev) {
        return call_rope(c, d, p[0], p[1], p[2], p[3], dev);
      },
      [&](const RopeData& got, const RopeData& want, CaseResult* r) {
        // q and k heads of every token (v is not written: out of place it stays poisoned, so it is not compared).
        const int64_t qk = (c.heads + c.kv_heads) * c.head_dim;
        compare_outputs("qk", c.in_place ? got.qkv : got.out, c.in_place ? want.qkv : want.out, c.tokens, qk,
                        got.width, r);
      });
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
  auto fail = [&](const std::string& what) { note_mismatch(&r, what); };
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
    compare_outputs(full ? "full-width tables" : "half-width tables", out2, result, c.tokens, nh * c.head_dim,
                    d.width, &r, 0.0);
  }
  return r;
}

void verify_rope_cases(OpId, DType dtype, const VerifyGrid& grid, uint64_t* seed, std::vector<VerifyCase>* out) {
  // Styles x (head_dim, rot_dim) x in place x tokens.
  constexpr int64_t kDims[][2] = {{64, 64}, {128, 128}, {128, 64}, {96, 24}};
  for (RopeStyle style : {RopeStyle::neox, RopeStyle::gptj})
    for (const auto& dims : kDims)
      for (bool in_place : {false, true})
        for (int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{83}}) {
          const RopeCase c{dtype, tokens, 8, 2, dims[0], dims[1], style, in_place, (*seed)++};
          out->push_back({c.name(), [c, grid] {
                            return grid.cuda ? run_rope_case_cuda(c, grid.device) : check_rope_properties(c);
                          }});
        }
}

RopeCase random_rope_case(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 19);
  auto between = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  RopeCase c;
  c.dtype = random_float_dtype(rng);
  c.tokens = between(0, 3) == 0 ? between(1000, 2000) : between(1, 90);
  c.kv_heads = between(1, 4);
  c.heads = c.kv_heads * between(1, 4);
  c.head_dim = 2 * between(1, 128);
  c.rot_dim = 2 * between(1, c.head_dim / 2);
  c.style = between(0, 1) ? RopeStyle::neox : RopeStyle::gptj;
  c.in_place = between(0, 1) == 1;
  c.seed = seed;
  return c;
}

}  // namespace kernelkit::testing
