// The activation family's benchmark (bench.hpp): the streaming harness for the element-wise ops; the gated activation
// + quantization writes q and per-token scales instead of out, so it has its own buffers, with the same check of
// sampled rows against the CPU reference before the timing.
#include "ops/activation/activation_bench.hpp"

#include "ops/activation/activation_cases.hpp"
#include "ops/quant/quant_cases.hpp"

namespace kernelkit::testing {
namespace {

BenchResult bench_activation_quant(const DeviceProfile& prof, OpId op, DType dt, const BenchShape& shape, int runs,
                                   int device, double peak_gbps) {
  BenchResult r = bench_result(op, shape, dt);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return r;
  };
  if (Status s = set_bench_device(device); !s.ok()) return fail(s);
  const DType qdt = *op_quant_out_dtype(op);
  const int64_t d = shape.hidden, rows = shape.rows;
  const size_t e = dtype_size(dt);
  size_sets(prof, r.bytes, &r);
  std::vector<DeviceBuffer> x(static_cast<size_t>(r.sets)), q(static_cast<size_t>(r.sets)),
      scales(static_cast<size_t>(r.sets));
  for (int i = 0; i < r.sets; ++i)
    for (Status s : {x[i].alloc(rows * 2 * d * e), q[i].alloc(rows * d), scales[i].alloc(rows * 4),
                     fill_uniform(x[i].data(), dt, rows * 2 * d, -4, 4, 100 + i, nullptr)})
      if (!s.ok()) return fail(s);
  const Device dev = Device::cuda(device);
  auto launch = [&](int i, Stream st) {
    const int k = i % r.sets;
    return silu_and_mul_quant(TensorView::contiguous(q[k].data(), qdt, {rows, d}, dev),
                              TensorView::contiguous(scales[k].data(), DType::f32, {rows}, dev),
                              TensorView::contiguous(x[k].data(), dt, {rows, 2 * d}, dev), false, st);
  };
  if (Status s = launch(0, nullptr); !s.ok()) return fail(s);
  if (Status s = device_synchronize(); !s.ok()) return fail(s);
  const std::vector<int64_t> sample = sample_rows(rows);
  const int64_t k = static_cast<int64_t>(sample.size());
  HostBuffer hx(dt, k * 2 * d), got_q(qdt, k * d), got_s(DType::f32, k), want_q(qdt, k * d), want_s(DType::f32, k);
  for (Status s :
       {download_rows(&hx, x[0].data(), sample, 2 * d, dt), download_rows(&got_q, q[0].data(), sample, d, qdt),
        download_rows(&got_s, scales[0].data(), sample, 1, DType::f32)})
    if (!s.ok()) return fail(s);
  if (Status s = silu_and_mul_quant(TensorView::contiguous(want_q.data(), qdt, {k, d}),
                                    TensorView::contiguous(want_s.data(), DType::f32, {k}),
                                    TensorView::contiguous(hx.data(), dt, {k, 2 * d}));
      !s.ok())
    return fail(s);
  CaseResult cmp;
  compare_quantized(got_q, got_s, want_q, want_s, k, d, dt, false, &cmp);
  if (Status s = record_verification(cmp, k, &r); !s.ok()) return fail(s);
  if (Status s = time_launches(launch, nullptr, runs, &r); !s.ok()) return fail(s);
  finish_timing(peak_gbps, &r);
  return r;
}

}  // namespace

BenchResult bench_activation(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                             int device, double peak_gbps) {
  if (op_quant_out_dtype(op)) return bench_activation_quant(profile, op, dtype, shape, runs, device, peak_gbps);
  StreamingOp sop;
  sop.two_tensors = op == OpId::geglu;
  sop.in_width_multiple = op_info(op).row_tensors_read == 2 && !sop.two_tensors ? 2 : 1;  // gated: [rows, 2d]
  sop.run = [op](const TensorView& out, const TensorView& x, const TensorView* b, Stream stream) {
    return call_activation_op(op, out, x, b, stream);
  };
  sop.reference = [op](const TensorView& out, const TensorView& x, const TensorView* b, const std::vector<int64_t>&) {
    return call_activation_op(op, out, x, b);
  };
  return bench_streaming(profile, op, dtype, shape, runs, device, peak_gbps, sop);
}

}  // namespace kernelkit::testing
