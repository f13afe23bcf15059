// Host entries of attention and decode_attention on CUDA (kernels follow in the next commits).
#include "core/attention.hpp"

namespace kernelkit::detail {
Status attention_cuda(const AttentionArgs&, Stream) { return unsupported("attention: CUDA kernel not built yet"); }
Status decode_attention_cuda(const DecodeArgs&, Stream) {
  return unsupported("decode_attention: CUDA kernel not built yet");
}
}  // namespace kernelkit::detail
