// Architecture features as named macros, in one place (device code asks for a feature, never for a number).
//   KK_DEVICE_HAS_BF16   bf16 arithmetic/conversions in hardware (sm_80+). The sm_75 build carries no bf16 code.
//   KK_DEVICE_HAS_CP_ASYNC   cp.async global->shared copies (sm_80+).
//   KK_DEVICE_HAS_TMA    bulk tensor copies and mbarrier transactions (sm_90+).
//   KK_DEVICE_HAS_FP8    e4m3 / e5m2 conversions in hardware (sm_89+): the kernels that read or write an e4m3 KV cache
//                        trap below it (their profiles refuse FP8).
//   KK_DEVICE_MAX_THREADS_PER_SM   resident threads an SM (1024 on sm_75; 2048 on sm_80 and sm_90, the builds' other
//                        targets): the bound of a __launch_bounds__ minimum of blocks.
//   KK_DEVICE_HAS_WGMMA  warpgroup MMA (wgmma.mma_async): only code built for the arch-specific target sm_90a, which
//                        nvcc marks with __CUDA_ARCH_FEAT_SM90_ALL (the SM90A sources: their own library, see
//                        CMakeLists).
// On the host pass (no __CUDA_ARCH__) every feature reads as available: host code decides from the profile instead.
#pragma once

#if defined(__CUDA_ARCH__)
#define KK_DEVICE_ARCH __CUDA_ARCH__
#else
#define KK_DEVICE_ARCH 9999
#endif

#define KK_DEVICE_HAS_BF16 (KK_DEVICE_ARCH >= 800)
#define KK_DEVICE_HAS_CP_ASYNC (KK_DEVICE_ARCH >= 800)
#define KK_DEVICE_HAS_TMA (KK_DEVICE_ARCH >= 900)
#define KK_DEVICE_HAS_FP8 (KK_DEVICE_ARCH >= 890)
#define KK_DEVICE_MAX_THREADS_PER_SM (KK_DEVICE_ARCH >= 800 ? 2048 : 1024)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KK_DEVICE_HAS_WGMMA 1
#else
#define KK_DEVICE_HAS_WGMMA 0
#endif
