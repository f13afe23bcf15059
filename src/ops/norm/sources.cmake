# Normalization: rms_norm, fused_add_rms_norm, layer_norm, ada_layer_norm, rms_norm_gelu (one row-reduction kernel
# template over the variant).
kk_family(norm
  CORE norm.cpp norm_ref.cpp
  CUDA norm_cuda.cu norm_f32.cu norm_f16.cu norm_bf16.cu
  TESTING norm_cases.cpp norm_bench.cpp)
