# The TMA and wgmma descriptor layouts need the CUDA headers (CPU_CUDA; the wgmma one is compiled by nvcc for the
# host); the wgmma / TMA probes run on an sm_90a GPU.
kk_tests(CPU_CUDA test_tma_desc.cpp test_wgmma_desc.cu GPU test_sm90a_primitives_gpu.cpp)
