#include "testing/bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "ops/activation/activation_bench.hpp"
#include "ops/norm/norm_bench.hpp"
#include "ops/rope/rope_bench.hpp"
#include "ops/softmax/softmax_bench.hpp"

#ifdef KERNELKIT_HAS_CUDA
#include <cuda_runtime_api.h>

#include "kernels/common/check.cuh"
#endif

namespace kernelkit::testing {

const char* assessment(double pct) {
  if (pct > 78) return "excellent";
  if (pct >= 62) return "good";
  if (pct >= 31) return "fair";
  return "poor";
}

OpShape bench_op_shape(OpId op, const BenchShape& shape) {
  if (op_info(op).family == OpFamily::rope) return rope_bench_shape(shape);
  return {shape.rows, shape.hidden, shape.batch, 16};
}

#ifndef KERNELKIT_HAS_CUDA
namespace {
Status no_cuda() { return Status(StatusCode::no_device, "kernelkit was built without CUDA"); }
}  // namespace
Status measure_copy_ceiling(int, uint64_t, CopyCeiling*) { return no_cuda(); }
BenchResult bench_op(const DeviceProfile&, OpId, DType, const BenchShape&, int, int, double) {
  BenchResult r;
  r.status = no_cuda();
  return r;
}
Status fill_uniform(void*, DType, int64_t, double, double, uint64_t, Stream) { return no_cuda(); }
Status measure_l2_window(int, int64_t, uint64_t, int, L2WindowResult*) { return no_cuda(); }
#else

namespace {

double median_of(std::vector<double> v, double q = 0.5) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// Owns the stream and events of one measurement.
struct Timer {
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
  ~Timer() {
    for (auto e : events) cudaEventDestroy(e);
    if (stream) cudaStreamDestroy(stream);
  }
  Status init(int pairs) {
    KK_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    events.resize(static_cast<size_t>(2 * pairs));
    for (auto& e : events) KK_CUDA_RETURN(cudaEventCreate(&e));
    return Status::Ok();
  }
  // Milliseconds between event 2i and 2i+1, for every pair.
  Status read(std::vector<double>* us) {
    KK_CUDA_RETURN(cudaStreamSynchronize(stream));
    us->clear();
    for (size_t i = 0; i + 1 < events.size(); i += 2) {
      float ms = 0;
      KK_CUDA_RETURN(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
      us->push_back(1000.0 * ms);
    }
    return Status::Ok();
  }
};

}  // namespace

Status download_rows(HostBuffer* dst, const void* src, const std::vector<int64_t>& rows, int64_t hidden, DType t) {
  const size_t row_bytes = static_cast<size_t>(hidden) * dtype_size(t);
  for (size_t i = 0; i < rows.size(); ++i)
    KK_CUDA_RETURN(cudaMemcpy(static_cast<uint8_t*>(dst->data()) + i * row_bytes,
                              static_cast<const uint8_t*>(src) + static_cast<size_t>(rows[i]) * row_bytes, row_bytes,
                              cudaMemcpyDeviceToHost));
  return Status::Ok();
}

// Up to 32 rows spread over [0, rows), first and last included: the rows checked against the reference before a timing.
std::vector<int64_t> sample_rows(int64_t rows) {
  std::vector<int64_t> out;
  const int64_t k = std::min<int64_t>(rows, 32);
  for (int64_t i = 0; i < k; ++i) out.push_back(k == 1 ? 0 : i * (rows - 1) / (k - 1));
  return out;
}

// Records the verification of `rows` sampled rows in r; a mismatch fails the case (no timing is accepted).
Status record_verification(const CaseResult& cmp, int64_t rows, BenchResult* r) {
  r->rows_checked = rows;
  if (cmp.mismatches)
    return Status(StatusCode::internal,
                  "verification failed: " + std::to_string(cmp.mismatches) + " mismatches\n" + cmp.detail);
  r->verified = true;
  return Status::Ok();
}

Status measure_copy_ceiling(int device, uint64_t bytes_each, CopyCeiling* out) {
  KK_CUDA_RETURN(cudaSetDevice(device));
  DeviceBuffer a, b;
  KK_RETURN_IF_ERROR(a.alloc(bytes_each));
  KK_RETURN_IF_ERROR(b.alloc(bytes_each));
  KK_RETURN_IF_ERROR(fill_uniform(a.data(), DType::f32, static_cast<int64_t>(bytes_each / 4), -1, 1, 7, nullptr));
  KK_RETURN_IF_ERROR(device_synchronize());
  constexpr int kRuns = 20;
  Timer t;
  KK_RETURN_IF_ERROR(t.init(kRuns));
  for (int i = 0; i < 3; ++i)
    KK_CUDA_RETURN(cudaMemcpyAsync(b.data(), a.data(), bytes_each, cudaMemcpyDeviceToDevice, t.stream));
  for (int i = 0; i < kRuns; ++i) {
    KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i], t.stream));
    // Alternate directions so no run starts with its source in L2 from the previous run's writes.
    void* dst = i % 2 ? a.data() : b.data();
    const void* src = i % 2 ? b.data() : a.data();
    KK_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes_each, cudaMemcpyDeviceToDevice, t.stream));
    KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i + 1], t.stream));
  }
  std::vector<double> us;
  KK_RETURN_IF_ERROR(t.read(&us));
  out->bytes = 2 * bytes_each;
  out->median_us = median_of(us);
  out->gbps = static_cast<double>(out->bytes) / (out->median_us * 1e3);
  return Status::Ok();
}

