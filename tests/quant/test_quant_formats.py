"""GPTQ and AWQ checkpoints as stored: tensors packed here the way each format's own packing code does it (AutoGPTQ's
QuantLinear.pack, AutoAWQ's WQLinear_GEMM.from_linear), read back by kernelkit.formats, and run through
kernelkit.nn.from_gptq / from_awq against a float64 reference of the dequantized weights; fresh random values."""
import pytest
import torch

import kernelkit
from kernelkit import formats
from torch_testing import DEVICES


def to_int32(acc):
    """int64 words in [0, 2^32) -> int32 with the same bits (the formats store unsigned words in int32)."""
    return torch.where(acc >= 2 ** 31, acc - 2 ** 32, acc).to(torch.int32)


def gptq_pack(q, zeros, scales, g_idx, bits=4):
    """q [n, k] in [0, 2^bits), zeros [n, groups] in [1, 2^bits], scales [n, groups] -> GPTQ's qweight, qzeros,
    scales, g_idx (AutoGPTQ, f = 32 / bits fields a word: qweight[i] |= intweight[f i + j] << bits j along k; zeros - 1
    packed along n, masked to the field as its numpy packing does, so a zero of 0 is stored as 2^bits - 1)."""
    n, k = q.shape
    f, mask = 32 // bits, (1 << bits) - 1
    intweight = q.t().to(torch.int64)  # [k, n]
    qweight = torch.zeros(k // f, n, dtype=torch.int64)
    for row in range(k // f):
        for j in range(f):
            qweight[row] |= intweight[row * f + j] << (bits * j)
    stored = (zeros.t().to(torch.int64) - 1) & mask  # [groups, n]
    qzeros = torch.zeros(stored.shape[0], n // f, dtype=torch.int64)
    for col in range(n // f):
        for j in range(f):
            qzeros[:, col] |= stored[:, col * f + j] << (bits * j)
    return to_int32(qweight), to_int32(qzeros), scales.t().half().contiguous(), g_idx.to(torch.int32)


def awq_pack(q, zeros, scales):
    """AutoAWQ: word c of a row holds column 8 c + order[i] in bits 4 i, for qweight [k, n / 8] and qzeros."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]

    def pack(cols):  # [rows, n] -> [rows, n / 8]
        out = torch.zeros(cols.shape[0], cols.shape[1] // 8, dtype=torch.int64)
        for c in range(cols.shape[1] // 8):
            for i in range(8):
                out[:, c] |= cols[:, c * 8 + order[i]].to(torch.int64) << (4 * i)
        return to_int32(out)
    return pack(q.t()), pack(zeros.t()), scales.t().half().contiguous()


def random_codes(n, k, groups, sym, act_order, seed, zeros_from=1, bits=4):
    """Random b-bit values, zeros (2^(b-1) when symmetric; else [1, 2^b] for GPTQ, which stores zero - 1, or
    [0, 2^b) with zeros_from=0 as AWQ has them), fp16-representable scales, and the group of each input (shuffled for
    act-order)."""
    g = torch.Generator().manual_seed(seed)
    top = 1 << bits
    q = torch.randint(0, top, (n, k), generator=g, dtype=torch.uint8)
    zeros = torch.full((n, groups), top // 2, dtype=torch.int16) if sym else \
        torch.randint(zeros_from, zeros_from + top, (n, groups), generator=g, dtype=torch.int16)
    if bits == 8 and not sym:
        zeros.clamp_(max=255)  # 256 (a zero of 0 stored as 255): refused, see test_formats_refuse_what_they_do_not_hold
    scales = (torch.rand(n, groups, generator=g) * 0.02 + 0.001).half().float()  # fp16 in the checkpoint
    g_idx = torch.arange(k) // (k // groups)
    if act_order:
        g_idx = g_idx[torch.randperm(k, generator=g)]
    return q, zeros, scales, g_idx


def reference(x, q, zeros, scales, g_idx, bits=4):
    """float64: x @ w^T with w[n, k] = s[n, g_idx[k]] (q[n, k] - z[n, g_idx[k]]), and x's sums of |x| 2^bits s, which
    bound the products (|q - z| <= 2^bits)."""
    s, z = scales.double()[:, g_idx], zeros.double()[:, g_idx]
    x = x.double().cpu()
    return x @ (s * (q.double() - z)).t(), x.abs() @ (s * (1 << bits)).t()


def check(y, want, absum, dtype, k):
    """Each element within one rounding to `dtype` plus the fp32 accumulation over k terms (docs/tolerances.md)."""
    u = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[dtype]
    bound = u * want.abs() + (k + 64) * 2.0 ** -23 * absum
    err = (y.cpu().double() - want).abs()
    assert torch.isfinite(y).all()
    assert (err <= bound).all(), f"max err {err.max().item():.3g}, worst err / bound {(err / bound).max().item():.3g}"


@pytest.mark.parametrize("sym,act_order,group", [(True, False, 128), (False, False, 128), (False, True, 128),
                                                 (False, False, 64), (True, True, 64), (False, False, -1)])
def test_gptq_unpacks_to_the_packed_values(sym, act_order, group):
    n, k = 48, 256
    groups = 1 if group == -1 else k // group
    q, zeros, scales, g_idx = random_codes(n, k, groups, sym, act_order, seed=n + groups)
    w = formats.unpack_gptq(*gptq_pack(q, zeros, scales, g_idx), bits=4, group=group)
    assert torch.equal(w.q, q) and torch.equal(w.zeros, zeros) and torch.equal(w.g_idx, g_idx)
    assert torch.equal(w.scales, scales)
    want = scales.double()[:, g_idx] * (q.double() - zeros.double()[:, g_idx])
    assert torch.equal(formats.dequantize(w), want)


def test_gptq_v2_stores_the_zeros_themselves():
    """GPTQModel's checkpoint_format "gptq_v2": qzeros hold the zeros, not zero - 1."""
    q, zeros, scales, g_idx = random_codes(16, 256, 2, False, False, seed=4, zeros_from=0)
    qweight, qzeros, s16, gi = gptq_pack(q, zeros + 1, scales, g_idx)  # packs zeros + 1 - 1: the zeros themselves
    w = formats.unpack_gptq(qweight, qzeros, s16, gi, group=128, checkpoint_format="gptq_v2")
    assert torch.equal(w.zeros, zeros)
    with pytest.raises(ValueError, match="checkpoint_format must be 'gptq' or 'gptq_v2'"):
        formats.unpack_gptq(qweight, qzeros, s16, gi, group=128, checkpoint_format="marlin")


def test_model_half_keeps_the_scales_float32():
    """model.half() / .to(bfloat16) converts parameters and buffers; the layers keep what the kernels read float32."""
    q, zeros, scales, g_idx = random_codes(16, 256, 2, False, False, seed=5)
    layer = kernelkit.nn.from_gptq(*gptq_pack(q, zeros, scales, g_idx), bias=torch.randn(16), group=128)
    x = torch.rand(2, 256).half()
    want = layer.half()(x)  # the bias (a parameter) is half now, the scales still float32
    assert layer.scales.dtype == torch.float32 and layer.zeros.dtype == torch.int8
    assert layer.bias.dtype == torch.float16
    assert torch.equal(layer.to(torch.bfloat16).scales, formats.unpack_gptq(
        *gptq_pack(q, zeros, scales, g_idx), group=128).scales)  # the values too, not a round trip through bf16
    assert torch.isfinite(want).all() and layer(x.bfloat16()).dtype == torch.bfloat16


@pytest.mark.parametrize("group", [64, 128])
def test_awq_unpacks_to_the_packed_values(group):
    n, k = 64, 256
    q, zeros, scales, _ = random_codes(n, k, k // group, False, False, seed=group, zeros_from=0)
    w = formats.unpack_awq(*awq_pack(q, zeros, scales), group=group)
    assert torch.equal(w.q, q) and torch.equal(w.zeros, zeros) and torch.equal(w.scales, scales)
    assert torch.equal(w.g_idx, torch.arange(k) // group)


NIBBLE = (0, 4, 1, 5, 2, 6, 3, 7)  # value j of a word in the nibble at bit 4 NIBBLE[j]


def layout_offset(r, i, k):
    """The byte offset of row r's word i (values 8i .. 8i + 7) in kernelkit's INT4 layout, as
    include/kernelkit/ops/quant.hpp states it."""
    tile, h, g = r // 16, (r % 16) // 8, r % 8
    R, t, w = i // 8, (i % 8) // 2, i % 2
    return ((tile * (k // 64) + R) * 32 + 4 * g + t) * 16 + 8 * h + 4 * w


def test_pack_int4_places_every_word_by_the_layout_formula():
    """pack_int4 against the layout's offset formula, word by word (each value's nibble, little-endian bytes), and
    unpack_int4 back."""
    n, k = 32, 128
    v = torch.randint(-8, 8, (n, k), generator=torch.Generator().manual_seed(12), dtype=torch.int8)
    packed = formats.pack_int4(v)
    assert packed.dtype == torch.uint8 and packed.shape == (n, k // 2)
    flat = packed.flatten().tolist()
    seen = set()
    for r in range(n):
        for i in range(k // 8):
            off = layout_offset(r, i, k)
            word = sum(flat[off + b] << (8 * b) for b in range(4))
            for j in range(8):
                nib = (word >> (4 * NIBBLE[j])) & 0xF
                assert nib - 16 * (nib >= 8) == v[r, 8 * i + j], (r, i, j)
            seen.update(range(off, off + 4))
    assert seen == set(range(n * k // 2))  # every byte some word's
    assert torch.equal(formats.unpack_int4(packed), v)


def test_pack_int4_hand_checked_bytes():
    """n 16, k 64 (one tile, one region). Value 5 at row 9, k 37: word i = 4 (k 32..39), j = 5; row 9 is h = 1, g = 1,
    word 4 is t = 2, w = 0: byte ((0 + 0) 32 + 4 + 2) 16 + 8 = 104 starts the word, and j = 5's nibble 6 (bits 24-27)
    is byte 107's low nibble. Value -3 (0xD) at row 2, k 60: word 7, j = 4 (nibble 2: byte 1's low nibble); h = 0, g =
    2, t = 3, w = 1: the word at (8 + 3) 16 + 4 = 180, the nibble in byte 181."""
    v = torch.zeros(16, 64, dtype=torch.int8)
    v[9, 37], v[2, 60] = 5, -3
    want = torch.zeros(16 * 32, dtype=torch.uint8)
    want[107], want[181] = 0x05, 0x0D
    assert torch.equal(formats.pack_int4(v).flatten(), want)


def test_pack_int4_refuses_shapes_the_layout_cannot_hold():
    for n, k in [(24, 128), (8, 64), (32, 96), (16, 32)]:
        with pytest.raises(ValueError, match=rf"pack_int4: values: INT4 weights \[n, k\] need n a multiple of 16 and k "
                                             rf"a multiple of 64 \(pad them\), got n = {n}, k = {k}"):
            formats.pack_int4(torch.zeros(n, k, dtype=torch.int8))
    with pytest.raises(ValueError, match="unpack_int4: packed: INT4 weights"):
        formats.unpack_int4(torch.zeros(16, 16, dtype=torch.uint8))


def test_pack_int4_is_the_kernel_layout():
    """Values packed by formats.pack_int4 come back from kernelkit's own W4A16 op (CPU reference) unchanged (n 48:
    three row tiles)."""
    n, k = 48, 256
    v = torch.randint(-8, 8, (n, k), generator=torch.Generator().manual_seed(3), dtype=torch.int8)
    got = kernelkit.linear_weight_only(torch.eye(k, dtype=torch.bfloat16), formats.pack_int4(v),
                                       torch.ones(n, k // 128), 4, 128)
    assert torch.equal(got.t().to(torch.int8), v)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,sym,act_order,group", [
    (4, True, False, 128), (4, False, False, 128), (4, False, True, 128), (4, False, True, 64), (4, False, False, -1),
    (4, False, True, 256), (4, False, True, 32), (4, True, False, 32),
    (8, True, False, 128), (8, False, True, 128), (8, False, False, 32), (8, False, False, -1)])
@pytest.mark.parametrize("m", [1, 5])
def test_gptq_layer_matches_the_float64_reference(device, dtype, bits, sym, act_order, group, m):
    n, k = 48 if bits == 4 else 40, 512  # INT4: whole 16-row tiles (3: a partial block of 2); INT8: a partial tile
    groups = 1 if group == -1 else k // group
    q, zeros, scales, g_idx = random_codes(n, k, groups, sym, act_order, seed=m * 7 + groups, bits=bits)
    layer = kernelkit.nn.from_gptq(*gptq_pack(q, zeros, scales, g_idx, bits), bits=bits, group=group).to(device)
    assert (layer.zeros is None) == sym and (layer.perm is None) == (not act_order)
    assert layer.bits == bits and layer.group == (group if group in (32, 64, 128) else 128)
    x = (torch.rand(m, k, generator=torch.Generator().manual_seed(m)) * 2 - 1).to(device=device, dtype=dtype)
    with torch.no_grad():
        y = layer(x)
    assert y.dtype == dtype and y.shape == (m, n)
    check(y, *reference(x, q, zeros, scales, g_idx, bits), dtype, k)


@pytest.mark.parametrize("bits", [4, 8])
def test_gptq_unpacks_every_width(bits):
    """The fields of both widths, zeros of 0 stored as 2^b - 1 (AutoGPTQ's zero - 1, masked) read back as 2^b."""
    n, k, groups = 16, 256, 8
    q, zeros, scales, g_idx = random_codes(n, k, groups, False, True, seed=40 + bits, bits=bits)
    zeros[0, 0] = 1  # stored as 0
    if bits == 4:
        zeros[1, 1] = 16  # a zero of 0 as the format's zero - 1 leaves it: stored 15, read back 16
    w = formats.unpack_gptq(*gptq_pack(q, zeros, scales, g_idx, bits), bits=bits, group=k // groups)
    assert w.bits == bits and torch.equal(w.q, q) and torch.equal(w.zeros, zeros) and torch.equal(w.g_idx, g_idx)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("group", [64, 128])
def test_awq_layer_matches_the_float64_reference(device, group):
    n, k, dtype = 48, 384, torch.float16
    q, zeros, scales, g_idx = random_codes(n, k, k // group, False, False, seed=group + 1, zeros_from=0)
    bias = torch.randn(n, dtype=dtype)
    layer = kernelkit.nn.from_awq(*awq_pack(q, zeros, scales), bias=bias, group=group).to(device)
    x = (torch.rand(3, 2, k, generator=torch.Generator().manual_seed(5)) * 2 - 1).to(device=device, dtype=dtype)
    with torch.no_grad():
        y = layer(x)
    want, absum = reference(x.reshape(-1, k), q, zeros, scales, g_idx)
    b = bias.double()
    check(y.reshape(-1, n), want + b, absum + b.abs(), dtype, k)


def test_formats_refuse_what_they_do_not_hold():
    q, zeros, scales, g_idx = random_codes(16, 256, 8, False, False, seed=9)
    packed = gptq_pack(q, zeros, scales, g_idx)
    q16, z16, s16, gi16 = random_codes(16, 256, 16, False, False, seed=10)
    with pytest.raises(ValueError, match="groups of 16 inputs are not supported"):
        kernelkit.nn.from_gptq(*gptq_pack(q16, z16, s16, gi16), group=16)
    q8, z8, s8, gi8 = random_codes(16, 256, 2, False, False, seed=11, bits=8)
    z8[3, 1] = 256  # a zero of 0 that GPTQ stored as zero - 1: no int8 zero point holds 256 - 128
    with pytest.raises(ValueError, match="row 3 group 1 has zero point 256, past the 8-bit codes' range"):
        kernelkit.nn.from_gptq(*gptq_pack(q8, z8, s8, gi8, 8), bits=8, group=128)
    with pytest.raises(ValueError, match="bits must be 4 or 8, got 3"):
        formats.unpack_gptq(*packed, bits=3, group=32)
    with pytest.raises(ValueError, match="group must divide k = 256"):
        formats.unpack_gptq(*packed, group=100)
    with pytest.raises(ValueError, match=r"qzeros: shape \[8, 2\] must be \[2, 2\]"):
        formats.unpack_gptq(*packed, group=128)
    with pytest.raises(ValueError, match="qweight: must be torch.int32"):
        formats.unpack_awq(packed[0].float(), packed[1], packed[2], group=32)
    with pytest.raises(ValueError, match=r"g_idx values must be groups in \[0, 8\)"):
        formats.unpack_gptq(packed[0], packed[1], packed[2], packed[3] + 8, group=32)
    with pytest.raises(ValueError, match=r"values must be in \[-8, 7\]"):
        formats.pack_int4(torch.full((16, 64), 8, dtype=torch.int8))


@pytest.mark.parametrize("n,k,group", [(40, 256, 128), (48, 96, 32), (8, 128, 64)])
def test_int4_checkpoint_layers_refuse_shapes_the_layout_cannot_hold(n, k, group):
    """INT4 layers need out_features % 16 == 0 and in_features % 64 == 0; the refusal names the layer and says to pad.
    INT8 takes the same shapes."""
    q, zeros, scales, g_idx = random_codes(n, k, k // group, False, False, seed=n + k)
    msg = (rf"ZeroPointLinear: INT4 weights need out_features a multiple of 16 and in_features a multiple of 64, got "
           rf"out_features {n}, in_features {k}: pad the weight")
    with pytest.raises(ValueError, match=msg):
        kernelkit.nn.from_gptq(*gptq_pack(q, zeros, scales, g_idx), group=group)
    with pytest.raises(ValueError, match=msg):
        kernelkit.nn.from_awq(*awq_pack(q, zeros - 1, scales), group=group)
    q8, z8, s8, gi8 = random_codes(n, k, k // group, False, False, seed=n + k, bits=8)
    layer = kernelkit.nn.from_gptq(*gptq_pack(q8, z8, s8, gi8, 8), bits=8, group=group)
    assert (layer.out_features, layer.in_features) == (n, k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_a_quantized_llama_checkpoint_loads_and_generates_like_its_dequantized_twin(method, device, tmp_path):
    """A small transformers Llama whose every decoder linear is stored in the format (asymmetric; GPTQ with
    act-order), saved as a hub checkpoint directory: loaded by kernelkit.nn.load_checkpoint in float16 on `device`
    (on a GPU its linears run kernelkit's W4A16 kernels: the tensor-core kernels on the 24-token prompt, the GEMV on each
    generated pair of tokens), its logits match a float16 twin holding the dequantized weights, and greedy generation
    gives the same tokens or, where two logits lie closer than the linears' rounding difference, tokens the twin ranks
    first within it."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import save_file
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    twin = transformers.LlamaForCausalLM(cfg).eval()
    tensors = {k: v.clone() for k, v in twin.state_dict().items()}
    for i, (name, lin) in enumerate((n, m) for n, m in twin.named_modules()
                                    if type(m) is torch.nn.Linear and n != "lm_head"):
        n, k = lin.weight.shape
        q, zeros, scales, g_idx = random_codes(n, k, k // 128, False, method == "gptq", seed=100 + i,
                                              zeros_from=1 if method == "gptq" else 0)
        stored = gptq_pack(q, zeros, scales, g_idx) if method == "gptq" else awq_pack(q, zeros, scales)
        for key, t in zip(("qweight", "qzeros", "scales", "g_idx"), stored):
            tensors[f"{name}.{key}"] = t
        del tensors[f"{name}.weight"]
        with torch.no_grad():
            lin.weight.copy_(scales[:, g_idx] * (q.float() - zeros.float()[:, g_idx]))
    twin.half()  # the float16 model with the dequantized weights (every other op rounds alike)
    # The checkpoint directory as the hub has it: config.json with its quantization_config, the safetensors.
    cfg.quantization_config = {"quant_method": method, "bits": 4, "group_size": 128, "desc_act": method == "gptq"}
    cfg.save_pretrained(tmp_path)
    save_file(tensors, tmp_path / "model.safetensors")
    twin.to(device)
    model = kernelkit.nn.load_checkpoint(tmp_path, torch.float16, device)
    assert sum(type(m) is kernelkit.nn.ZeroPointLinear for m in model.modules()) == 2 * 7  # q k v o gate up down
    assert (model.model.layers[0].mlp.down_proj.perm is not None) == (method == "gptq")  # k 256: two groups
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        got, want = model(ids).logits.double(), twin(ids).logits.double()
        # The linears round differently (fp32 sums of exact products, one rounding, where the twin rounds the
        # dequantized weights to float16 first): a few float16 steps (2^-11) through two layers.
        tol = 1e-2 * want.abs().max().item()
        assert (got - want).abs().max().item() < tol, (got - want).abs().max().item()
        gen = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
        out = model.generate(ids, **gen)
        if not torch.equal(out, twin.generate(ids, **gen)):
            # Greedy decoding parts where two logits lie closer than that rounding difference (seen on the GPU): each
            # token kernelkit chose is then, within the tolerance, the twin's best on kernelkit's own sequence.
            logits = twin(out[:, :-1]).logits[:, ids.shape[1] - 1:].double()
            chosen = logits.gather(-1, out[:, ids.shape[1]:, None])[..., 0]
            gap = (logits.max(-1).values - chosen).max().item()
            assert gap < tol, f"a generated token {gap} below the twin's best logit (tolerance {tol})"
