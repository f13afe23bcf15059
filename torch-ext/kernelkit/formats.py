"""The quantized checkpoint formats people download, read as they are stored in Hugging Face checkpoints, and the CPU
references of their dequantization; `kernelkit.nn.from_gptq` / `from_awq` repack them for the kernels.

GPTQ (AutoGPTQ / optimum, checkpoint_format "gptq"; "gptq_v2" stores the zeros themselves), bits 4 or 8, f = 32 / bits
fields a word:
  qweight int32 [k / f, n]: word [i, c] holds w[k = f i + j, c] in bits j bits .. (j + 1) bits - 1 (packed along k);
  qzeros  int32 [groups, n / f]: word [g, i] holds zero[g, n = f i + j] - 1 in field j (packed along n; the format
          stores zero - 1, so the zero is the stored value + 1);
  scales  float16 [groups, n]; g_idx int32 [k] (optional): the group of input k (act-order: not k // group).
  w[n, k] = scales[g_idx[k], n] * (q[k, n] - zero[g_idx[k], n]).
AWQ (AutoAWQ GEMM), bits 4:
  qweight int32 [k, n / 8] and qzeros int32 [groups, n / 8], packed along n in AWQ's order: bits 4i hold column
          8c + AWQ_ORDER[i]; the zeros are stored as they are;
  scales  float16 [groups, n]; w[n, k] = scales[k // group, n] * (q[k, n] - zero[k // group, n]).

kernelkit's INT4 layout, which `pack_int4` writes, `quantize_weight(w, bits=4)` returns and every INT4 kernel reads
(include/kernelkit/ops/quant.hpp is the authoritative description): uint8 [n, k / 2] for n % 16 == 0 and k % 64 == 0.
  words: the values of row r at k = 8i .. 8i + 7 form the little-endian 32-bit word i of the row, value j (signed,
         two's complement) in the nibble at bit 4 P(j), P = (0, 4, 1, 5, 2, 6, 3, 7);
  order: fragment-ordered tiles [n / 16 row tiles][k / 64 regions][32 lanes][16 bytes]: with tile = r // 16,
         h = (r % 16) // 8, g = r % 8, R = i // 8, t = (i % 8) // 2, w = i % 2, word i of row r sits at byte offset
         ((tile * (k / 64) + R) * 32 + 4 g + t) * 16 + 8 h + 4 w; lane 4g + t's 16 bytes are words 8R + 2t, 8R + 2t + 1
         of row 16 tile + g, then the same words of row 16 tile + g + 8.
  So a GPU lane's share of a 16-row x 64-input tensor-core fragment is one 16-byte load and a warp's is 512 contiguous
  bytes. The layout does not depend on the scale group.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of an AWQ word holds column AWQ_ORDER[i] of its 8


class IntWeights(NamedTuple):
    """A checkpoint's integer weights unpacked, in nn.Linear's orientation: q [n, k] in [0, 2^bits) (uint8), zeros
    [n, groups] (int16: GPTQ's stored + 1 can reach 2^bits), scales [n, groups] float32, group of each input k (int64
    [k]), bits (4 or 8)."""
    q: torch.Tensor
    zeros: torch.Tensor
    scales: torch.Tensor
    g_idx: torch.Tensor
    bits: int = 4


def _fields(words: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """int32 [..., w] -> uint8 [..., (32 / bits) w]: the bit fields of each word, bits 0.. first."""
    shifts = torch.arange(0, 32, bits, device=words.device, dtype=torch.int32)
    return ((words[..., None] >> shifts) & ((1 << bits) - 1)).to(torch.uint8).flatten(-2)


def _check(name: str, t: torch.Tensor, dtype, shape) -> None:
    if t.dtype != dtype:
        raise ValueError(f"{name}: must be {dtype}, got {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: shape {list(t.shape)} must be {list(shape)}")


def unpack_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
                g_idx: Optional[torch.Tensor] = None, bits: int = 4, group: int = 128,
                checkpoint_format: str = "gptq") -> IntWeights:
    """GPTQ tensors (see the module docstring) -> IntWeights. group -1: one group (per output channel).
    checkpoint_format "gptq_v2" (GPTQModel's): the zeros are stored as they are, not as zero - 1."""
    if checkpoint_format not in ("gptq", "gptq_v2"):
        raise ValueError(f"unpack_gptq: checkpoint_format must be 'gptq' or 'gptq_v2', got {checkpoint_format!r}")
    if bits not in (4, 8):
        raise ValueError(f"unpack_gptq: bits must be 4 or 8, got {bits}")
    f = 32 // bits  # fields a word
    if qweight.dim() != 2:
        raise ValueError(f"unpack_gptq: qweight must be int32 [k / {f}, n], got shape {list(qweight.shape)}")
    k, n = qweight.shape[0] * f, qweight.shape[1]
    groups = 1 if group == -1 else k // group if group > 0 and k % group == 0 else None
    if groups is None:
        raise ValueError(f"unpack_gptq: group must divide k = {k} (or be -1), got {group}")
    _check("unpack_gptq: qweight", qweight, torch.int32, (k // f, n))
    _check("unpack_gptq: qzeros", qzeros, torch.int32, (groups, n // f))
    _check("unpack_gptq: scales", scales, scales.dtype, (groups, n))
    q = _fields(qweight.t().contiguous(), bits)  # [n, k]: word column c's fields are k = f i + j
    zeros = _fields(qzeros, bits).to(torch.int16) + (checkpoint_format == "gptq")  # [groups, n]
    if g_idx is None:
        g_idx = torch.arange(k, device=qweight.device) // (k // groups)
    else:
        _check("unpack_gptq: g_idx", g_idx, g_idx.dtype, (k,))
        g_idx = g_idx.to(torch.int64)
        if bool((g_idx < 0).any()) or bool((g_idx >= groups).any()):
            raise ValueError(f"unpack_gptq: g_idx values must be groups in [0, {groups})")
    return IntWeights(q, zeros.t().contiguous(), scales.t().float().contiguous(), g_idx, bits)


def unpack_awq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group: int = 128) -> IntWeights:
    """AWQ GEMM tensors (see the module docstring) -> IntWeights (bits 4)."""
    if qweight.dim() != 2:
        raise ValueError(f"unpack_awq: qweight must be int32 [k, n / 8], got shape {list(qweight.shape)}")
    k, n = qweight.shape[0], qweight.shape[1] * 8
    if group <= 0 or k % group:
        raise ValueError(f"unpack_awq: group must divide k = {k}, got {group}")
    _check("unpack_awq: qweight", qweight, torch.int32, (k, n // 8))
    _check("unpack_awq: qzeros", qzeros, torch.int32, (k // group, n // 8))
    _check("unpack_awq: scales", scales, scales.dtype, (k // group, n))
    # Nibble i of word c is column 8c + AWQ_ORDER[i]: put each nibble back in its column.
    where = torch.tensor(AWQ_ORDER, device=qweight.device)
    natural = torch.argsort(where)  # natural column j is nibble natural[j]

    def columns(words):
        nib = _fields(words).unflatten(-1, (-1, 8))
        return nib[..., natural].flatten(-2)

    q = columns(qweight).t().contiguous()  # [n, k]
    zeros = columns(qzeros).to(torch.int16).t().contiguous()  # [n, groups]
    g_idx = torch.arange(k, device=qweight.device) // group
    return IntWeights(q, zeros, scales.t().float().contiguous(), g_idx)


def dequantize(w: IntWeights) -> torch.Tensor:
    """The CPU reference: w[n, k] = scales[n, g_idx[k]] * (q[n, k] - zeros[n, g_idx[k]]) in float64."""
    s = w.scales.double()[:, w.g_idx]
    z = w.zeros.double()[:, w.g_idx]
    return s * (w.q.double() - z)


# The bit of value j's nibble in a word of the INT4 layout: 4 P(j), P = (0, 4, 1, 5, 2, 6, 3, 7).
_INT4_SHIFTS = (0, 16, 4, 20, 8, 24, 12, 28)


def _int4_shape(name: str, n: int, k: int) -> None:
    if n % 16 or k % 64:
        raise ValueError(f"{name}: INT4 weights [n, k] need n a multiple of 16 and k a multiple of 64 (pad them), "
                         f"got n = {n}, k = {k}")


def pack_int4(values: torch.Tensor) -> torch.Tensor:
    """values [n, k] (an integer dtype, in [-8, 7]; n % 16 == 0, k % 64 == 0) -> uint8 [n, k / 2] in kernelkit's INT4
    layout (the module docstring), on values' device."""
    if values.dim() != 2:
        raise ValueError(f"pack_int4: values must be [n, k], got shape {list(values.shape)}")
    n, k = values.shape
    _int4_shape("pack_int4: values", n, k)
    if bool((values < -8).any()) or bool((values > 7).any()):
        raise ValueError("pack_int4: values must be in [-8, 7]")
    nib = (values.to(torch.int64) & 0xF).view(n, k // 8, 8)
    shift = torch.tensor(_INT4_SHIFTS, dtype=torch.int64, device=values.device)
    words = (nib << shift).sum(-1)  # [n, k / 8], the row-major words; distinct nibbles: the sum is the OR
    # [tile, h, g, R, t, w] -> [tile, R, g, t, h, w]: the words in layout order.
    words = words.view(n // 16, 2, 8, k // 64, 4, 2).permute(0, 3, 2, 4, 1, 5).reshape(-1)
    return torch.stack([(words >> (8 * b)) & 0xFF for b in range(4)], -1).to(torch.uint8).view(n, k // 2)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of `pack_int4`: uint8 [n, k / 2] in kernelkit's INT4 layout -> int8 [n, k] in [-8, 7]."""
    if packed.dim() != 2 or packed.dtype != torch.uint8:
        raise ValueError(f"unpack_int4: packed must be uint8 [n, k / 2], got {packed.dtype} {list(packed.shape)}")
    n, k = packed.shape[0], 2 * packed.shape[1]
    _int4_shape("unpack_int4: packed", n, k)
    b = packed.to(torch.int64).reshape(-1, 4)
    words = b[:, 0] | b[:, 1] << 8 | b[:, 2] << 16 | b[:, 3] << 24
    # [tile, R, g, t, h, w] -> [tile, h, g, R, t, w]: the row-major words [n, k / 8].
    words = words.view(n // 16, k // 64, 8, 4, 2, 2).permute(0, 4, 2, 1, 3, 5).reshape(n, k // 8, 1)
    shift = torch.tensor(_INT4_SHIFTS, dtype=torch.int64, device=packed.device)
    nib = (words >> shift) & 0xF
    return torch.where(nib >= 8, nib - 16, nib).to(torch.int8).view(n, k)
