// Instantiation of the decode attention kernels for __half (one file per dtype so the builds compile in parallel).
#include "ops/attention/decode.cuh"

namespace kernelkit::cuda {
template Status launch_decode<__half>(const detail::DecodeArgs&, const DeviceProfile&, cudaStream_t);
}  // namespace kernelkit::cuda
