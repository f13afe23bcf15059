// The test machinery shared by every family's cases (src/ops/<family>/<family>_cases.*), the GPU tests, `kernelkit
// verify` and the benchmark: host and device buffers, poisoning, the run of one case on the reference and on the op
// under test from identical inputs, and the element-by-element comparison against the tolerance table.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernelkit/dtype.hpp"
#include "kernelkit/op_info.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"
#include "kernelkit/tolerance.hpp"

namespace kernelkit::testing {

// The tolerance table (kernelkit/tolerance.hpp, docs/tolerances.md): |got - want| <= atol + rtol * |want|.
using kernelkit::Tolerance;
inline Tolerance tolerance(DType t) { return output_tolerance(t); }

struct CaseResult {
  Status status;                 // the op's own status (an expected refusal is reported here, not as a mismatch)
  int64_t checked = 0;           // elements compared
  int64_t mismatches = 0;        // outside tolerance, or non-finite where the reference is finite (and vice versa)
  double max_abs_err = 0;
  double worst_ratio = 0;        // max |got - want| / (atol + rtol |want|): < 1 passes
  std::string detail;            // the first few mismatches
  bool passed() const { return status.ok() && checked > 0 && mismatches == 0; }
};

// Host buffer of `n` elements of a dtype, with typed access.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(DType t, int64_t n) : dtype_(t), n_(n), bytes_(static_cast<size_t>(n) * dtype_size(t)) {}
  DType dtype() const { return dtype_; }
  int64_t size() const { return n_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  size_t bytes() const { return bytes_.size(); }
  double get(int64_t i) const { return load_as_double(bytes_.data(), dtype_, i); }
  void set(int64_t i, double v) { store_from_double(bytes_.data(), dtype_, i, v); }
  void poison();  // every byte 0xFF: NaN in f32 / f16 / bf16, so an unwritten element cannot pass

 private:
  DType dtype_ = DType::f32;
  int64_t n_ = 0;
  std::vector<uint8_t> bytes_;
};

// Device memory owned for a test (CUDA builds only).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  ~DeviceBuffer();
  Status alloc(size_t bytes);
  Status upload(const HostBuffer& h);
  Status download(HostBuffer* h) const;
  Status poison();  // every byte 0xFF, as HostBuffer::poison
  void* data() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

Status device_synchronize();

// n fresh values uniform in [-magnitude, magnitude] from `seed`, rounded to dtype.
HostBuffer random_host(DType dtype, int64_t n, uint64_t seed, double magnitude = 1.0);

// ---- One case on the reference and on the op under test

// What the op does with a buffer: reads it, reads and writes it, or only writes it (then it is poisoned before the op
// under test runs, so an element it does not write cannot pass).
enum class Role : uint8_t { in, inout, out };
struct CaseBuffer {
  HostBuffer* host;
  Role role;
};
// Runs the op over buffers: `ptrs` are the buffers' data (host or device memory, in the CaseBuffer order) on `device`.
using CaseCall = std::function<Status(const std::vector<void*>& ptrs, Device device)>;

// The buffers' host data, in order (for a CaseCall on the CPU backend).
std::vector<void*> buffer_data(const std::vector<CaseBuffer>& buffers);
// The reference: the CPU backend, in place on the host buffers; a refusal is reported as "reference: ...".
Status run_reference(const std::vector<CaseBuffer>& buffers, const CaseCall& call);
// The op under test on CUDA device `device`: every buffer uploaded (at least 16 bytes), the outputs poisoned, the op
// run, then the written buffers (inout, out) downloaded back over the host ones. device < 0: the CPU backend again on
// the host buffers, outputs poisoned first (the harness's own self-check, for the CPU tests).
Status run_under_test(const std::vector<CaseBuffer>& buffers, const CaseCall& call, int device);

// One case: `inputs` (a family's host data) copied twice, the reference run on one (`want`) and the op under test on
// the other (`got`), then compare(got, want, &result). buffers(Data&) lists a Data's buffers with their roles;
// call(inputs, ptrs, device) runs the op over them (`inputs` for the shapes); without a GPU (device >= 0) the result's
// status is no_device.
template <typename Data, typename Buffers, typename Call, typename Compare>
CaseResult run_case(const Data& inputs, int device, Buffers buffers, Call call, Compare compare);

// ---- Comparison

// Counts elements of `got` outside the tolerance table's bound around `want` into `r` (rows x hidden, row stride
// `stride`), recording the first few. `scale` widens the bound for derived quantities (property checks), never for a
// kernel against its reference (1).
void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, CaseResult* r, double scale = 1.0);
// The same with `magnitude[k]`, the size of the terms that were summed into want[k] (a sum that cancels keeps the
// rounding error of its terms): the bound is scale (atol + rtol * max(|want[k]|, magnitude[k])).
void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, const std::vector<double>& magnitude, CaseResult* r, double scale = 1.0);
// The magnitude to pass compare_outputs for an output `want` of dtype `dtype` whose fp32 computation goes through
// intermediates of total size `terms` that cancel or feed an exponent (x - mean, 1 + erf(x), s - max in softmax): the
// fp64 reference has no such error, the kernel keeps a few fp32 roundings (u32 = 2^-24) of them, so the bound becomes
// atol + rtol |want| + kFp32Roundings u32 terms. Negligible against the table's rtol for bf16 and fp16.
inline constexpr double kFp32Roundings = 8;
double fp32_terms_magnitude(double want, double terms, DType dtype);
// One element checked against an explicit bound: counted, its error tracked, a mismatch noted as label[i, j].
void check_element(CaseResult* r, const char* label, double got, double want, double allowed, int64_t i, int64_t j);
// A mismatch that is not one element against a bound (an invariant): counted, the first few described.
void note_mismatch(CaseResult* r, const std::string& what);
// The distance from e4m3 value v to its neighbours: 2^(floor(log2 |v|) - 3), 2^-9 below 2^-6 (the subnormals).
double e4m3_spacing(double v);

// Setup and teardown steps of a GPU case: the first failure (every step is evaluated, in order).
Status first_error(std::initializer_list<Status> steps);
// Ok when a CUDA device is present, else status no_device.
Status need_device();

// The row-op shape grid: rows {1, 7, 83, 4096} x hidden {64, 111, 500, 769, 2048, 4096, 5125, 8192}.
std::vector<int64_t> grid_rows();
std::vector<int64_t> grid_hidden();

// ---- run_case

template <typename Data, typename Buffers, typename Call, typename Compare>
CaseResult run_case(const Data& inputs, int device, Buffers buffers, Call call, Compare compare) {
  CaseResult r;
  if (device >= 0 && !(r.status = need_device()).ok()) return r;
  Data want = inputs, got = inputs;
  const CaseCall run = [&](const std::vector<void*>& ptrs, Device dev) { return call(inputs, ptrs, dev); };
  if (r.status = run_reference(buffers(want), run); !r.status.ok()) return r;
  if (r.status = run_under_test(buffers(got), run, device); !r.status.ok()) return r;
  compare(got, want, &r);
  return r;
}

}  // namespace kernelkit::testing
