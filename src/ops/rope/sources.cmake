# Rotary position embedding (cos/sin cache + positions, or per-token tables; NeoX and GPT-J pairs).
kk_family(rope
  CORE rope.cpp rope_ref.cpp
  CUDA rope_cuda.cu rope_f32.cu rope_f16.cu rope_bf16.cu
  TESTING rope_cases.cpp rope_bench.cpp)
