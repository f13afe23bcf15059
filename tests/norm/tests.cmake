kk_tests(CPU test_norm.cpp test_norm_errors.cpp GPU test_norm_gpu.cpp)
