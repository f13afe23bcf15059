"""Quantized linear layers on kernelkit's kernels (weight-only W8A16 / W4A16, W8A8 with dynamic per-token INT8
activations, and FP8 with dynamic per-token e4m3 activations), `quantize(model)` for transformers, and the layers of
downloaded GPTQ / AWQ checkpoints (`from_gptq`, `from_awq`, `load_quantized` / `load_checkpoint` for a whole model)."""
from __future__ import annotations

from collections import Counter
from typing import Optional

import torch
from torch import nn

from . import formats, linear_fp8, linear_w8a8, linear_weight_only, quantize_per_token, quantize_weight


class _Float32Scales(nn.Module):
    """Keeps the buffers the kernels read in their dtypes (float32 scales; FP8 weights, which torch counts as floating
    point) through model.half() / .to(dtype): they move with the module's device, never to another dtype."""

    _keep_dtype = ("scales", "qweight")

    def _apply(self, fn, recurse=True):
        keep = {n: b for n in self._keep_dtype if (b := self._buffers.get(n)) is not None}
        super()._apply(fn, recurse)
        for n, b in keep.items():
            if self._buffers[n].dtype != torch.float32:
                self._buffers[n] = b.to(self._buffers[n].device)
        return self


def _int4_shape(layer: str, out_features: int, in_features: int) -> None:
    """Refuses weights the INT4 layout cannot hold (kernelkit.formats: whole 16-row x 64-input tiles)."""
    if out_features % 16 or in_features % 64:
        raise ValueError(f"{layer}: INT4 weights need out_features a multiple of 16 and in_features a multiple of 64, "
                         f"got out_features {out_features}, in_features {in_features}: pad the weight with zero rows / "
                         "columns (and x with zeros) to those multiples, or keep the layer in 8 bits")


class _QuantLinear(_Float32Scales):
    """y = x @ dequant(q)^T + b for float16 / bfloat16 activations; built from an nn.Linear with `from_linear`."""

    bits = 0

    def __init__(self, in_features: int, out_features: int, group: int = 0):
        super().__init__()
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.register_buffer("qweight", torch.empty(0, dtype=torch.int8))
        self.register_buffer("scales", torch.empty(0, dtype=torch.float32))
        self.bias = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, group: int = 128) -> "_QuantLinear":
        if cls.bits == 4:
            _int4_shape(cls.__name__, linear.out_features, linear.in_features)
        layer = cls(linear.in_features, linear.out_features, group if cls.bits == 4 else 0)
        with torch.no_grad():
            layer.qweight, layer.scales = quantize_weight(linear.weight.detach(), cls.bits, group)
            if linear.bias is not None:
                layer.bias = nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return linear_weight_only(x, self.qweight, self.scales, self.bits, self.group, bias)

    def extra_repr(self) -> str:
        g = f", group={self.group}" if self.bits == 4 else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}{g}"


class Int8Linear(_QuantLinear):
    """W8A16: int8 weights with one float32 scale per output channel."""

    bits = 8


class Int4Linear(_QuantLinear):
    """W4A16: int4 weights (kernelkit's INT4 layout, kernelkit.formats) with a float32 scale per group of 64 or 128
    inputs; out_features % 16 == 0 and in_features % 64 == 0."""

    bits = 4


