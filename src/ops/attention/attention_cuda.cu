// Host entries of attention and decode_attention on CUDA: device checks, the tile / decode plan of the active profile,
// dtype dispatch (f16 and bf16, and for decode f16 / bf16 or e4m3 caches; the kernels for each are compiled in their
// own files); the prefill over e4m3 k / v through a dequantized temporary (kv_dequant_cuda.cu).
#include <algorithm>
#include <limits>
#include <string>

#include "kernels/common/scratch.hpp"
#include "ops/attention/decode.cuh"
#include "ops/attention/flash_prefill.cuh"
#include "ops/attention/flash_prefill_sm90a.hpp"
#include "runtime/plan_rules.hpp"
#include "runtime/runtime_internal.hpp"
#include "runtime/sm90a.hpp"

namespace kernelkit::cuda {
extern template Status launch_flash_prefill<__half>(const detail::AttentionArgs&, const TilePlan&, cudaStream_t);
extern template Status launch_flash_prefill<__nv_bfloat16>(const detail::AttentionArgs&, const TilePlan&, cudaStream_t);
extern template Status launch_decode<__half>(const detail::DecodeArgs&, const DeviceProfile&, cudaStream_t);
extern template Status launch_decode<__nv_bfloat16>(const detail::DecodeArgs&, const DeviceProfile&, cudaStream_t);
extern template Status launch_decode<__half, true>(const detail::DecodeArgs&, const DeviceProfile&, cudaStream_t);
extern template Status launch_decode<__nv_bfloat16, true>(const detail::DecodeArgs&, const DeviceProfile&,
                                                          cudaStream_t);

namespace {
// The kernels index tokens and grid dimensions in 32 bits.
Status check_limits(const char* op, std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (const auto& [what, v] : sizes)
    if (v > std::numeric_limits<int32_t>::max() || v < 0)
      return unsupported(std::string(op) + ": " + what + " = " + std::to_string(v) + " is above the kernel's limit");
  return Status::Ok();
}
}  // namespace

Status flash_prefill_wgmma(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream, bool* ran) {
  *ran = false;
  KK_RETURN_IF_ERROR(need_sm90a("attention (KERNELKIT_TUNE attn_wgmma)"));
#if KERNELKIT_HAS_SM90A
  return flash_prefill_wgmma_launch(a, tile, stream, ran);
#else
  (void)a, (void)tile, (void)stream;
  return unsupported("attention (wgmma): not built");
#endif
}

}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status attention_cuda(const AttentionArgs& a, Stream stream) {
  KK_RETURN_IF_ERROR(cuda::check_limits("attention", {{"s_q", a.s_q}, {"s_k", a.s_k}}));
  if (a.batch > 65535 || a.heads > 65535)
    return unsupported("attention: batch (" + std::to_string(a.batch) + ") and heads (" + std::to_string(a.heads) +
                       ") must be <= 65535 (grid dimensions)");
  cuda::DeviceGuard guard;
  DeviceProfile prof;
  KK_RETURN_IF_ERROR(cuda::prepare_device(a.op, a.dtype, a.device.index,
                                          {{a.q, "q"},
                                           {a.k, "k"},
                                           {a.v, "v"},
                                           {a.out, "out"},
                                           {a.lse, "lse"},
                                           {a.cu_q, "options.cu_seqlens_q"},
                                           {a.cu_k, "options.cu_seqlens_k"},
                                           {a.alibi, "options.alibi_slopes"},
                                           {a.scales.k, "options.k_scale"},
                                           {a.scales.v, "options.v_scale"}},
                                          &guard, &prof));
  TilePlan tile;
  // Tiles for the kernel's head_dim (a head_dim between its sizes runs on the next one up).
  KK_RETURN_IF_ERROR(plan_tile(prof, TileFamily::attention, a.dtype, attention_plan_head_dim(a.head_dim), &tile,
                               cuda::sm90a_available(a.device.index)));
  // KERNELKIT_TUNE attn_fallback=0: a call the wgmma kernels decline fails instead of taking mma.sync (so that a test
  // or a benchmark knows which kernel it ran); read at every call, so that a bad value fails every call.
  int fallback = 1;
  KK_RETURN_IF_ERROR(plan::tune_value("attn_fallback", 0, 1, &fallback));
  auto prefill = [&](const AttentionArgs& x) -> Status {
    const TilePlan* plan = &tile;
    TilePlan mma_sync;
    if (tile.wgmma) {
      bool ran = false;
      KK_RETURN_IF_ERROR(cuda::flash_prefill_wgmma(x, tile, stream, &ran));
      if (ran) return Status::Ok();
      // Declined (head_dim 192 or 256 where the warp-specialized kernel cannot run): the mma.sync kernel's plan.
      if (!fallback)
        return unsupported("attention: the wgmma kernels declined this call (head_dim " + std::to_string(x.head_dim) +
                           ") and KERNELKIT_TUNE attn_fallback=0 keeps it off the mma.sync kernel");
      const Status st = plan_tile(prof, TileFamily::attention, x.dtype, attention_plan_head_dim(x.head_dim), &mma_sync,
                                  /*sm90a_code=*/false);
      if (!st.ok())
        return Status(st.code(), "attention: head_dim " + std::to_string(x.head_dim) +
                                     " with packed varlen sequences, no keys or strides a TMA descriptor cannot "
                                     "express runs the mma.sync kernel: " +
                                     st.message());
      plan = &mma_sync;
    }
    return cuda::dispatch_half("attention", x.dtype,
                               [&](auto tag) { return cuda::launch_flash_prefill<decltype(tag)>(x, *plan, stream); });
  };
  if (a.kv_dtype == a.dtype) return prefill(a);
  // e4m3 k / v (its kernel traps below sm_89): dequantized into a temporary of q's dtype, contiguous [rows, h_kv, d]
  // for k then v, which the 16-bit prefill reads as it reads any k / v.
  KK_RETURN_IF_ERROR(cuda::check_dtype_code(a.kv_dtype, a.device.index, "attention"));
  const int64_t rows = a.varlen ? a.total_k : a.batch * a.s_k, row = a.kv_heads * a.head_dim;
  const size_t bytes = static_cast<size_t>(rows * row) * dtype_size(a.dtype);
  // At least 16 bytes: the prefill's pointers stay valid ones when there are no keys.
  return cuda::with_stream_scratch(std::max<size_t>(2 * bytes, 16), stream, [&](void* scratch) -> Status {
    AttentionArgs d = a;
    d.k = scratch;
    d.v = static_cast<unsigned char*>(scratch) + bytes;
    d.k_st = d.v_st = {a.varlen ? 0 : a.s_k * row, row, a.head_dim};
    d.kv_dtype = a.dtype;
    d.scales = {};
    KK_RETURN_IF_ERROR(dequantize_kv_cuda(a, prof, scratch, const_cast<void*>(d.v), stream));
    return prefill(d);
  });
}

