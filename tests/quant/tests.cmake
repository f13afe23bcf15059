# test_quant_dequant.cu runs the GEMV's dequantization helpers on the host (nvcc compiles it for the host).
kk_tests(CPU test_quant.cpp CPU_CUDA test_quant_dequant.cu GPU test_quant_gpu.cpp)
