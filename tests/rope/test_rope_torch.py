"""rotary_embedding from PyTorch against the HF formulas in float64, CPU and CUDA."""
import pytest
import torch

import kernelkit
from torch_testing import DEVICES, DTYPES, close, rand, rope_ref


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("head_dim,rot", [(64, 64), (128, 64)])
def test_rotary_embedding(device, dtype, style, head_dim, rot):
    torch.manual_seed(head_dim + rot)
    tokens, h, hk = 9, 4, 2
    qkv = rand(tokens, (h + 2 * hk) * head_dim, dtype=dtype, device=device, lo=-2, hi=2)
    q = qkv[:, : h * head_dim].view(tokens, h, head_dim)  # strided views of a fused projection
    k = qkv[:, h * head_dim: (h + hk) * head_dim].view(tokens, hk, head_dim)
    pos = torch.randint(0, 64, (tokens,), device=device)
    inv = 10000.0 ** (-torch.arange(0, rot, 2, dtype=torch.float64, device=device) / rot)
    ang = torch.arange(64, dtype=torch.float64, device=device)[:, None] * inv[None]
    cache = torch.cat([ang.cos(), ang.sin()], -1).float()
    qw, kw = rope_ref(q.double(), ang.cos()[pos], ang.sin()[pos], style), rope_ref(k.double(), ang.cos()[pos],
                                                                                  ang.sin()[pos], style)
    qo, ko = kernelkit.rotary_embedding(q, k, pos, cache, style=style, inplace=False)
    close(qo, qw.to(dtype), dtype, scale=2.0)
    close(ko, kw.to(dtype), dtype, scale=2.0)
    cos_full = torch.cat([ang.cos()[pos]] * 2, -1) if style == "neox" else ang.cos()[pos].repeat_interleave(2, -1)
    sin_full = torch.cat([ang.sin()[pos]] * 2, -1) if style == "neox" else ang.sin()[pos].repeat_interleave(2, -1)
    q2, k2 = kernelkit.rotary_embedding(q, k, cos=cos_full.float(), sin=sin_full.float(), rot_dim=rot, style=style,
                                        inplace=False)
    torch.testing.assert_close(q2, qo, rtol=0, atol=0)  # per-token HF tables == cache
    kernelkit.rotary_embedding(q, k, pos, cache, style=style)  # in place
    torch.testing.assert_close(q, qo, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for op, args in [
        (kernelkit.ops.rotary_embedding_.default, (torch.randint(0, 8, (6,), device=device), torch.randn(6, 4, 16,
         device=device), torch.randn(6, 2, 16, device=device), torch.randn(8, 16, device=device), True)),
        (kernelkit.ops.rotary_embedding_cos_sin_.default, (torch.randn(6, 4, 16, device=device),
         torch.randn(6, 2, 16, device=device), torch.randn(6, 8, device=device), torch.randn(6, 8, device=device), 16,
         False)),
    ]:
        torch.library.opcheck(op, args)