class W8A8Linear(_QuantLinear):
    """W8A8: int8 weights (one scale per output channel) times int8 activations quantized per token on the fly, on
    INT8 tensor cores; the output keeps the activations' dtype. For prefill-sized inputs (the INT8 GEMM's regime)."""

    bits = 8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        xq, sx = quantize_per_token(x.reshape(-1, x.shape[-1]))
        y = linear_w8a8(xq, sx, self.qweight, self.scales, bias, out_dtype=x.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, weights int8, activations int8"


class Fp8Linear(_QuantLinear):
    """FP8 (sm_89+): e4m3 weights with one float32 scale per output channel times e4m3 activations quantized per token
    on the fly (vLLM's dynamic per-token scheme), through cuBLASLt's FP8 matmul with both scales fused
    (`linear_fp8`); the output keeps the activations' dtype. in_features % 16 == 0, out_features % 8 == 0."""

    bits = 8

    @classmethod
    def from_linear(cls, linear: nn.Linear, group: int = 128) -> "Fp8Linear":
        if linear.in_features % 16 or linear.out_features % 8:
            raise ValueError(f"Fp8Linear: in_features {linear.in_features} must be a multiple of 16 and out_features "
                             f"{linear.out_features} of 8 (16-byte FP8 rows for cuBLASLt)")
        layer = cls(linear.in_features, linear.out_features, 0)
        with torch.no_grad():
            layer.qweight, layer.scales = quantize_per_token(linear.weight.detach(), dtype=torch.float8_e4m3fn)
            if linear.bias is not None:
                layer.bias = nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        xq, sx = quantize_per_token(x.reshape(-1, x.shape[-1]), dtype=torch.float8_e4m3fn)
        y = linear_fp8(xq, sx, self.qweight, self.scales, bias, out_dtype=x.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, weights e4m3, activations e4m3"


class ZeroPointLinear(_Float32Scales):
    """W4A16 / W8A16 from a GPTQ or AWQ checkpoint: b-bit values q in [0, 2^b) with a zero point z and a scale s per
    group of inputs, w = s (q - z); built with `from_gptq` / `from_awq` (kernelkit.formats reads the stored tensors).

    Repacked once: q - 2^(b-1) in kernelkit's signed layout (INT4: the fragment-ordered layout of kernelkit.formats,
    which needs out_features % 16 == 0 and in_features % 64 == 0; INT8 as it is) with the checkpoint's scales and the
    zero points z - 2^(b-1) as int8 (none for symmetric checkpoints, where z = 2^(b-1)), which the kernels subtract
    exactly while dequantizing: one `linear_weight_only` call. Act-order checkpoints (g_idx) have k permuted once so
    each group is contiguous, and the op gathers x to match (its `perm`). Groups of any multiple of 32 inputs, or one
    per output channel (k a multiple of 32)."""

    def __init__(self, in_features: int, out_features: int, bits: int, group: int):
        super().__init__()
        self.in_features, self.out_features, self.bits, self.group = in_features, out_features, bits, group
        self.register_buffer("qweight", torch.empty(0, dtype=torch.uint8 if bits == 4 else torch.int8))
        self.register_buffer("scales", torch.empty(0, dtype=torch.float32))
        self.register_buffer("zeros", None)  # int8 [n, k / group]: z - 2^(bits-1); None when symmetric
        self.register_buffer("perm", None)  # act-order, int32 [k]: x[..., perm] is what the repacked weights expect
        self.bias = None

    @classmethod
    def from_weights(cls, w: "formats.IntWeights", bias: Optional[torch.Tensor] = None) -> "ZeroPointLinear":
        n, k = w.q.shape
        if w.bits == 4:
            _int4_shape("ZeroPointLinear", n, k)
        groups = w.scales.shape[1]
        size = k // groups
        g_idx = w.g_idx.to(w.q.device)
        perm = None
        if not torch.equal(g_idx, torch.arange(k, device=g_idx.device) // size):
            perm = torch.argsort(g_idx, stable=True)
            counts = torch.bincount(g_idx, minlength=groups)
            if not torch.equal(counts, torch.full((groups,), size, device=g_idx.device)):
                raise ValueError(f"ZeroPointLinear: g_idx must give every group {size} inputs")
        # The kernels' groups are 32, 64 or 128 inputs: a checkpoint group that is a multiple (256, or one per output
        # channel) repeats its scale and zero over the kernel's groups inside it.
        group = next((g for g in (128, 64, 32) if size % g == 0), None)
        if group is None:
            raise ValueError(f"ZeroPointLinear: groups of {size} inputs are not supported (a multiple of 32: 32, 64, "
                             "128, 256, ..., or one per output channel)")
        repeat, mid = size // group, 1 << (w.bits - 1)
        zeros = w.zeros.to(torch.int16).repeat_interleave(repeat, dim=1) - mid
        if bool((zeros > 127).any()):
            r, g = (zeros > 127).nonzero()[0].tolist()
            raise ValueError(f"ZeroPointLinear: row {r} group {g * group // size} has zero point "
                             f"{int(zeros[r, g]) + mid}, past the {w.bits}-bit codes' range (a GPTQ checkpoint storing "
                             "zero - 1 of a zero of 0)")
        layer = cls(k, n, w.bits, group)
        q = (w.q if perm is None else w.q[:, perm]).to(torch.int16) - mid
        layer.qweight = formats.pack_int4(q.to(torch.int8)) if w.bits == 4 else q.to(torch.int8).contiguous()
        layer.scales = w.scales.float().repeat_interleave(repeat, dim=1).contiguous()
        if bool((zeros != 0).any()):
            layer.zeros = zeros.to(torch.int8).contiguous()
        layer.perm = None if perm is None else perm.to(torch.int32)
        if bias is not None:
            layer.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return linear_weight_only(x, self.qweight, self.scales, self.bits, self.group, bias, self.zeros, self.perm)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}, "
                f"group={self.group}, zero points={'yes' if self.zeros is not None else 'no (symmetric)'}, "
                f"act-order={'yes' if self.perm is not None else 'no'}")


def from_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, g_idx: Optional[torch.Tensor] = None,
              bias: Optional[torch.Tensor] = None, bits: int = 4, group: int = 128,
              checkpoint_format: str = "gptq") -> ZeroPointLinear:
    """A GPTQ layer's checkpoint tensors (kernelkit.formats; bits 4 or 8) -> a ZeroPointLinear on kernelkit's W4A16 /
    W8A16 kernels."""
    return ZeroPointLinear.from_weights(
        formats.unpack_gptq(qweight, qzeros, scales, g_idx, bits, group, checkpoint_format), bias)