// Times `launch(i, stream)` (i picks the rotating buffer set): short kernels as CUDA-graph replays of many launches
// (launch gaps excluded), long ones with events around each launch; median, p10 and p90 of `runs` into r.
// `refresh`, when given, re-randomizes in-place inputs outside the timed windows.
Status time_launches(const LaunchFn& launch, const RefreshFn& refresh, int runs, BenchResult* r) {
  Timer est;
  KK_RETURN_IF_ERROR(est.init(1));
  for (int i = 0; i < 3; ++i) KK_RETURN_IF_ERROR(launch(i, est.stream));
  KK_CUDA_RETURN(cudaEventRecord(est.events[0], est.stream));
  std::vector<double> host_us;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    KK_RETURN_IF_ERROR(launch(i, est.stream));
    host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  KK_CUDA_RETURN(cudaEventRecord(est.events[1], est.stream));
  r->host_us = median_of(host_us);
  std::vector<double> est_us;
  KK_RETURN_IF_ERROR(est.read(&est_us));
  const double per_launch = est_us[0] / 10;

  Timer t;
  KK_RETURN_IF_ERROR(t.init(runs));
  std::vector<double> us;
  r->graph = per_launch < 50.0;
  if (r->graph) {
    const int calls = std::max(r->sets, static_cast<int>(std::min(2000.0, std::ceil(500.0 / per_launch))));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    auto capture = [&]() -> Status {
      KK_CUDA_RETURN(cudaStreamBeginCapture(t.stream, cudaStreamCaptureModeThreadLocal));
      Status s;
      for (int i = 0; i < calls && s.ok(); ++i) s = launch(i, t.stream);
      KK_CUDA_RETURN(cudaStreamEndCapture(t.stream, &graph));
      KK_RETURN_IF_ERROR(s);
      KK_CUDA_RETURN(cudaGraphInstantiate(&exec, graph, 0));
      KK_CUDA_RETURN(cudaGraphLaunch(exec, t.stream));  // warm-up replay
      for (int i = 0; i < runs; ++i) {
        if (refresh) KK_RETURN_IF_ERROR(refresh(t.stream));
        KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i], t.stream));
        KK_CUDA_RETURN(cudaGraphLaunch(exec, t.stream));
        KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i + 1], t.stream));
      }
      return t.read(&us);
    };
    const Status s = capture();
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    KK_RETURN_IF_ERROR(s);
    for (double& v : us) v /= calls;
  } else {
    for (int i = 0; i < runs; ++i) {
      if (refresh && i % r->sets == 0) KK_RETURN_IF_ERROR(refresh(t.stream));
      KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i], t.stream));
      KK_RETURN_IF_ERROR(launch(i, t.stream));
      KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i + 1], t.stream));
    }
    KK_RETURN_IF_ERROR(t.read(&us));
  }
  r->runs = runs;
  r->median_us = median_of(us);
  r->p10_us = median_of(us, 0.1);
  r->p90_us = median_of(us, 0.9);
  return Status::Ok();
}

