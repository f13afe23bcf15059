// Host side of the sm_90a kernels (sm90a.hpp): availability, and the entry points' refusal in builds without them.
#include "cuda/sm90a/sm90a.hpp"

namespace kernelkit::cuda {

#if KERNELKIT_HAS_SM90A
Status wgmma_probe_launch(const void* a, const void* b, float* c, bool f16, bool b_mn_major, cudaStream_t stream);
#endif

bool sm90a_available(int device) {
#if KERNELKIT_HAS_SM90A
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
#else
  (void)device;
  return false;
#endif
}

Status wgmma_probe(const void* a, const void* b, float* c, bool f16, bool b_mn_major, cudaStream_t stream) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || !sm90a_available(device)) {
    (void)cudaGetLastError();
    return unsupported("wgmma_probe: needs a build with sm_90a code (arch list with 90 or native) on a compute "
                       "capability 9.0 device");
  }
#if KERNELKIT_HAS_SM90A
  return wgmma_probe_launch(a, b, c, f16, b_mn_major, stream);
#else
  (void)a, (void)b, (void)c, (void)f16, (void)b_mn_major, (void)stream;
  return unsupported("wgmma_probe: not built");
#endif
}

}  // namespace kernelkit::cuda
