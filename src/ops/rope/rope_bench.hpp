// RoPE's benchmark (bench.hpp): a suite shape tokens x hidden is q [tokens, hidden / 128, 128] and k [tokens,
// hidden / 512, 128] (GQA 4:1) as strided views of a fused qkv projection, rotated in place from a cos/sin cache with
// random positions (vLLM convention, neox).
#pragma once

#include "testing/bench.hpp"

namespace kernelkit::testing {

BenchResult bench_rope(const DeviceProfile& profile, DType dtype, const BenchShape& shape, int runs, int device,
                       double peak_gbps);
// The shape its bytes and FLOPs are counted over: (token, head) rows of head_dim.
OpShape rope_bench_shape(const BenchShape& shape);

}  // namespace kernelkit::testing
