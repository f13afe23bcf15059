# The TMA descriptor layout needs the CUDA headers (CPU_CUDA); the wgmma / TMA probes run on an sm_90a GPU.
kk_tests(CPU_CUDA test_tma_desc.cpp GPU test_sm90a_primitives_gpu.cpp)