def from_awq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, bias: Optional[torch.Tensor] = None,
             group: int = 128) -> ZeroPointLinear:
    """An AWQ (GEMM) layer's checkpoint tensors (kernelkit.formats) -> a ZeroPointLinear (W4A16)."""
    return ZeroPointLinear.from_weights(formats.unpack_awq(qweight, qzeros, scales, group), bias)


def _linears(model: nn.Module):
    """(parent module, attribute name, full name, layer) of every plain nn.Linear of `model`, listed before any is
    replaced."""
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                yield module, child_name, f"{name}.{child_name}" if name else child_name, child


def load_quantized(model: nn.Module, tensors: dict, quantization_config: dict) -> dict:
    """Replaces each nn.Linear of `model` whose `<name>.qweight` is in `tensors` (the state dict of a GPTQ or AWQ
    checkpoint, e.g. safetensors.torch.load_file of its shards) by a ZeroPointLinear built from that layer's
    tensors, on the linear's device. `quantization_config`: the checkpoint's (config.json): quant_method "gptq" or
    "awq" (AWQ's GEMM version), bits (4, or 8 for GPTQ), group_size, and GPTQ's checkpoint_format ("gptq" or
    "gptq_v2"). The model is built from the checkpoint's config as an ordinary (unquantized) model first; its other
    weights load from `tensors` as usual. Returns {"replaced": count, "layers": their names, ...}."""
    method = quantization_config.get("quant_method")
    bits, group = quantization_config.get("bits", 4), quantization_config.get("group_size", 128)
    if method not in ("gptq", "awq"):
        raise ValueError(f"load_quantized: quant_method must be 'gptq' or 'awq', got {method!r}")
    if method == "awq" and str(quantization_config.get("version", "gemm")).lower() != "gemm":
        raise ValueError(f"load_quantized: AWQ version {quantization_config['version']!r} is not supported (gemm)")
    replaced = []
    for module, child_name, full, child in _linears(model):
        if f"{full}.qweight" not in tensors:
            continue
        t = {key: tensors.get(f"{full}.{key}") for key in ("qweight", "qzeros", "scales", "g_idx", "bias")}
        if method == "awq" and bits != 4:
            raise ValueError(f"load_quantized: AWQ bits must be 4, got {bits}")
        try:
            if method == "gptq":
                layer = from_gptq(t["qweight"], t["qzeros"], t["scales"], t["g_idx"], t["bias"], bits, group,
                                  quantization_config.get("checkpoint_format", "gptq"))
            else:
                layer = from_awq(t["qweight"], t["qzeros"], t["scales"], t["bias"], group)
        except ValueError as e:  # which layer (e.g. an INT4 shape the layout cannot hold)
            raise ValueError(f"load_quantized: {full}: {e}") from e
        if (layer.in_features, layer.out_features) != (child.in_features, child.out_features):
            raise ValueError(f"load_quantized: {full} is [{child.out_features}, {child.in_features}] in the "
                             f"model, [{layer.out_features}, {layer.in_features}] in the checkpoint")
        setattr(module, child_name, layer.to(child.weight.device))
        replaced.append(full)
    return {"replaced": len(replaced), "layers": replaced, "quant_method": method, "bits": bits, "group_size": group}


