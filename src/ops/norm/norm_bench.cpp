// The norm family's benchmark (bench.hpp): rotating buffer sets of x and out (x and residual for the fused ops; q and
// per-token scales for norm + quantization), the output of sampled rows checked against the CPU reference, then the
// timing.
#include "ops/norm/norm_bench.hpp"

#include <algorithm>
#include <functional>

#include "ops/quant/quant_cases.hpp"

namespace kernelkit::testing {

#ifndef KERNELKIT_HAS_CUDA
Status NormWorkload::init(OpId, DType, const BenchShape&, int, int) { return need_device(); }
Status NormWorkload::refill(Stream) { return need_device(); }
#else

Status NormWorkload::init(OpId op, DType dt, const BenchShape& shape, int sets, int device) {
  KK_RETURN_IF_ERROR(set_bench_device(device));
  const bool fused = adds_residual(op), ada = op == OpId::ada_layer_norm;
  const auto qtype = op_quant_out_dtype(op);
  const int64_t n = shape.rows * shape.hidden, H = shape.hidden, B = ada ? shape.batch : 1;
  const size_t e = dtype_size(dt);
  dtype_ = dt;
  const Device dev = Device::cuda(device);
  auto alloc = [&](size_t elems, size_t elem_bytes = 0) -> void* {
    buffers_.emplace_back();
    Status s = buffers_.back().alloc(std::max<size_t>(elems * (elem_bytes ? elem_bytes : e), 16));
    if (!s.ok() && status_.ok()) status_ = s;
    return buffers_.back().data();
  };
  buffers_.reserve(static_cast<size_t>(4 + 4 * sets));
  void* w = alloc(static_cast<size_t>(H));
  void* b = alloc(static_cast<size_t>(H));
  void* sc = alloc(static_cast<size_t>(B * H));
  void* sh = alloc(static_cast<size_t>(B * H));
  views_.assign(static_cast<size_t>(sets), NormTensors{});
  for (auto& v : views_) {
    auto act = [&](void* p) {
      if (ada) return TensorView::contiguous(p, dt, {B, shape.rows / B, H}, dev);
      return TensorView::contiguous(p, dt, {shape.rows, H}, dev);
    };
    void* x = alloc(static_cast<size_t>(n));
    // out, or the residual for the fused ops (fused_add_rms_norm writes x in place, its quantizing twin q)
    void* o = alloc(static_cast<size_t>(n));
    v.x = act(x);
    v.out = act(o);
    v.residual = act(o);
    if (qtype) {
      v.q = TensorView::contiguous(alloc(static_cast<size_t>(n), 1), *qtype, {shape.rows, H}, dev);
      v.q_scales = TensorView::contiguous(alloc(static_cast<size_t>(shape.rows), 4), DType::f32, {shape.rows}, dev);
    }
    v.weight = TensorView::contiguous(w, dt, {H}, dev);
    if (op == OpId::layer_norm || ada) v.bias = TensorView::contiguous(b, dt, {H}, dev);
    v.scale = TensorView::contiguous(sc, dt, {B, H}, dev);
    v.shift = TensorView::contiguous(sh, dt, {B, H}, dev);
    rotated_.push_back({x, n});
    if (fused) rotated_.push_back({o, n});
  }
  if (!status_.ok())
    return Status(status_.code(), "allocating " + std::to_string(sets) + " buffer sets: " + status_.message());
  for (Status s : {fill_uniform(w, dt, H, 0.5, 1.5, 1, nullptr), fill_uniform(b, dt, H, -0.5, 0.5, 2, nullptr),
                   fill_uniform(sc, dt, B * H, -0.5, 0.5, 3, nullptr),
                   fill_uniform(sh, dt, B * H, -0.5, 0.5, 4, nullptr), refill(nullptr)})
    KK_RETURN_IF_ERROR(s);
  return device_synchronize();
}

Status NormWorkload::refill(Stream stream) {
  uint64_t seed = 11;
  for (auto [p, count] : rotated_) KK_RETURN_IF_ERROR(fill_uniform(p, dtype_, count, -0.7, 1.3, seed++, stream));
  return Status::Ok();
}

BenchResult bench_norm(const DeviceProfile& prof, OpId op, DType dt, const BenchShape& shape, int runs, int device,
                       double peak_gbps) {
  BenchResult r = bench_result(op, shape, dt);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return r;
  };
  const bool fused = adds_residual(op), ada = op == OpId::ada_layer_norm;
  const auto qtype = op_quant_out_dtype(op);
  const int64_t n = shape.rows * shape.hidden, H = shape.hidden, B = ada ? shape.batch : 1;
  const size_t e = dtype_size(dt);
  // x and out (fused: x and residual) per set; norm + quantization: and q
  size_sets(prof, static_cast<uint64_t>(n) * (2 * e + (qtype ? 1 : 0)), &r);

