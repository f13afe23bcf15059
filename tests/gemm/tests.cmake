kk_tests(CPU test_gemm.cpp GPU test_gemm_gpu.cpp)