Status decode_attention_cuda(const DecodeArgs& a, Stream stream) {
  KK_RETURN_IF_ERROR(cuda::check_limits("decode_attention", {{"capacity", a.capacity}, {"s_q", a.s_q}}));
  if (a.batch * a.kv_heads > 65535)
    return unsupported("decode_attention: batch x kv_heads = " + std::to_string(a.batch * a.kv_heads) +
                       " must be <= 65535 (grid dimension)");
  cuda::DeviceGuard guard;
  DeviceProfile prof;
  KK_RETURN_IF_ERROR(cuda::prepare_device(a.op, a.dtype, a.device.index,
                                          {{a.q, "q"},
                                           {a.k, "cache.k"},
                                           {a.v, "cache.v"},
                                           {a.out, "out"},
                                           {a.lse, "lse"},
                                           {a.block_table, "cache.block_table"},
                                           {a.seqlens, "cache.seqlens_k"},
                                           {a.alibi, "options.alibi_slopes"},
                                           {a.scales.k, "cache.k_scale"},
                                           {a.scales.v, "cache.v_scale"}},
                                          &guard, &prof));
  if (a.kv_dtype != a.dtype) {  // an e4m3 cache: its kernels trap below sm_89
    KK_RETURN_IF_ERROR(cuda::check_dtype_code(a.kv_dtype, a.device.index, "decode_attention"));
    return cuda::dispatch_half("decode_attention", a.dtype,
                               [&](auto tag) { return cuda::launch_decode<decltype(tag), true>(a, prof, stream); });
  }
  return cuda::dispatch_half("decode_attention", a.dtype,
                             [&](auto tag) { return cuda::launch_decode<decltype(tag)>(a, prof, stream); });
}

}  // namespace kernelkit::detail
