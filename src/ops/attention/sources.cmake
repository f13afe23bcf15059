# attention (prefill: mma.sync on sm_75 / sm_80 / sm_90, wgmma + TMA on sm_90a) and decode_attention (split-KV over a
# contiguous or paged cache), write_kv_cache (new keys and values into their cache slots, RoPE fused).
kk_family(attention
  CORE attention.cpp attention_plan.cpp attention_ref.cpp
  CUDA attention_cuda.cu flash_prefill_f16.cu flash_prefill_bf16.cu decode_f16.cu decode_bf16.cu
    decode_fp8_f16.cu decode_fp8_bf16.cu kv_write_cuda.cu kv_dequant_cuda.cu
  SM90A flash_prefill_sm90a.cu
  TESTING attention_cases.cpp)
