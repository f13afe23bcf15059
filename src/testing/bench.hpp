// Benchmark machinery behind `kernelkit bench` (the only source of speed claims, see DESIGN.md):
// device time with CUDA events, warm-up, median of many runs, cold L2 by rotating buffer sets whose total exceeds
// 2x L2, CUDA-graph replay for short kernels, the copy ceiling measured in the same process, and every timing preceded
// by a check of the output against the CPU reference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernelkit/op_info.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"
#include "testing/harness.hpp"

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
  double host_us = 0;        // host time of one launch call (the op's checks, plan and kernel launch), median
};

struct CopyCeiling {
  double gbps = 0, median_us = 0;
  uint64_t bytes = 0;  // read + written
};

// Device-to-device copy of `bytes_each` bytes, counting bytes read plus bytes written; median of 20.
Status measure_copy_ceiling(int device, uint64_t bytes_each, CopyCeiling* out);

// One op at one shape: buffers, verification of sampled rows against the CPU reference, then the timing. The
// family's own bench (src/ops/<family>/<family>_bench.cpp) does the work; the streaming ops only (norm, activation,
// softmax, rope: attention and the linear ops are timed by bench/op_baselines.py).
BenchResult bench_op(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs, int device,
                     double peak_gbps);
// The shape an op's bytes and FLOPs are counted over for a suite shape (RoPE: (token, head) rows of head_dim).
OpShape bench_op_shape(OpId op, const BenchShape& shape);

// ---- The pieces every family's bench is made of

// Times `launch(i, stream)` (i picks the rotating buffer set): short kernels as CUDA-graph replays of many launches
// (launch gaps excluded), long ones with events around each launch; median, p10 and p90 of `runs` into r, and the
// median host time of one launch call (a steady clock around each of ten plain launches) into r->host_us.
// `refresh`, when given, re-randomizes in-place inputs outside the timed windows.
using LaunchFn = std::function<Status(int set, Stream stream)>;
using RefreshFn = std::function<Status(Stream stream)>;
Status time_launches(const LaunchFn& launch, const RefreshFn& refresh, int runs, BenchResult* r);
// Rotating buffer sets: enough that the sets the runs cycle through exceed 2x L2 (cold L2), at most 64 and ~8 GB.
void size_sets(const DeviceProfile& profile, uint64_t set_bytes, BenchResult* r);
// A result carrying the op's bytes and FLOPs at this suite shape (from the op table, through bench_op_shape).
BenchResult bench_result(OpId op, const BenchShape& shape, DType dtype);
// GB/s and % of `peak_gbps` from the bytes and the median; the status ok.
void finish_timing(double peak_gbps, BenchResult* r);
// Up to 32 rows spread over [0, rows), first and last included: the rows checked against the reference before a
// timing.
std::vector<int64_t> sample_rows(int64_t rows);
// Rows `rows` of a device tensor of `hidden`-element rows (contiguous) into consecutive rows of `dst`.
Status download_rows(HostBuffer* dst, const void* src, const std::vector<int64_t>& rows, int64_t hidden, DType t);
// Records the verification of `rows` sampled rows in r; a mismatch fails the case (no timing is accepted).
Status record_verification(const CaseResult& cmp, int64_t rows, BenchResult* r);
Status set_bench_device(int device);

// An op for the streaming harness: x [rows, in_width_multiple x d] (and b [rows, d] for a two-tensor op) -> out
// [rows, d], as 2-D contiguous views. run: the op under test on the device; reference: the CPU reference over the
// sampled rows (views [k, width] of host copies of those rows; `rows` their indices in the full tensor; x may be
// rewritten).
struct StreamingOp {
  int64_t in_width_multiple = 1;
  bool two_tensors = false;
  std::function<Status(const TensorView& out, const TensorView& x, const TensorView* b, Stream stream)> run;
  std::function<Status(const TensorView& out, const TensorView& x, const TensorView* b,
                       const std::vector<int64_t>& rows)>
      reference;
};
BenchResult bench_streaming(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                            int device, double peak_gbps, const StreamingOp& sop);

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
