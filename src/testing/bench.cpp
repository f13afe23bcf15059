#include "testing/bench.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "ops/activation/activation_cases.hpp"
#include "ops/norm/norm_cases.hpp"

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

namespace {
constexpr int64_t kRopeHeadDim = 128, kRopeGqa = 4;  // the suite's Llama attention: heads of 128, 4 q heads per kv
}  // namespace

OpShape bench_op_shape(OpId op, const BenchShape& shape) {
  if (op_info(op).family == OpFamily::rope) {  // (token, head) rows of q and k (see bench_rope)
    const int64_t heads = shape.hidden / kRopeHeadDim;
    return {shape.rows * (heads + heads / kRopeGqa), kRopeHeadDim, 1, 16};
  }
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
Status NormWorkload::init(OpId, DType, const BenchShape&, int, int) { return no_cuda(); }
Status NormWorkload::refill(Stream) { return no_cuda(); }
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

}  // namespace

Status NormWorkload::init(OpId op, DType dt, const BenchShape& shape, int sets, int device) {
  KK_CUDA_RETURN(cudaSetDevice(device));
  const bool fused = op == OpId::fused_add_rms_norm, ada = op == OpId::ada_layer_norm;
  const int64_t n = shape.rows * shape.hidden, H = shape.hidden, B = ada ? shape.batch : 1;
  const size_t e = dtype_size(dt);
  dtype_ = dt;
  const Device dev = Device::cuda(device);
  auto alloc = [&](size_t elems) -> void* {
    buffers_.emplace_back();
    Status s = buffers_.back().alloc(std::max<size_t>(elems * e, 16));
    if (!s.ok() && status_.ok()) status_ = s;
    return buffers_.back().data();
  };
  buffers_.reserve(static_cast<size_t>(4 + 2 * sets));
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
    void* o = alloc(static_cast<size_t>(n));  // out, or the residual for the fused op (which writes x in place)
    v.x = act(x);
    v.out = act(o);
    v.residual = act(o);
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

namespace {

// Times `launch(i, stream)` (i picks the rotating buffer set): short kernels as CUDA-graph replays of many launches
// (launch gaps excluded), long ones with events around each launch; median, p10 and p90 of `runs` into r.
// `refresh`, when given, re-randomizes in-place inputs outside the timed windows.
Status time_launches(const std::function<Status(int, cudaStream_t)>& launch, const std::function<Status(cudaStream_t)>& refresh,
                     int runs, BenchResult* r) {
  Timer est;
  KK_RETURN_IF_ERROR(est.init(1));
  for (int i = 0; i < 3; ++i) KK_RETURN_IF_ERROR(launch(i, est.stream));
  KK_CUDA_RETURN(cudaEventRecord(est.events[0], est.stream));
  for (int i = 0; i < 10; ++i) KK_RETURN_IF_ERROR(launch(i, est.stream));
  KK_CUDA_RETURN(cudaEventRecord(est.events[1], est.stream));
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

// A result carrying the op's bytes and FLOPs at this suite shape (from the op table, through bench_op_shape).
BenchResult result_for(OpId op, const BenchShape& shape, DType dt) {
  BenchResult r;
  r.op_shape = bench_op_shape(op, shape);
  r.bytes = op_bytes(op, r.op_shape, dt);
  r.flops = op_flops(op, r.op_shape);
  return r;
}

void finish(double peak_gbps, BenchResult* r) {
  r->gbps = static_cast<double>(r->bytes) / (r->median_us * 1e3);
  r->pct_of_peak = peak_gbps > 0 ? 100.0 * r->gbps / peak_gbps : 0;
  r->status = Status::Ok();
}

}  // namespace

BenchResult bench_norm(const DeviceProfile& prof, OpId op, DType dt, const BenchShape& shape, int runs, int device,
                       double peak_gbps) {
  BenchResult r = result_for(op, shape, dt);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return r;
  };
  const bool fused = op == OpId::fused_add_rms_norm, ada = op == OpId::ada_layer_norm;
  const int64_t n = shape.rows * shape.hidden, H = shape.hidden, B = ada ? shape.batch : 1;
  const size_t e = dtype_size(dt);
  size_sets(prof, 2 * static_cast<uint64_t>(n) * e, &r);  // x and out (fused: x and residual) per set

  NormWorkload wl;
  if (Status s = wl.init(op, dt, shape, r.sets, device); !s.ok()) return fail(s);
  const auto& views = wl.views();
  auto refill = [&](cudaStream_t s) { return wl.refill(s); };

  // ---- Verify set 0 on sampled rows against the CPU reference before any timing.
  const std::vector<int64_t> rows = sample_rows(shape.rows);
  const int64_t k = static_cast<int64_t>(rows.size());
  HostBuffer hx(dt, k * H), hr(dt, k * H), hw(dt, H), hb(dt, H), hsc(dt, k * H), hsh(dt, k * H), hout(dt, k * H);
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
    if (s.ok()) s = download_rows(fused ? &got_x : &hout, fused ? views[0].x.data : views[0].out.data, rows, H, dt);
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
    if (Status rs = call_norm_op(op, hv, 1e-6f); !rs.ok()) return fail(rs);
    CaseResult cmp;
    if (fused) {
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
  auto launch = [&](int i, cudaStream_t s) {
    return call_norm_op(op, views[static_cast<size_t>(i % r.sets)], 1e-6f, 0.0f, s);
  };
  std::function<Status(cudaStream_t)> refresh;
  if (fused) refresh = [&](cudaStream_t s) { return refill(s); };
  if (Status s = time_launches(launch, refresh, runs, &r); !s.ok()) return fail(s);
  finish(peak_gbps, &r);
  return r;
}

BenchResult bench_streaming(const DeviceProfile& prof, OpId op, DType dt, const BenchShape& shape, int runs,
                             int device, double peak_gbps) {
  BenchResult r = result_for(op, shape, dt);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return r;
  };
  if (cudaSetDevice(device) != cudaSuccess) return fail(Status(StatusCode::cuda_error, "cudaSetDevice failed"));
  const bool two = op == OpId::geglu;
  const bool gated = op_info(op).row_tensors_read == 2 && !two;
  const bool causal = op == OpId::causal_softmax;
  const int64_t d = shape.hidden, in_width = gated ? 2 * d : d, rows = shape.rows;
  // causal_softmax: queries per score matrix (the suite's square matrices, or the middle dim of a 3-D shape).
  const int64_t s_q = shape.batch > 1 ? rows / shape.batch : (rows % d == 0 ? d : rows);
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
  // 2-D views [n, width]; causal_softmax on the device sees [n / s_q, s_q, d].
  auto view = [&](void* p, int64_t n, int64_t width, Device where) {
    if (causal && where.type == DeviceType::cuda) return TensorView::contiguous(p, dt, {n / s_q, s_q, width}, where);
    return TensorView::contiguous(p, dt, {n, width}, where);
  };
  // The softmax ops share this streaming harness (x in, out out) at the attention-score scale 1/sqrt(64).
  auto run_op = [&](const TensorView& ov, const TensorView& xv, const TensorView* bv, Stream st) {
    if (op == OpId::softmax || (causal && ov.device.type == DeviceType::cpu)) return softmax(ov, xv, 0.125f, st);
    if (causal) return causal_softmax(ov, xv, 0.125f, st);
    return call_activation_op(op, ov, xv, bv, st);
  };
  auto launch = [&](int i, cudaStream_t st) {
    const int k = i % r.sets;
    const TensorView bv = view(b[k].data(), rows, d, dev);
    return run_op(view(out[k].data(), rows, d, dev), view(x[k].data(), rows, in_width, dev), two ? &bv : nullptr, st);
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
  {
    // The reference on the sampled rows; for causal_softmax each row's masked keys are set to -inf and the rows go
    // through the plain softmax reference (the documented equivalence: masked entries are 0, like -inf inputs).
    if (causal)
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = std::max<int64_t>(0, sample[i] % s_q + d - s_q + 1); j < d; ++j) hx.set(i * d + j, -INFINITY);
    const TensorView bv = view(hb.data(), k, d, Device::cpu());
    if (Status s = run_op(view(want.data(), k, d, Device::cpu()), view(hx.data(), k, in_width, Device::cpu()),
                          two ? &bv : nullptr, nullptr);
        !s.ok())
      return fail(s);
    CaseResult cmp;
    compare_outputs("out", got, want, k, d, d, &cmp);
    if (Status s = record_verification(cmp, k, &r); !s.ok()) return fail(s);
  }
  if (Status s = time_launches(launch, nullptr, runs, &r); !s.ok()) return fail(s);
  finish(peak_gbps, &r);
  return r;
}

BenchResult bench_rope(const DeviceProfile& prof, DType dt, const BenchShape& shape, int runs, int device,
                       double peak_gbps) {
  BenchResult r = result_for(OpId::rotary_embedding, shape, dt);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return r;
  };
  const int64_t D = kRopeHeadDim, heads = shape.hidden / D, kv = heads / kRopeGqa, tokens = shape.rows;
  if (heads < kRopeGqa || shape.hidden % (D * kRopeGqa) != 0)
    return fail(invalid_argument("rotary_embedding bench: hidden must be a multiple of " +
                                 std::to_string(D * kRopeGqa) + ", got " + std::to_string(shape.hidden)));
  if (cudaSetDevice(device) != cudaSuccess) return fail(Status(StatusCode::cuda_error, "cudaSetDevice failed"));
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
  auto launch = [&](int i, cudaStream_t st) {
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
  finish(peak_gbps, &r);
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
  if (op_info(op).family == OpFamily::rope) return bench_rope(prof, dtype, shape, runs, device, peak_gbps);
  if (op_info(op).family == OpFamily::activation || op_info(op).family == OpFamily::softmax)
    return bench_streaming(prof, op, dtype, shape, runs, device, peak_gbps);
  return bench_norm(prof, op, dtype, shape, runs, device, peak_gbps);
}

#endif

}  // namespace kernelkit::testing
