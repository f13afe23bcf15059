// RoPE's benchmark (bench.hpp), as in a Llama attention block: q and k strided views of a fused qkv projection,
// rotated in place from a cos/sin cache at random positions.
#include "ops/rope/rope_bench.hpp"

#include <random>

#include "kernelkit/ops/rope.hpp"

namespace kernelkit::testing {
namespace {
constexpr int64_t kRopeHeadDim = 128, kRopeGqa = 4;  // the suite's Llama attention: heads of 128, 4 q heads per kv
}  // namespace

OpShape rope_bench_shape(const BenchShape& shape) {
  const int64_t heads = shape.hidden / kRopeHeadDim;
  return {shape.rows * (heads + heads / kRopeGqa), kRopeHeadDim, 1, 16};
}

#ifdef KERNELKIT_HAS_CUDA
BenchResult bench_rope(const DeviceProfile& prof, DType dt, const BenchShape& shape, int runs, int device,
                       double peak_gbps) {
  BenchResult r = bench_result(OpId::rotary_embedding, shape, dt);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return r;
  };
  const int64_t D = kRopeHeadDim, heads = shape.hidden / D, kv = heads / kRopeGqa, tokens = shape.rows;
  if (heads < kRopeGqa || shape.hidden % (D * kRopeGqa) != 0)
    return fail(invalid_argument("rotary_embedding bench: hidden must be a multiple of " +
                                 std::to_string(D * kRopeGqa) + ", got " + std::to_string(shape.hidden)));
  if (Status s = set_bench_device(device); !s.ok()) return fail(s);
  const int64_t width = (heads + 2 * kv) * D, max_pos = 8192;  // fused qkv row; positions drawn below max_pos
  const size_t e = dtype_size(dt);
  size_sets(prof, r.bytes, &r);
  // Shared positions (random, token 0 at 0) and the f32 cos/sin cache [max_pos, D]: cos in the first half.
  HostBuffer pos(DType::i64, tokens), cache(DType::f32, max_pos * D);
  std::mt19937_64 rng(5);
  for (int64_t t = 0; t < tokens; ++t) pos.set(t, t == 0 ? 0 : static_cast<int64_t>(rng() % max_pos));
  rope_cos_sin_table(static_cast<float*>(cache.data()), max_pos, D);
  DeviceBuffer dpos, dcache;
  std::vector<DeviceBuffer> qkv(static_cast<size_t>(r.sets));
  for (Status s : {dpos.alloc(pos.bytes()), dpos.upload(pos), dcache.alloc(cache.bytes()), dcache.upload(cache)})
    if (!s.ok()) return fail(s);
  for (int i = 0; i < r.sets; ++i)
    for (Status s : {qkv[i].alloc(tokens * width * e), fill_uniform(qkv[i].data(), dt, tokens * width, -2, 2, 500 + i,
                                                                   nullptr)})
      if (!s.ok()) return fail(s);
  // q [tokens, heads, D] and k [tokens, kv, D]: strided views of the fused rows, rotated in place.
  auto call = [&](void* base, const void* positions, const void* cs, int64_t n, Device where, Stream st) {
    auto* k = static_cast<char*>(base) + heads * D * static_cast<int64_t>(e);
    const TensorView q = TensorView::strided(base, dt, {n, heads, D}, {width, D, 1}, where);
    const TensorView kv_view = TensorView::strided(k, dt, {n, kv, D}, {width, D, 1}, where);
    return rotary_embedding(q, kv_view, q, kv_view,
                            TensorView::contiguous(const_cast<void*>(positions), DType::i64, {n}, where),
                            TensorView::contiguous(const_cast<void*>(cs), DType::f32, {max_pos, D}, where),
                            RopeStyle::neox, st);
  };
  const Device dev = Device::cuda(device);
  auto launch = [&](int i, Stream st) {
    return call(qkv[static_cast<size_t>(i % r.sets)].data(), dpos.data(), dcache.data(), tokens, dev, st);
  };
  // Verify on sampled tokens: their rows before and after one launch on set 0, against the CPU reference.
  const std::vector<int64_t> sample = sample_rows(tokens);
  const int64_t k = static_cast<int64_t>(sample.size());
  HostBuffer want(dt, k * width), got(dt, k * width), spos(DType::i64, k);
  for (int64_t i = 0; i < k; ++i) spos.set(i, pos.get(sample[i]));
  for (Status s : {device_synchronize(), download_rows(&want, qkv[0].data(), sample, width, dt), launch(0, nullptr),
                   device_synchronize(), download_rows(&got, qkv[0].data(), sample, width, dt),
                   call(want.data(), spos.data(), cache.data(), k, Device::cpu(), nullptr)})
    if (!s.ok()) return fail(s);
  CaseResult cmp;
  compare_outputs("qkv", got, want, k, width, width, &cmp);
  if (Status s = record_verification(cmp, k, &r); !s.ok()) return fail(s);
  if (Status s = time_launches(launch, nullptr, runs, &r); !s.ok()) return fail(s);
  finish_timing(peak_gbps, &r);
  return r;
}
#endif

}  // namespace kernelkit::testing
