// CUDA error -> Status, naming the call that failed. Host-side only.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernelkit/status.hpp"

#define KK_CUDA_RETURN(call)                                                                             \
  do {                                                                                                   \
    const cudaError_t kk_err_ = (call);                                                                  \
    if (kk_err_ != cudaSuccess) {                                                                        \
      (void)cudaGetLastError(); /* clear a non-sticky error so later launches do not report it */       \
      return ::kernelkit::Status(::kernelkit::StatusCode::cuda_error,                                    \
                                 std::string(#call) + " failed: " + cudaGetErrorString(kk_err_));        \
    }                                                                                                    \
  } while (0)
