// `kernelkit demo`: one LLaMA-7B-shaped decoder layer (hidden 4096, intermediate 11008, 32 heads of 128) in plain C++
// on kernelkit + cuBLASLt, random weights: prefill time and decode tokens/s on this GPU (dense weights, their
// weight-only INT8 / INT4 copies, and where the GPU has FP8 their FP8 copies), each next to its roofline bound for the
// same GPU (bytes over the copy bandwidth measured in the same run; FLOPs over the tensor-core peak).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#ifdef KERNELKIT_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

#include "commands.hpp"
#include "kernelkit/llama.hpp"
#include "kernelkit/model_plan.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/bench.hpp"
#include "testing/harness.hpp"

namespace kernelkit::cli {
namespace {

struct DemoOptions {
  int device = 0, runs = 20;
  std::string dtype;  // default: bf16, fp16 on GPUs without bf16
  int64_t prefill = 2048, context = 4096;
  std::vector<int64_t> batches{1, 32};
};

#ifdef KERNELKIT_HAS_CUDA
// GPU milliseconds of one call of f(stream), the median of `runs`, each after prepare(stream) (outside the timed
// window): `eager` launches f's kernels from the host every time (host launch gaps count when f's kernels are short),
// `graph` replays them captured once in a CUDA graph, as decode loops run in serving engines (NaN when f cannot be
// captured).
struct StepTime {
  double eager = 0, graph = std::numeric_limits<double>::quiet_NaN();
};

template <typename F, typename P>
Status time_step(int runs, F&& f, P&& prepare, StepTime* out) {
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) return Status(StatusCode::cuda_error, "cudaStreamCreate failed");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaGraphExec_t exec = nullptr;
  // One timing loop for both modes: `launch` is f itself or the captured graph.
  auto median_ms = [&](auto&& launch, double* median) -> Status {
    std::vector<double> ms;
    for (int i = -2; i < runs; ++i) {  // two warm-up calls
      KK_RETURN_IF_ERROR(prepare(Stream(s)));
      cudaEventRecord(a, s);
      KK_RETURN_IF_ERROR(launch());
      cudaEventRecord(b, s);
      if (cudaEventSynchronize(b) != cudaSuccess) return Status(StatusCode::cuda_error, "a demo step failed");
      float t = 0;
      if (i >= 0 && cudaEventElapsedTime(&t, a, b) == cudaSuccess) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    *median = ms[ms.size() / 2];
    return Status::Ok();
  };
  Status st = median_ms([&] { return f(Stream(s)); }, &out->eager);
  if (st.ok()) {
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      const Status captured = f(Stream(s));
      const cudaError_t end = cudaStreamEndCapture(s, &graph);
      if (captured.ok() && end == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess)
        st = median_ms(
            [&] {
              return cudaGraphLaunch(exec, s) == cudaSuccess ? Status::Ok()
                                                             : Status(StatusCode::cuda_error, "cudaGraphLaunch failed");
            },
            &out->graph);
      if (graph) cudaGraphDestroy(graph);
    }
    cudaGetLastError();  // a step that cannot be captured leaves graph NaN, not a sticky error
  }
  if (exec) cudaGraphExecDestroy(exec);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  return st;
}

// "X us (graph) / Y us (eager)" for a StepTime, in the unit `scale` gives (1e3: microseconds).
std::string format_step(const StepTime& t, double scale, int precision) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(precision);
  if (!std::isnan(t.graph)) os << t.graph * scale << " (graph) / ";
  os << t.eager * scale << " (eager)";
  return os.str();
}