// Rotating buffer sets: enough that the sets the runs cycle through exceed 2x L2 (cold L2), at most 64 and ~8 GB.
void size_sets(const DeviceProfile& prof, uint64_t set_bytes, BenchResult* r) {
  const uint64_t want = 2 * static_cast<uint64_t>(prof.l2_bytes) + set_bytes;
  r->sets = static_cast<int>(std::clamp<uint64_t>((want + set_bytes - 1) / set_bytes, 2, 64));
  r->sets = static_cast<int>(std::min<uint64_t>(r->sets, std::max<uint64_t>(1, (8ull << 30) / set_bytes)));
  r->l2_cold = static_cast<uint64_t>(r->sets) * set_bytes >= 2 * static_cast<uint64_t>(prof.l2_bytes);
}

BenchResult bench_result(OpId op, const BenchShape& shape, DType dt) {
  BenchResult r;
  r.op_shape = bench_op_shape(op, shape);
  r.bytes = op_bytes(op, r.op_shape, dt);
  r.flops = op_flops(op, r.op_shape);
  return r;
}

void finish_timing(double peak_gbps, BenchResult* r) {
  r->gbps = static_cast<double>(r->bytes) / (r->median_us * 1e3);
  r->pct_of_peak = peak_gbps > 0 ? 100.0 * r->gbps / peak_gbps : 0;
  r->status = Status::Ok();
}

Status set_bench_device(int device) {
  KK_CUDA_RETURN(cudaSetDevice(device));
  return Status::Ok();
}

BenchResult bench_streaming(const DeviceProfile& prof, OpId op, DType dt, const BenchShape& shape, int runs,
                             int device, double peak_gbps, const StreamingOp& sop) {
  BenchResult r = bench_result(op, shape, dt);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return r;
  };
  if (Status s = set_bench_device(device); !s.ok()) return fail(s);
  const bool two = sop.two_tensors;
  const int64_t d = shape.hidden, in_width = sop.in_width_multiple * d, rows = shape.rows;
  const size_t e = dtype_size(dt);
  size_sets(prof, r.bytes, &r);
  std::vector<DeviceBuffer> x(static_cast<size_t>(r.sets)), b(static_cast<size_t>(r.sets)), out(static_cast<size_t>(r.sets));
  const Device dev = Device::cuda(device);
  for (int i = 0; i < r.sets; ++i) {
    for (Status s : {x[i].alloc(rows * in_width * e), b[i].alloc(two ? rows * d * e : 16), out[i].alloc(rows * d * e),
                     fill_uniform(x[i].data(), dt, rows * in_width, -4, 4, 100 + i, nullptr),
                     two ? fill_uniform(b[i].data(), dt, rows * d, -4, 4, 300 + i, nullptr) : Status::Ok()})
      if (!s.ok()) return fail(s);
  }
  auto view = [&](void* p, int64_t n, int64_t width, Device where) {
    return TensorView::contiguous(p, dt, {n, width}, where);
  };
  auto launch = [&](int i, Stream st) {
    const int k = i % r.sets;
    const TensorView bv = view(b[k].data(), rows, d, dev);
    return sop.run(view(out[k].data(), rows, d, dev), view(x[k].data(), rows, in_width, dev), two ? &bv : nullptr, st);
  };
  // Verify set 0 on sampled rows against the CPU reference before timing.
  if (Status s = launch(0, nullptr); !s.ok()) return fail(s);
  if (Status s = device_synchronize(); !s.ok()) return fail(s);
  const std::vector<int64_t> sample = sample_rows(rows);
  const int64_t k = static_cast<int64_t>(sample.size());
  HostBuffer hx(dt, k * in_width), hb(dt, two ? k * d : 1), got(dt, k * d), want(dt, k * d);
  for (Status s : {download_rows(&hx, x[0].data(), sample, in_width, dt),
                   two ? download_rows(&hb, b[0].data(), sample, d, dt) : Status::Ok(),
                   download_rows(&got, out[0].data(), sample, d, dt)})
    if (!s.ok()) return fail(s);
  const TensorView bv = view(hb.data(), k, d, Device::cpu());
  if (Status s = sop.reference(view(want.data(), k, d, Device::cpu()), view(hx.data(), k, in_width, Device::cpu()),
                               two ? &bv : nullptr, sample);
      !s.ok())
    return fail(s);
  CaseResult cmp;
  compare_outputs("out", got, want, k, d, d, &cmp);
  if (Status s = record_verification(cmp, k, &r); !s.ok()) return fail(s);
  if (Status s = time_launches(launch, nullptr, runs, &r); !s.ok()) return fail(s);
  finish_timing(peak_gbps, &r);
  return r;
}

