kk_tests(CPU test_rope.cpp GPU test_rope_gpu.cpp)
