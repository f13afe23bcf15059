kk_tests(CPU test_softmax.cpp GPU test_softmax_gpu.cpp)
