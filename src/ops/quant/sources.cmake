# Quantization: INT8 / INT4 weight quantizers, per-token INT8 activations, weight-only linear (W8A16 / W4A16: GEMV and
# tensor cores), W8A8 linear (cuBLASLt INT8 or our tiles) and FP8 linear (cuBLASLt FP8).
kk_family(quant
  CORE quant.cpp quant_plan.cpp quant_ref.cpp
  CUDA quantize_cuda.cu linear_cuda.cu linear_f16.cu linear_bf16.cu w8a8_cuda.cu linear_fp8_cuda.cpp
  TESTING quant_cases.cpp)
