// Benchmark machinery behind `kernelkit bench` (the only source of speed claims, see DESIGN.md):
// device time with CUDA events, warm-up, median of many runs, cold L2 by rotating buffer sets whose total exceeds
// 2x L2, CUDA-graph replay for short kernels, the copy ceiling measured in the same process, and every timing preceded
// by a check of the output against the CPU reference.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernelkit/op_info.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"
#include "ops/norm/norm_cases.hpp"

namespace kernelkit::testing {

struct BenchShape {
  int64_t rows = 0, hidden = 0;
  int64_t batch = 1;  // leading dim for per-batch parameters (ada_layer_norm); rows = batch * seq
  std::string label;  // how the suite names it: "65536x4096", "2x4096x3072"
};

struct BenchResult {
  Status status;             // not ok: nothing below is meaningful (the reason is here)
  bool verified = false;     // output matched the reference on the sampled rows before timing
  int64_t rows_checked = 0;  // rows compared against the reference
  double median_us = 0, p10_us = 0, p90_us = 0;
  int runs = 0;
  bool graph = false;        // timed as CUDA-graph replays (short kernels)
  bool l2_cold = false;      // the rotating buffers exceeded 2x L2
  int sets = 0;              // rotating buffer sets
  OpShape op_shape;          // the shape the op's bytes and FLOPs were computed for (bench_op_shape)
  uint64_t bytes = 0;        // from op_bytes: the single description of the op
  double flops = 0;
  double gbps = 0, pct_of_peak = 0;
};

struct CopyCeiling {
  double gbps = 0, median_us = 0;
  uint64_t bytes = 0;  // read + written
};

// Device buffers for one norm op and shape: `sets` rotating sets of the per-row tensors (x and out; x and residual for
// the fused op), shared parameters, all filled with random values on the device.
class NormWorkload {
 public:
  Status init(OpId op, DType dtype, const BenchShape& shape, int sets, int device);
  const std::vector<NormTensors>& views() const { return views_; }
  Status refill(Stream stream);  // fresh random rotated tensors (in-place ops drift as they are re-run)

 private:
  DType dtype_ = DType::f32;
  Status status_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<NormTensors> views_;
  std::vector<std::pair<void*, int64_t>> rotated_;
};

// Device-to-device copy of `bytes_each` bytes, counting bytes read plus bytes written; median of 20.
Status measure_copy_ceiling(int device, uint64_t bytes_each, CopyCeiling* out);

// One op at one shape: buffers, verification of sampled rows against the CPU reference, then the timing.
BenchResult bench_op(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs, int device,
                     double peak_gbps);
BenchResult bench_norm(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                       int device, double peak_gbps);
// The streaming ops (activations, softmax): x [rows, d] (or [rows, 2d] gated; a and b for geglu) -> out [rows, d].
// causal_softmax: x [batch, rows / batch, d] score matrices (a 2-D shape is cut into square [d, d] ones when d
// divides rows).
BenchResult bench_streaming(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                             int device, double peak_gbps);
// RoPE as in a Llama attention block: a suite shape tokens x hidden is q [tokens, hidden / 128, 128] and k [tokens,
// hidden / 512, 128] (GQA 4:1) as strided views of a fused qkv projection, rotated in place from a cos/sin cache with
// random positions (vLLM convention, neox).
BenchResult bench_rope(const DeviceProfile& profile, DType dtype, const BenchShape& shape, int runs, int device,
                       double peak_gbps);
// The shape an op's bytes and FLOPs are counted over for a suite shape (RoPE: (token, head) rows of head_dim).
OpShape bench_op_shape(OpId op, const BenchShape& shape);

// Where L2 persistence helps: a small working set re-read between streaming traffic. rms_norm over `hot_rows` x 4096
// bf16 rows (the re-read set, ~8 MB at 1024 rows: decode-sized) runs after each streaming copy of `stream_bytes`
// (which evicts L2), timed without and with an access-policy window over its input. Medians of `runs`.
struct L2WindowResult {
  uint64_t hot_bytes = 0, window_bytes = 0, stream_bytes = 0;
  double plain_us = 0, persist_us = 0;  // the re-read op's median time without / with the window
};
Status measure_l2_window(int device, int64_t hot_rows, uint64_t stream_bytes, int runs, L2WindowResult* out);

// The seed's assessment of % of the measured peak: > 78 excellent, 62-78 good, 31-62 fair, < 31 poor.
const char* assessment(double pct_of_peak);

// Random fill on the device (uniform in [lo, hi), rounded to the dtype), so large inputs cost no host time.
Status fill_uniform(void* ptr, DType dtype, int64_t n, double lo, double hi, uint64_t seed, Stream stream);

}  // namespace kernelkit::testing
