# Dense linear through cuBLASLt (bias / bias + GELU epilogues, accumulate, TF32 as a switch).
kk_family(gemm
  CORE gemm.cpp gemm_ref.cpp
  CUDA gemm_lt.cpp
  TESTING gemm_cases.cpp)