  NormWorkload wl;
  if (Status s = wl.init(op, dt, shape, r.sets, device); !s.ok()) return fail(s);
  const auto& views = wl.views();
  auto refill = [&](Stream s) { return wl.refill(s); };

  // ---- Verify set 0 on sampled rows against the CPU reference before any timing.
  const std::vector<int64_t> rows = sample_rows(shape.rows);
  const int64_t k = static_cast<int64_t>(rows.size());
  HostBuffer hx(dt, k * H), hr(dt, k * H), hw(dt, H), hb(dt, H), hsc(dt, k * H), hsh(dt, k * H), hout(dt, k * H);
  const DType qdt = qtype.value_or(DType::i8);
  HostBuffer got_q(qdt, k * H), got_s(DType::f32, k), want_q(qdt, k * H), want_s(DType::f32, k);
  const int64_t seq = ada ? shape.rows / B : shape.rows;  // every row of a non-ada op maps to batch 0
  std::vector<int64_t> batch_rows;
  for (int64_t row : rows) batch_rows.push_back(row / seq);
  for (Status s : {download_rows(&hx, views[0].x.data, rows, H, dt),
                   fused ? download_rows(&hr, views[0].residual.data, rows, H, dt) : Status::Ok(),
                   download_rows(&hw, views[0].weight->data, {0}, H, dt),
                   views[0].bias ? download_rows(&hb, views[0].bias->data, {0}, H, dt) : Status::Ok(),
                   download_rows(&hsc, views[0].scale.data, batch_rows, H, dt),
                   download_rows(&hsh, views[0].shift.data, batch_rows, H, dt)})
    if (!s.ok()) return fail(s);
  if (Status s = call_norm_op(op, views[0], 1e-6f); !s.ok()) return fail(s);
  {
    HostBuffer got_x(dt, k * H), got_r(dt, k * H);
    Status s = device_synchronize();
    if (s.ok() && qtype) {
      s = download_rows(&got_q, views[0].q.data, rows, H, qdt);
      if (s.ok()) s = download_rows(&got_s, views[0].q_scales.data, rows, 1, DType::f32);
    } else if (s.ok()) {
      s = download_rows(fused ? &got_x : &hout, fused ? views[0].x.data : views[0].out.data, rows, H, dt);
    }
    if (s.ok() && fused) s = download_rows(&got_r, views[0].residual.data, rows, H, dt);
    if (!s.ok()) return fail(s);
    // The reference on the same rows: ada rows become [k, 1, H] with their batch's scale/shift gathered.
    HostBuffer want_out(dt, k * H);
    NormTensors hv;
    auto act = [&](void* p) {
      if (ada) return TensorView::contiguous(p, dt, {k, 1, H});
      return TensorView::contiguous(p, dt, {k, H});
    };
    hv.x = act(hx.data());
    hv.out = act(want_out.data());
    hv.residual = act(hr.data());
    hv.weight = TensorView::contiguous(hw.data(), dt, {H});
    if (views[0].bias) hv.bias = TensorView::contiguous(hb.data(), dt, {H});
    hv.scale = TensorView::contiguous(hsc.data(), dt, {k, H});
    hv.shift = TensorView::contiguous(hsh.data(), dt, {k, H});
    hv.q = TensorView::contiguous(want_q.data(), qdt, {k, H});
    hv.q_scales = TensorView::contiguous(want_s.data(), DType::f32, {k});
    if (Status rs = call_norm_op(op, hv, 1e-6f); !rs.ok()) return fail(rs);
    CaseResult cmp;
    if (qtype) {
      if (fused) compare_outputs("residual", got_r, hr, k, H, H, &cmp);
      compare_quantized(got_q, got_s, want_q, want_s, k, H, dt, false, &cmp);
    } else if (fused) {
      compare_outputs("x", got_x, hx, k, H, H, &cmp);  // the reference overwrote hx in place
      compare_outputs("residual", got_r, hr, k, H, H, &cmp);
    } else {
      compare_outputs("out", hout, want_out, k, H, H, &cmp);
    }
    if (Status s = record_verification(cmp, k, &r); !s.ok()) return fail(s);
  }
  if (Status s = refill(nullptr); !s.ok()) return fail(s);
  if (Status s = device_synchronize(); !s.ok()) return fail(s);  // the timing streams do not wait on the default one

  // ---- Time (in-place ops drift as they re-run: the residual grows each call, so refresh the inputs).
  auto launch = [&](int i, Stream s) {
    return call_norm_op(op, views[static_cast<size_t>(i % r.sets)], 1e-6f, 0.0f, s);
  };
  RefreshFn refresh;
  if (fused) refresh = [&](Stream s) { return refill(s); };
  if (Status s = time_launches(launch, refresh, runs, &r); !s.ok()) return fail(s);
  finish_timing(peak_gbps, &r);
  return r;
}

#endif

}  // namespace kernelkit::testing