int run_demo(const DemoOptions& o) {
  if (cuda_device_count() == 0) {
    std::cerr << "kernelkit demo needs a CUDA GPU and none is available\n";
    return 1;
  }
  auto prof = resolve_profile("", o.device);
  if (!prof) return 1;
  const DType dt = !o.dtype.empty() ? (o.dtype == "fp16" || o.dtype == "f16" ? DType::f16 : DType::bf16)
                                    : (prof->supports(DType::bf16) ? DType::bf16 : DType::f16);
  LlamaLayerConfig c;  // LLaMA-7B
  c.max_position = std::max(o.prefill, o.context + 1);
  const int64_t qkv_rows = (c.heads + 2 * c.kv_heads) * c.head_dim, max_batch = *std::max_element(
                                                                         o.batches.begin(), o.batches.end());
  const size_t e = dtype_size(dt);
  const Device dev = Device::cuda(o.device);
  auto fail = [](const char* what, const Status& s) {
    std::cerr << "demo: " << what << ": " << s.to_string() << "\n";
    return 1;
  };

  // Weights, random in a range that keeps activations O(1) through the layer.
  struct W {
    int64_t rows, cols;
    double lo, hi;
    Buffer buf;
  };
  std::vector<W> w;
  for (auto [r, cols, lo, hi] : {std::tuple{int64_t{1}, c.hidden, 0.5, 1.5}, {qkv_rows, c.hidden, -0.02, 0.02},
                                 {c.hidden, c.heads * c.head_dim, -0.02, 0.02}, {int64_t{1}, c.hidden, 0.5, 1.5},
                                 {2 * c.intermediate, c.hidden, -0.02, 0.02}, {c.hidden, c.intermediate, -0.02, 0.02}})
    w.push_back({r, cols, lo, hi, Buffer()});
  uint64_t weight_bytes = 0, seed = 1;
  for (W& m : w) {
    if (Status s = m.buf.alloc(dev, static_cast<size_t>(m.rows * m.cols) * e); !s.ok()) return fail("weights", s);
    if (Status s = testing::fill_uniform(m.buf.data(), dt, m.rows * m.cols, m.lo, m.hi, seed++, nullptr); !s.ok())
      return fail("weights", s);
    weight_bytes += static_cast<uint64_t>(m.rows * m.cols) * e;
  }
  auto mat = [&](W& m) {
    return m.rows == 1 ? TensorView::contiguous(m.buf.data(), dt, {m.cols}, dev)
                       : TensorView::contiguous(m.buf.data(), dt, {m.rows, m.cols}, dev);
  };
  const LlamaLayerWeights lw{mat(w[0]), mat(w[1]), mat(w[2]), mat(w[3]), mat(w[4]), mat(w[5])};
  LlamaLayer layer;
  if (Status s = layer.init(c, lw, dt, dev, std::max(o.prefill, max_batch)); !s.ok()) return fail("init", s);

  testing::CopyCeiling copy;
  if (Status s = testing::measure_copy_ceiling(o.device, 2ull << 30, &copy); !s.ok()) return fail("copy ceiling", s);
  const double tensor_tflops = prof->fp16_tc_tflops;
  std::cout << "kernelkit demo: one LLaMA-7B decoder layer (hidden 4096, intermediate 11008, 32 heads x 128), "
            << dtype_name(dt) << ", on " << prof->name << "\ncopy ceiling (same run) " << std::fixed
            << std::setprecision(0) << copy.gbps << " GB/s; tensor-core peak (datasheet) " << tensor_tflops
            << " TFLOP/s\n\n";

  // Prefill: x [1, prefill, hidden], caches of `prefill` positions.
  {
    const int64_t T = o.prefill;
    Buffer x, k, v;
    const size_t cache = static_cast<size_t>(T * c.kv_heads * c.head_dim) * e;
    for (Status s : {x.alloc(dev, static_cast<size_t>(T * c.hidden) * e), k.alloc(dev, cache), v.alloc(dev, cache)})
      if (!s.ok()) return fail("prefill buffers", s);
    const TensorView X = TensorView::contiguous(x.data(), dt, {1, T, c.hidden}, dev);
    const TensorView K = TensorView::contiguous(k.data(), dt, {1, T, c.kv_heads, c.head_dim}, dev);
    const TensorView V = TensorView::contiguous(v.data(), dt, {1, T, c.kv_heads, c.head_dim}, dev);
    StepTime t;
    const Status s = time_step(
        o.runs, [&](Stream st) { return layer.prefill(X, K, V, st); },
        [&](Stream st) { return testing::fill_uniform(x.data(), dt, T * c.hidden, -1, 1, 99, st); }, &t);
    if (!s.ok()) return fail("prefill", s);
    const double ms = std::isnan(t.graph) ? t.eager : t.graph;
    // FLOPs: the GEMMs (2 T x weights) and causal attention (2 GEMMs of T x T/2 x d per head).
    const double flops = 2.0 * T * static_cast<double>(weight_bytes / e) +
                         2.0 * 2.0 * c.heads * c.head_dim * static_cast<double>(T) * T / 2;
    const double bound_ms = flops / (tensor_tflops * 1e12) * 1e3;
    std::cout << "prefill " << T << " tokens: " << format_step(t, 1.0, 3) << " ms = " << std::setprecision(0)
              << T / ms * 1e3 << " tokens/s, " << std::setprecision(0) << flops / ms / 1e9
              << " TFLOP/s; roofline bound " << std::setprecision(3) << bound_ms << " ms (" << std::setprecision(0)
              << 100 * bound_ms / ms << "% of it)\n";
  }
  // Weight-only INT8 (per channel) and INT4 (group 128) copies of the four projections, and where the GPU has FP8
  // e4m3 copies with a scale per output channel (activations quantized per token in the layer), quantized on the GPU.
  struct Quant {
    Buffer q, s;
    LayerLinear linear;
  };
  const int formats = prof->supports(DType::f8e4m3) ? 4 : 3;
  std::vector<Quant> quant(12);
  LlamaLayer layers[4];
  uint64_t format_bytes[4] = {weight_bytes, 0, 0, 0};
  const char* format_name[4] = {dtype_name(dt).data(), "int8", "int4", "fp8"};
  for (int f = 1; f < formats; ++f) {
    const bool fp8 = f == 3;
    const int bits = f == 2 ? 4 : 8, group = bits == 4 ? 128 : 0;
    const DType code = fp8 ? DType::f8e4m3 : bits == 8 ? DType::i8 : DType::i4x2;
    LlamaLayerWeights qw = lw;
    LayerLinear* slots[4] = {&qw.qkv, &qw.o, &qw.gate_up, &qw.down};
    const int src[4] = {1, 2, 4, 5};
    format_bytes[f] = static_cast<uint64_t>(2 * c.hidden) * e;  // the two norm weights stay dense
    for (int i = 0; i < 4; ++i) {
      W& m = w[static_cast<size_t>(src[i])];
      Quant& qt = quant[static_cast<size_t>((f - 1) * 4 + i)];
      const int64_t cols = bits == 8 ? m.cols : m.cols / 2, groups = bits == 8 ? 1 : m.cols / group;
      for (Status s : {qt.q.alloc(dev, static_cast<size_t>(m.rows * cols)), qt.s.alloc(dev, static_cast<size_t>(m.rows * groups) * 4)})
        if (!s.ok()) return fail("quantized weights", s);
      const TensorView qv = TensorView::contiguous(qt.q.data(), code, {m.rows, cols}, dev);
      const TensorView sv = bits == 8 ? TensorView::contiguous(qt.s.data(), DType::f32, {m.rows}, dev)
                                      : TensorView::contiguous(qt.s.data(), DType::f32, {m.rows, groups}, dev);
      const Status s = fp8         ? quantize_per_token_fp8(qv, sv, mat(m))
                       : bits == 8 ? quantize_int8_per_channel(qv, sv, mat(m))
                                   : quantize_int4_groupwise(qv, sv, mat(m), group);
      if (!s.ok()) return fail("quantize", s);
      qt.linear = fp8 ? LayerLinear::fp8(qv, sv) : LayerLinear::quantized(qv, sv, bits, group);
      *slots[i] = qt.linear;
      format_bytes[f] += static_cast<uint64_t>(m.rows * cols) + static_cast<uint64_t>(m.rows * groups) * 4;
    }
    if (Status s = layers[f].init(c, qw, dt, dev, max_batch); !s.ok()) return fail("quantized layer", s);
  }

  // Decode: batch b, one token each at position `context` (the caches hold `context` earlier tokens), for the dense
  // weights and their INT8 / INT4 (and FP8) copies.
  for (int64_t b : o.batches) {
    const int64_t cap = o.context + 1;
    Buffer x, k, v;
    const int64_t cache_elems = b * cap * c.kv_heads * c.head_dim;
    for (Status s : {x.alloc(dev, static_cast<size_t>(b * c.hidden) * e), k.alloc(dev, cache_elems * e),
                     v.alloc(dev, cache_elems * e)})
      if (!s.ok()) return fail("decode buffers", s);
    for (Status s : {testing::fill_uniform(k.data(), dt, cache_elems, -1, 1, 7, nullptr),
                     testing::fill_uniform(v.data(), dt, cache_elems, -1, 1, 8, nullptr)})
      if (!s.ok()) return fail("cache", s);
    const TensorView X = TensorView::contiguous(x.data(), dt, {b, c.hidden}, dev);
    const TensorView K = TensorView::contiguous(k.data(), dt, {b, cap, c.kv_heads, c.head_dim}, dev);
    const TensorView V = TensorView::contiguous(v.data(), dt, {b, cap, c.kv_heads, c.head_dim}, dev);
    double dense_ms = 0;
    for (int f = 0; f < formats; ++f) {
      LlamaLayer& l = f == 0 ? layer : layers[f];
      StepTime t;
      const Status s = time_step(
          o.runs, [&](Stream st) { return l.decode(X, K, V, o.context, st); },
          [&](Stream st) { return testing::fill_uniform(x.data(), dt, b * c.hidden, -1, 1, 98, st); }, &t);
      if (!s.ok()) return fail("decode", s);
      const double ms = std::isnan(t.graph) ? t.eager : t.graph;  // the rates below: the graph's when it has one
      if (f == 0) dense_ms = ms;
      const double bytes = static_cast<double>(format_bytes[f]) + 2.0 * b * cap * c.kv_heads * c.head_dim * e;
      const double bound_ms = bytes / (copy.gbps * 1e9) * 1e3;
      std::cout << "decode " << std::left << std::setw(5) << format_name[f] << std::right << " batch " << b
                << " at context " << o.context << ": " << format_step(t, 1e3, 1) << " us/step = "
                << std::setprecision(0) << b / ms * 1e3 << " tokens/s per layer (" << std::setprecision(2)
                << dense_ms / ms << "x the dense step); " << std::setprecision(0) << bytes / 1e6
                << " MB read, roofline bound " << std::setprecision(1) << bound_ms * 1e3 << " us ("
                << std::setprecision(0) << 100 * bound_ms / ms << "% of it)\n";
    }
  }
  return 0;
}

#else
int run_demo(const DemoOptions&) {
  std::cerr << "kernelkit demo needs a CUDA GPU (this build has no CUDA)\n";
  return 1;
}
#endif

}  // namespace

std::function<int()> add_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo", "Time one LLaMA-7B decoder layer (prefill and decode) against its roofline");
  cmd->add_option("--device", o->device, "CUDA device index")->check(at_least(0));
  cmd->add_option("--dtype", o->dtype, "bf16 or fp16 (default: bf16, fp16 where the GPU has no bf16)")
      ->check(CLI::IsMember({"bf16", "fp16", "f16"}));
  cmd->add_option("--prefill", o->prefill, "Prefill tokens")->check(at_least(1));
  cmd->add_option("--context", o->context, "Decode context (tokens already in the cache)")->check(at_least(1));
  cmd->add_option("--batch", o->batches, "Decode batch sizes (repeatable)")->check(at_least(1));
  cmd->add_option("--runs", o->runs, "Timed runs (median)")->check(CLI::Range(3, 10000));
  return [o] { return run_demo(*o); };
}

}  // namespace kernelkit::cli
