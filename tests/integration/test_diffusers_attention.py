"""kernelkit.patch(model, attention=True) on diffusers models: every attention processor wrapped, its attention on
kernelkit.attention (counted), outputs against the unpatched model; unpatch restores the processors."""
import pytest
import torch

import kernelkit

diffusers = pytest.importorskip("diffusers")

DEVICES = [("cpu", torch.bfloat16)] + ([("cuda", torch.float16), ("cuda", torch.bfloat16)]
                                       if torch.cuda.is_available() else [])


def unet():
    """SD 1.5's UNet layout, small: self- and cross-attention at head dims 40 and 80 (two heads of 80 / 160 channels)."""
    model = diffusers.UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(80, 160),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=2, norm_num_groups=8)
    return model, lambda dev, dt: dict(sample=torch.randn(2, 4, 16, 16, device=dev, dtype=dt), timestep=torch.tensor(10),
                                       encoder_hidden_states=torch.randn(2, 7, 32, device=dev, dtype=dt))


def sd3():
    model = diffusers.SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=16, caption_projection_dim=32, pooled_projection_dim=16, out_channels=4, qk_norm="rms_norm")
    return model, lambda dev, dt: dict(hidden_states=torch.randn(2, 4, 8, 8, device=dev, dtype=dt),
                                       encoder_hidden_states=torch.randn(2, 5, 16, device=dev, dtype=dt),
                                       pooled_projections=torch.randn(2, 16, device=dev, dtype=dt),
                                       timestep=torch.tensor([3, 7], device=dev))


def flux():
    model = diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=8, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=(4, 6, 6))
    return model, lambda dev, dt: dict(hidden_states=torch.randn(2, 36, 8, device=dev, dtype=dt),
                                       encoder_hidden_states=torch.randn(2, 6, 32, device=dev, dtype=dt),
                                       pooled_projections=torch.randn(2, 32, device=dev, dtype=dt),
                                       timestep=torch.tensor([0.3, 0.7], device=dev, dtype=dt),
                                       img_ids=torch.randn(36, 3, device=dev), txt_ids=torch.zeros(6, 3, device=dev))


@pytest.mark.parametrize("make", [unet, sd3, flux], ids=["unet", "sd3", "flux"])
@pytest.mark.parametrize("device,dtype", DEVICES)
def test_patched_attention_processors_match(make, device, dtype, monkeypatch):
    torch.manual_seed(0)
    model, inputs = make()
    model = model.to(device=device, dtype=dtype).eval()
    x = inputs(device, dtype)
    with torch.no_grad():
        want = model(**x).sample.double()
    processors = len(model.attn_processors)
    calls = []
    real = kernelkit.attention
    monkeypatch.setattr(kernelkit, "attention", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    report = kernelkit.patch(model, attention=True)
    assert report.patched["attention processors (kernelkit)"] == processors
    with torch.no_grad():
        got = model(**x).sample.double()
    assert len(calls) == processors  # every processor's attention through the kernel, none on SDPA
    tol = {torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype] * max(1.0, want.abs().max().item())
    assert (got - want).abs().max().item() < tol, (got - want).abs().max().item()
    assert kernelkit.unpatch(model) >= processors
    assert not any(isinstance(p, kernelkit.diffusers_attention.AttnProcessor) for p in model.attn_processors.values())
    calls.clear()
    with torch.no_grad():
        assert torch.equal(model(**x).sample.double(), want)
    assert calls == []


def test_outside_a_wrapped_processor_sdpa_is_pytorchs(monkeypatch):
    """The routing installed by a wrapped processor takes only calls inside one: an unpatched model and a direct call
    of diffusers' processors module's F.scaled_dot_product_attention never reach kernelkit."""
    from diffusers.models import attention_processor
    model, inputs = sd3()
    kernelkit.patch(model.to(torch.bfloat16).eval(), attention=True)  # installs the routing
    other, _ = sd3()
    other = other.to(torch.bfloat16).eval()
    calls = []
    monkeypatch.setattr(kernelkit, "attention", lambda *a, **k: calls.append(1))
    q = torch.randn(1, 2, 5, 16, dtype=torch.bfloat16)
    attention_processor.F.scaled_dot_product_attention(q, q, q)
    with torch.no_grad():
        other(**inputs("cpu", torch.bfloat16))
    assert calls == []


def test_wrapped_processors_forward_writes_copy_and_keep_module_processors():
    """What callers write on a processor reaches the inner one (set_attention_backend, a parallel config); a patched
    model deep-copies; processors that are modules (IP-Adapter's, with weights) are left unwrapped and in the state
    dict."""
    import copy
    model, inputs = flux()
    model = model.to(torch.bfloat16).eval()
    kernelkit.patch(model, attention=True)
    proc = next(iter(model.attn_processors.values()))
    proc._parallel_config = "cfg"
    assert proc.inner._parallel_config == "cfg" and proc._parallel_config == "cfg"
    proc._parallel_config = None
    x = inputs("cpu", torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(copy.deepcopy(model)(**x).sample, model(**x).sample)
    kernelkit.unpatch(model)

    model, _ = unet()
    name = next(n for n in model.attn_processors if "attn2" in n)
    module = model.get_submodule(name.rsplit(".", 1)[0])
    module.set_processor(diffusers.models.attention_processor.IPAdapterAttnProcessor2_0(
        hidden_size=module.to_q.out_features, cross_attention_dim=32))
    keys = set(model.state_dict())
    report = kernelkit.patch(model, attention=True)
    assert report.patched["attention processors (kernelkit)"] == len(model.attn_processors) - 1
    assert set(model.state_dict()) == keys
    assert isinstance(model.attn_processors[name], torch.nn.Module)
    kernelkit.unpatch(model)
