// Host side of the sm_90a kernels (sm90a.hpp): availability, and the entry points' refusal in builds without them.
#include "cuda/sm90a/sm90a.hpp"

#include <string>

namespace kernelkit::cuda {

#if KERNELKIT_HAS_SM90A
Status wgmma_probe_launch(const void* a, const void* b, float* c, bool f16, bool b_mn_major, cudaStream_t stream);
Status flash_prefill_wgmma_launch(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream);
#endif

namespace {
// The refusal of an sm_90a entry point on the current device (or in a build without the code), or Ok.
Status need_sm90a(const char* what) {
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess && sm90a_available(device)) return Status::Ok();
  (void)cudaGetLastError();
  return unsupported(std::string(what) + ": needs a build with sm_90a code (arch list with 90 or native) on a "
                     "compute capability 9.0 device");
}
}  // namespace

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
  KK_RETURN_IF_ERROR(need_sm90a("wgmma_probe"));
#if KERNELKIT_HAS_SM90A
  return wgmma_probe_launch(a, b, c, f16, b_mn_major, stream);
#else
  (void)a, (void)b, (void)c, (void)f16, (void)b_mn_major, (void)stream;
  return unsupported("wgmma_probe: not built");
#endif
}

Status flash_prefill_wgmma(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream) {
  KK_RETURN_IF_ERROR(need_sm90a("attention (KERNELKIT_TUNE attn_wgmma=1)"));
#if KERNELKIT_HAS_SM90A
  return flash_prefill_wgmma_launch(a, tile, stream);
#else
  (void)a, (void)tile, (void)stream;
  return unsupported("attention (wgmma): not built");
#endif
}

}  // namespace kernelkit::cuda
