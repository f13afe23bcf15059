// A non-owning view of a tensor: pointer, dtype, shape, strides (in elements) and device.
// This is the only way data crosses the public API, so the core never depends on a framework.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernelkit/dtype.hpp"

struct CUstream_st;  // cudaStream_t without including the CUDA headers

namespace kernelkit {

using Stream = CUstream_st*;  // the caller's CUDA stream; nullptr is the legacy default stream

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool operator==(const Device&) const = default;
};
std::string to_string(Device d);

constexpr int kMaxDims = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // elements, not bytes
  Device device{};

  // Row-major contiguous view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = Device::cpu());
  // Explicit strides (elements).
  static TensorView strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                            std::initializer_list<int64_t> strides, Device device = Device::cpu());

  int64_t numel() const;
  int64_t size(int dim) const { return shape[dim < 0 ? dim + ndim : dim]; }
  int64_t stride(int dim) const { return strides[dim < 0 ? dim + ndim : dim]; }
  bool is_contiguous() const;
  std::string shape_string() const;  // "[4, 7, 4096]"
};

}  // namespace kernelkit
