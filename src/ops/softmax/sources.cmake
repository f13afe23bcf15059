# softmax and causal_softmax over the last dim (one online pass).
kk_family(softmax
  CORE softmax.cpp softmax_ref.cpp
  CUDA softmax_cuda.cu softmax_f32.cu softmax_f16.cu softmax_bf16.cu
  TESTING softmax_cases.cpp softmax_bench.cpp)
