// Instantiation of the decode attention kernels for __nv_bfloat16 queries over e4m3 caches (their own file: they
// compile in parallel with the 16-bit caches' and add nothing to those; for sm_75 / sm_80 the kernels are traps, see
// KK_DEVICE_HAS_FP8).
#include "ops/attention/decode.cuh"

namespace kernelkit::cuda {
template Status launch_decode<__nv_bfloat16, true>(const detail::DecodeArgs&, const DeviceProfile&, cudaStream_t);
}  // namespace kernelkit::cuda