def load_checkpoint(path, dtype: torch.dtype = torch.float16, device="cpu") -> nn.Module:
    """A GPTQ or AWQ checkpoint directory as downloaded from the Hugging Face hub (config.json with its
    quantization_config, *.safetensors) -> the transformers model with its quantized linears on kernelkit
    (load_quantized) and every other weight from the checkpoint, in `dtype` on `device`, in eval mode."""
    from pathlib import Path

    import transformers
    from safetensors.torch import load_file

    path = Path(path)
    config = transformers.AutoConfig.from_pretrained(path)
    qc = getattr(config, "quantization_config", None)
    if qc is None:
        raise ValueError(f"load_checkpoint: {path / 'config.json'} has no quantization_config")
    qc = qc if isinstance(qc, dict) else qc.to_dict()
    del config.quantization_config  # built as an ordinary model; its linears are replaced below
    shards = sorted(path.glob("*.safetensors"))
    if not shards:
        raise ValueError(f"load_checkpoint: no *.safetensors files in {path}")
    tensors = {}
    for shard in shards:
        tensors.update(load_file(shard, device=str(device)))
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # initialized in `dtype` (half the memory of float32), overwritten below
    try:
        model = transformers.AutoModelForCausalLM.from_config(config).to(device=device, dtype=dtype).eval()
    finally:
        torch.set_default_dtype(default)
    layers = load_quantized(model, tensors, qc)["layers"]
    quant = {f"{name}.{key}" for name in layers for key in ("qweight", "qzeros", "scales", "g_idx")}
    own = {f"{name}.{key}" for name in layers for key in ("qweight", "scales", "zeros", "perm")}
    rest = {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items() if k not in quant}
    missing, unexpected = model.load_state_dict(rest, strict=False)
    missing = [k for k in missing if k not in own]
    if getattr(config, "tie_word_embeddings", False):
        missing = [k for k in missing if k != "lm_head.weight"]
        model.tie_weights()
    if missing or unexpected:
        raise ValueError(f"load_checkpoint: weights missing from the checkpoint {missing[:8]}, not in the model "
                         f"{unexpected[:8]}")
    return model


def _bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))


def quantize(model: nn.Module, bits: int | str = 8, group: int = 128, skip: tuple = ("lm_head",),
             activations: bool = False) -> dict:
    """Replaces every nn.Linear of `model` (except modules whose name ends with an entry of `skip`) in place by
    Int8Linear or Int4Linear (weight-only), with activations=True (bits 8 only) by W8A8Linear, or with bits="fp8" by
    Fp8Linear (e4m3 weights per channel and activations per token; an FP8 GPU, sm_89+). Returns a report: layers
    replaced and the model's parameter + buffer bytes before and after."""
    if bits not in (8, 4, "fp8"):
        raise ValueError(f"quantize: bits must be 8, 4 or \"fp8\", got {bits!r}")
    if activations and bits != 8:
        raise ValueError(f"quantize: activations=True needs bits=8 (W8A8), got bits={bits!r}")
    cls = (Fp8Linear if bits == "fp8" else W8A8Linear if activations else Int8Linear if bits == 8
           else Int4Linear)
    before = _bytes(model)
    replaced = Counter()
    for module, child_name, full, child in _linears(model):
        if not any(full.endswith(s) for s in skip):
            try:
                layer = cls.from_linear(child, group)
            except ValueError as e:  # which layer (e.g. an INT4 shape the layout cannot hold: `skip` it)
                raise ValueError(f"quantize: {full}: {e}") from e
            setattr(module, child_name, layer)
            replaced[cls.__name__] += 1
    return {"replaced": dict(replaced), "bytes_before": before, "bytes_after": _bytes(model)}