Status measure_l2_window(int device, int64_t hot_rows, uint64_t stream_bytes, int runs, L2WindowResult* out) {
  KK_CUDA_RETURN(cudaSetDevice(device));
  constexpr int64_t H = 4096;
  const DType dt = DType::bf16;
  const uint64_t hot = static_cast<uint64_t>(hot_rows * H) * dtype_size(dt);
  DeviceBuffer x, y, w, big_a, big_b;
  for (Status s : {x.alloc(hot), y.alloc(hot), w.alloc(H * dtype_size(dt)), big_a.alloc(stream_bytes),
                   big_b.alloc(stream_bytes), fill_uniform(x.data(), dt, hot_rows * H, -1, 1, 71, nullptr),
                   fill_uniform(w.data(), dt, H, 0.5, 1.5, 72, nullptr), device_synchronize()})
    KK_RETURN_IF_ERROR(s);
  const Device dev = Device::cuda(device);
  const TensorView xv = TensorView::contiguous(x.data(), dt, {hot_rows, H}, dev);
  const TensorView yv = TensorView::contiguous(y.data(), dt, {hot_rows, H}, dev);
  const TensorView wv = TensorView::contiguous(w.data(), dt, {H}, dev);
  Timer t;
  KK_RETURN_IF_ERROR(t.init(runs));
  // One round: the streaming copy (evicts everything not persisting), then the timed re-read of x.
  auto rounds = [&](double* median) -> Status {
    for (int i = 0; i < runs; ++i) {
      KK_CUDA_RETURN(cudaMemcpyAsync(big_b.data(), big_a.data(), stream_bytes, cudaMemcpyDeviceToDevice, t.stream));
      KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i], t.stream));
      KK_RETURN_IF_ERROR(rms_norm(yv, xv, wv, 1e-6f, 0.0f, t.stream));
      KK_CUDA_RETURN(cudaEventRecord(t.events[2 * i + 1], t.stream));
    }
    std::vector<double> us;
    KK_RETURN_IF_ERROR(t.read(&us));
    *median = median_of(us);
    return Status::Ok();
  };
  out->hot_bytes = hot;
  out->stream_bytes = stream_bytes;
  KK_RETURN_IF_ERROR(rounds(&out->plain_us));
  size_t window = 0;
  KK_RETURN_IF_ERROR(set_l2_persistence(device, t.stream, x.data(), hot, 1.0f, &window));
  out->window_bytes = window;
  const Status s = rounds(&out->persist_us);
  const Status c = clear_l2_persistence(device, t.stream);
  KK_RETURN_IF_ERROR(s);
  return c;
}

BenchResult bench_op(const DeviceProfile& prof, OpId op, DType dtype, const BenchShape& shape, int runs, int device,
                     double peak_gbps) {
  switch (op_info(op).family) {
    case OpFamily::norm: return bench_norm(prof, op, dtype, shape, runs, device, peak_gbps);
    case OpFamily::activation: return bench_activation(prof, op, dtype, shape, runs, device, peak_gbps);
    case OpFamily::softmax: return bench_softmax(prof, op, dtype, shape, runs, device, peak_gbps);
    case OpFamily::rope: return bench_rope(prof, dtype, shape, runs, device, peak_gbps);
    default: break;
  }
  BenchResult r;
  r.status = unsupported(std::string(op_info(op).name) + ": kernelkit bench times the streaming ops; " +
                         std::string(family_name(op_info(op).family)) + " ops are timed by bench/op_baselines.py");
  return r;
}

#endif

}  // namespace kernelkit::testing
