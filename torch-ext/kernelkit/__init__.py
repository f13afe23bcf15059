"""kernelkit: fused inference kernels for T4, A100 and H100/H200, as PyTorch custom ops.

Every function takes tensors on the CPU (the fp64-accumulating reference, one rounding per output) or on a CUDA device
(the kernels, on the current stream), with fp32 accumulation for float32, float16 and bfloat16 inputs (no bfloat16 on a
T4). Each is a registered op (`torch.ops.kernelkit.*`) with a fake implementation, so torch.compile(fullgraph=True) and
CUDA graphs work. `out` (destination-passing) is allocated when not given.
"""
from __future__ import annotations

from typing import Optional

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["rms_norm", "fused_add_rms_norm", "layer_norm", "ada_layer_norm", "rms_norm_gelu", "gelu", "gelu_tanh",
           "silu", "silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul", "geglu", "swiglu", "gelu_tanh_mul", "rotary_embedding", "softmax", "attention", "decode_attention",
           "quantize_weight", "linear_weight_only", "quantize", "info", "ops", "patch", "unpatch", "kernel_mapping",
           "mark_for_kernelize", "layers", "nn"]

_OPS = ("rms_norm", "fused_add_rms_norm", "layer_norm", "ada_layer_norm", "rms_norm_gelu", "activation", "act_and_mul",
        "act_mul", "rotary_embedding_", "rotary_embedding_cos_sin_", "softmax", "attention", "decode_attention",
        "quantize_weight", "linear_weight_only", "quantize_per_token", "linear_w8a8")


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x itself when its leading dims collapse to one row stride with a contiguous last dim (what the ops take),
    else a contiguous copy (e.g. the [batch, heads, seq, head_dim] transposed views attention code normalizes)."""
    expect = None
    for d in range(x.dim() - 2, -1, -1):
        if x.shape[d] == 1:
            continue
        if expect is not None and x.stride(d) != expect:
            return x.contiguous()
        expect = x.stride(d) * x.shape[d]
    return x if x.dim() == 0 or x.shape[-1] == 1 or x.stride(-1) == 1 else x.contiguous()


def _out_for(x: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else out


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6,
             out: Optional[torch.Tensor] = None, weight_offset: float = 0.0) -> torch.Tensor:
    """y = x / sqrt(mean(x^2, dim=-1) + eps) * (weight_offset + weight).

    `weight` may be None (diffusers' elementwise_affine=False); weight_offset=1 gives Gemma's (1 + weight).
    """
    x = _rows(x)
    out = _out_for(x, out)
    ops.rms_norm(out, x, weight, eps, weight_offset)
    return out


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor] = None,
                       eps: float = 1e-6, weight_offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """In place, vLLM semantics: residual = x + residual (rounded to the dtype); x = rms_norm(residual, weight, eps).

    Returns (x, residual).
    """
    ops.fused_add_rms_norm(x, residual, weight, eps, weight_offset)
    return x, residual


def layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased variance, as torch)."""
    x = _rows(x)
    out = _out_for(x, out)
    ops.layer_norm(out, x, weight, bias, eps)
    return out


def ada_layer_norm(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, weight: Optional[torch.Tensor] = None,
                   bias: Optional[torch.Tensor] = None, eps: float = 1e-6,
                   out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """DiT / LTX-Video modulation: y = layer_norm(x) * (1 + scale[b]) + shift[b].

    x: [batch, seq, hidden]; scale, shift: [batch, hidden].
    """
    x = _rows(x)
    out = _out_for(x, out)
    ops.ada_layer_norm(out, x, scale, shift, weight, bias, eps)
    return out


def rms_norm_gelu(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6,
                  out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = gelu_tanh(rms_norm(x) * weight), fused (no intermediate rounding)."""
    x = _rows(x)
    out = _out_for(x, out)
    ops.rms_norm_gelu(out, x, weight, eps)
    return out


def _activation(name: str):
    def fn(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = _rows(x)
        out = _out_for(x, out)
        ops.activation(out, x, name)
        return out

    return fn


gelu = _activation("gelu")
gelu.__doc__ = "y = x * Phi(x) (exact, erf)."
gelu_tanh = _activation("gelu_tanh")
gelu_tanh.__doc__ = "y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."
silu = _activation("silu")
silu.__doc__ = "y = x * sigmoid(x)."


def _act_and_mul(name: str):
    def fn(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = _rows(x)
        if out is None:
            out = x.new_empty(x.shape[:-1] + (x.shape[-1] // 2,))
        ops.act_and_mul(out, x, name)
        return out

    return fn


silu_and_mul = _act_and_mul("silu")
silu_and_mul.__doc__ = "x: [..., 2d] -> silu(x[..., :d]) * x[..., d:] (SwiGLU; vLLM / HF activation convention)."
gelu_and_mul = _act_and_mul("gelu")
gelu_and_mul.__doc__ = "x: [..., 2d] -> gelu(x[..., :d]) * x[..., d:]."
gelu_tanh_and_mul = _act_and_mul("gelu_tanh")
gelu_tanh_and_mul.__doc__ = "x: [..., 2d] -> gelu_tanh(x[..., :d]) * x[..., d:]."


def _act_mul(name: str):
    def fn(a: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        a, b = _rows(a), _rows(b)
        out = _out_for(a, out)
        ops.act_mul(out, a, b, name)
        return out

    return fn


geglu = _act_mul("gelu")
geglu.__doc__ = "y = gelu(a) * b with separate tensors (GEGLU)."
swiglu = _act_mul("silu")
swiglu.__doc__ = "y = silu(a) * b with separate tensors (a Llama MLP's silu(gate) * up)."
gelu_tanh_mul = _act_mul("gelu_tanh")
gelu_tanh_mul.__doc__ = "y = gelu_tanh(a) * b with separate tensors (a Gemma MLP's gelu_tanh(gate) * up)."


def softmax(x: torch.Tensor, scale: float = 1.0, causal: bool = False,
            out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = softmax(scale * x) over the last dim, fp32 statistics; a row that is all -inf gives zeros (not NaN).

    causal=True: x is attention scores [..., s_q, s_k]; query i sees keys j <= i + s_k - s_q (bottom-right aligned),
    masked entries are 0.
    """
    x = _rows(x)
    out = _out_for(x, out)
    ops.softmax(out, x, scale, causal)
    return out


def rotary_embedding(q: torch.Tensor, k: torch.Tensor, positions: Optional[torch.Tensor] = None,
                     cos_sin_cache: Optional[torch.Tensor] = None, cos: Optional[torch.Tensor] = None,
                     sin: Optional[torch.Tensor] = None, rot_dim: Optional[int] = None, style: str = "neox",
                     inplace: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position embedding of q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim] (strided views of a
    fused qkv projection are fine): each rotated pair (x_i, x_j) becomes (x_i cos - x_j sin, x_j cos + x_i sin).

    cos/sin come either from `cos_sin_cache` [max_position, rot_dim] (cos in the first half) indexed by `positions`
    [tokens] (vLLM / FlashInfer), or from per-token `cos`, `sin` [tokens, rot_dim/2 or rot_dim] (HF, and 3D video RoPE).
    style: "neox" pairs (i, i + rot_dim/2) (rotate_half), "gptj" pairs (2i, 2i + 1). Partial rotary when rot_dim <
    head_dim. In place by default; inplace=False rotates copies. Returns (q, k).
    """
    if style not in ("neox", "gptj"):
        raise ValueError(f"rotary_embedding: style must be 'neox' or 'gptj', got {style!r}")
    if not inplace:
        q, k = q.clone(), k.clone()
    neox = style == "neox"
    if cos_sin_cache is not None:
        if positions is None:
            raise ValueError("rotary_embedding: cos_sin_cache needs positions")
        ops.rotary_embedding_(positions, q, k, cos_sin_cache, neox)
    else:
        if cos is None or sin is None:
            raise ValueError("rotary_embedding: pass cos_sin_cache and positions, or cos and sin")
        ops.rotary_embedding_cos_sin_(q, k, cos, sin, rot_dim if rot_dim is not None else q.shape[-1], neox)
    return q, k


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: Optional[float] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
              cu_seqlens_k: Optional[torch.Tensor] = None, return_lse: bool = False):
    """out = softmax(scale q k^T [causal]) v, FlashAttention-style (float16 / bfloat16; head_dim 64, 128 or 256).

    q [b, s_q, h, d], k and v [b, s_k, h_kv, d] with h % h_kv == 0 (GQA / MQA); any strides with a contiguous last dim
    (so a [b, h, s, d] tensor passes as .transpose(1, 2)). causal: query i sees keys j <= i + s_k - s_q (bottom-right).
    Packed variable lengths: q [total_q, h, d], k, v [total_k, h_kv, d] with int32 cu_seqlens_q / cu_seqlens_k
    [batch + 1]. scale defaults to 1 / sqrt(d). Returns out, or (out, lse) with lse float32 [b, h, s_q]
    ([h, total_q] when packed), the natural-log sum of exp of each query's scaled scores (-inf where it sees no key).
    """
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = None
    if return_lse:
        shape = (q.shape[1], q.shape[0]) if cu_seqlens_q is not None else (q.shape[0], q.shape[2], q.shape[1])
        lse = torch.empty(shape, dtype=torch.float32, device=q.device)
    ops.attention(out, lse, q, k, v, 0.0 if scale is None else scale, causal, cu_seqlens_q, cu_seqlens_k)
    return (out, lse) if return_lse else out


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_table: Optional[torch.Tensor] = None, seqlens_k: Optional[torch.Tensor] = None,
                     causal: bool = False, scale: Optional[float] = None, return_lse: bool = False):
    """Decode attention: q [b, s_q, h, d] (a few new tokens per sequence) against a KV cache, split across blocks.

    Contiguous cache: k_cache, v_cache [b, capacity, h_kv, d]. Paged: [num_pages, 16, h_kv, d] with an int32
    block_table [b, max_pages]. seqlens_k int32 [b]: the valid keys of each sequence (required when paged; default:
    the whole capacity). causal: the s_q queries are the last s_q positions of their sequence. Returns out, or
    (out, lse) with lse float32 [b, h, s_q].
    """
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device) if return_lse else None
    ops.decode_attention(out, lse, q, k_cache, v_cache, block_table, seqlens_k, 0.0 if scale is None else scale,
                         causal)
    return (out, lse) if return_lse else out


def quantize_weight(w: torch.Tensor, bits: int = 8, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric weight quantization of w [n, k] (an nn.Linear weight) for `linear_weight_only`.

    bits=8: per output channel, returns (int8 [n, k], float32 scales [n]). bits=4: group-wise (group 64 or 128),
    returns (uint8 [n, k / 2] in kernelkit's interleaved INT4 layout, float32 scales [n, k / group]). w = q * s.
    """
    n, k = w.shape
    if bits == 8:
        q = torch.empty((n, k), dtype=torch.int8, device=w.device)
        s = torch.empty((n,), dtype=torch.float32, device=w.device)
    elif bits == 4:
        q = torch.empty((n, k // 2), dtype=torch.uint8, device=w.device)
        s = torch.empty((n, k // group if group > 0 else 0), dtype=torch.float32, device=w.device)
    else:
        raise ValueError(f"quantize_weight: bits must be 8 or 4, got {bits}")
    ops.quantize_weight(q, s, w, bits, group if bits == 4 else 0)
    return q, s


def linear_weight_only(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, bits: int, group: int = 0,
                       bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = x @ dequant(qweight)^T (+ bias) with fp32 accumulation: W8A16 (bits=8) or W4A16 (bits=4, group 64/128).

    x [..., k] float16 / bfloat16; qweight and scales from `quantize_weight`. On CUDA: a GEMV for 1-2 tokens, tensor
    cores from 3 on (any count).
    """
    lead = x.shape[:-1]
    x2 = _rows(x.reshape(-1, x.shape[-1]))
    out = torch.empty((x2.shape[0], qweight.shape[0]), dtype=x.dtype, device=x.device)
    ops.linear_weight_only(out, x2, qweight, scales, bits, group if bits == 4 else 0, bias)
    return out.reshape(*lead, qweight.shape[0])


def quantize_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token INT8 activations: s[t] = max|x[t, :]| / 127, q = round(x / s) (half to even), for x [m, k].

    Returns (int8 [m, k], float32 scales [m]); x = q * s[:, None] up to half a step. The activation side of
    `linear_w8a8`.
    """
    x2 = _rows(x)
    q = torch.empty(x2.shape, dtype=torch.int8, device=x.device)
    s = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
    ops.quantize_per_token(q, s, x2)
    return q, s


def linear_w8a8(xq: torch.Tensor, x_scales: torch.Tensor, qweight: torch.Tensor, w_scales: torch.Tensor,
                bias: Optional[torch.Tensor] = None, out_dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """y = (xq @ qweight^T, exact int32) * x_scales[:, None] * w_scales (+ bias), rounded once to out_dtype.

    xq int8 [m, k] and x_scales from `quantize_per_token`; qweight int8 [n, k] and w_scales from
    `quantize_weight(w, 8)`; k % 16 == 0. CUDA: INT8 tensor cores (sm_75 and later); CPU: the reference.
    """
    out = torch.empty((xq.shape[0], qweight.shape[0]), dtype=out_dtype, device=xq.device)
    ops.linear_w8a8(out, _rows(xq), x_scales, qweight, w_scales, bias)
    return out


def info() -> dict:
    """What this build of kernelkit sees: the library path, torch's view of CUDA, and the registered ops."""
    from ._ops import _LIB

    return {
        "library": str(_LIB),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "ops": sorted(_OPS),
    }


# Fake (meta) implementations: every op writes into tensors it was given and returns nothing, so there is no output
# to describe; registering them lets torch.compile trace the ops without running them.
def _register_fakes() -> None:
    def nothing(*args, **kwargs):
        return None

    for name in _OPS:
        torch.library.register_fake(add_op_namespace_prefix(name))(nothing)


_register_fakes()

from . import layers  # noqa: E402  (layers use the functions above)
from .patch import kernel_mapping, mark_for_kernelize, patch, unpatch  # noqa: E402
from . import nn  # noqa: E402
from .nn import quantize  # noqa: E402
