kk_tests(CPU test_activation.cpp GPU test_activation_gpu.cpp)
