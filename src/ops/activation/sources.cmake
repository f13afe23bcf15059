# Activations: gelu, gelu_tanh, silu and their gated forms (one element-wise kernel over the activation functor).
kk_family(activation
  CORE activation.cpp activation_ref.cpp
  CUDA activation_cuda.cu activation_f32.cu activation_f16.cu activation_bf16.cu
  TESTING activation_cases.cpp activation_bench.cpp)
