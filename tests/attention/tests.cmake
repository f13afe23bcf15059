# test_mma_layout.cu runs the prefill kernels' shared-memory addressing on the host (nvcc compiles it for the host).
kk_tests(CPU test_attention.cpp test_kv_write.cpp CPU_CUDA test_mma_layout.cu GPU test_attention_gpu.cpp)
