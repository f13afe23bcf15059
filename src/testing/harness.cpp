#include "testing/harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "kernelkit/runtime.hpp"

namespace kernelkit::testing {

std::vector<int64_t> grid_rows() { return {1, 7, 83, 4096}; }
std::vector<int64_t> grid_hidden() { return {64, 111, 500, 769, 2048, 4096, 5125, 8192}; }

void HostBuffer::poison() { std::memset(bytes_.data(), 0xFF, bytes_.size()); }

void note_mismatch(CaseResult* r, const std::string& what) {
  ++r->mismatches;
  if (r->mismatches <= 4) r->detail += "  " + what + "\n";
}

double e4m3_spacing(double v) { return std::ldexp(1.0, std::max(std::ilogb(std::max(std::fabs(v), 1e-30)), -6) - 3); }

void check_element(CaseResult* r, const char* label, double got, double want, double allowed, int64_t i, int64_t j) {
  const double err = std::fabs(got - want);
  ++r->checked;
  if (std::isfinite(err)) {
    r->max_abs_err = std::max(r->max_abs_err, err);
    r->worst_ratio = std::max(r->worst_ratio, err / allowed);
  }
  // A non-finite reference must be matched by a non-finite result (and a finite one by a finite one within bound).
  const bool bad = std::isfinite(want) ? !(err <= allowed) : std::isfinite(got);
  if (bad) {
    std::ostringstream os;
    os << label << "[" << i << ", " << j << "]: got " << got << ", want " << want << " (allowed " << allowed << ")";
    note_mismatch(r, os.str());
  }
}

namespace {

void compare(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
             int64_t stride, double scale, CaseResult* r, const std::vector<double>* magnitude) {
  const Tolerance tol = tolerance(got.dtype());
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t i = 0; i < hidden; ++i) {
      const int64_t k = row * stride + i;
      const double w = want.get(k);
      const double mag = magnitude ? std::max(std::fabs(w), (*magnitude)[static_cast<size_t>(k)]) : std::fabs(w);
      check_element(r, label, got.get(k), w, scale * (tol.atol + tol.rtol * mag), row, i);
    }
}

}  // namespace

HostBuffer random_host(DType dtype, int64_t n, uint64_t seed, double magnitude) {
  HostBuffer b(dtype, n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-magnitude, magnitude);
  for (int64_t i = 0; i < n; ++i) b.set(i, u(rng));
  return b;
}

std::vector<void*> buffer_data(const std::vector<CaseBuffer>& buffers) {
  std::vector<void*> ptrs;
  for (const CaseBuffer& b : buffers) ptrs.push_back(b.host->data());
  return ptrs;
}

void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, CaseResult* r, double scale) {
  compare(label, got, want, rows, hidden, stride, scale, r, nullptr);
}

void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, const std::vector<double>& magnitude, CaseResult* r, double scale) {
  compare(label, got, want, rows, hidden, stride, scale, r, &magnitude);
}

double fp32_terms_magnitude(double want, double terms, DType dtype) {
  return std::fabs(want) + kFp32Roundings * std::ldexp(1.0, -24) * terms / tolerance(dtype).rtol;
}

Status first_error(std::initializer_list<Status> steps) {
  for (const Status& s : steps)
    if (!s.ok()) return s;
  return Status::Ok();
}

Status need_device() {
  return cuda_device_count() > 0 ? Status::Ok() : Status(StatusCode::no_device, "no CUDA device");
}

Status run_reference(const std::vector<CaseBuffer>& buffers, const CaseCall& call) {
  const Status s = call(buffer_data(buffers), Device::cpu());
  return s.ok() ? s : Status(s.code(), "reference: " + s.message());
}

Status run_under_test(const std::vector<CaseBuffer>& buffers, const CaseCall& call, int device) {
  if (device < 0) {
    for (const CaseBuffer& b : buffers)
      if (b.role == Role::out) b.host->poison();
    return call(buffer_data(buffers), Device::cpu());
  }
  std::vector<DeviceBuffer> dev(buffers.size());
  std::vector<void*> ptrs;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const HostBuffer& h = *buffers[i].host;
    KK_RETURN_IF_ERROR(dev[i].alloc(std::max<size_t>(h.bytes(), 16)));
    KK_RETURN_IF_ERROR(buffers[i].role == Role::out ? dev[i].poison() : h.bytes() ? dev[i].upload(h) : Status::Ok());
    ptrs.push_back(dev[i].data());
  }
  KK_RETURN_IF_ERROR(call(ptrs, Device::cuda(device)));
  KK_RETURN_IF_ERROR(device_synchronize());
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].role != Role::in) KK_RETURN_IF_ERROR(dev[i].download(buffers[i].host));
  return Status::Ok();
}

}  // namespace kernelkit::testing
