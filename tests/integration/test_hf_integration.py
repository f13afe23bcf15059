"""kernelkit with the Hugging Face stack: patch() on a real transformers Llama built from a small random config (no
download), the forward-only layers, and a hub build variant loaded with kernels.get_local_kernel."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kernelkit
from torch_testing import sanitized

transformers = pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]


def tiny_llama(dtype=torch.float32, device="cpu"):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    for m in model.modules():  # random norm weights: the ones at init would hide a missing weight
        if type(m).__name__.endswith("RMSNorm"):
            m.weight.data.uniform_(0.5, 1.5)
    return model


@pytest.mark.parametrize("device,dtype", [("cpu", torch.float32)] +
                         ([("cuda", torch.float16), ("cuda", torch.bfloat16)] if torch.cuda.is_available() else []))
def test_patched_llama_logits_match(device, dtype):
    model = tiny_llama(dtype, device)
    ids = torch.randint(0, 128, (2, 16), device=device)
    with torch.no_grad():
        want = model(ids).logits.double()
        report = kernelkit.patch(model)
        got = model(ids).logits.double()
    assert report.patched["LlamaRMSNorm"] == 2 * 2 + 1  # two per layer and the final norm
    assert report.patched["LlamaMLP"] == 2  # silu(gate) * up fused
    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    assert (got - want).abs().max().item() < tol, (got - want).abs().max().item()
    assert kernelkit.unpatch(model) == 7
    with torch.no_grad():
        assert torch.equal(model(ids).logits.double(), want)


@pytest.mark.parametrize("device,dtype", [("cpu", torch.bfloat16)] +
                         ([("cuda", torch.float16), ("cuda", torch.bfloat16)] if torch.cuda.is_available() else []))
def test_kernelkit_as_the_transformers_attention(device, dtype, monkeypatch):
    """patch(model, attention=True): the model's attention runs kernelkit.attention (GQA 4/2, head_dim 64, causal) and
    its logits match SDPA's; a padded batch (a mask tensor) stays on SDPA and matches it exactly."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=64,
                                   attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    ids = torch.randint(0, 128, (2, 24), device=device)
    pad = torch.ones_like(ids)
    pad[0, :5] = 0  # left padding in the first sequence
    kernelkit.patch(model)  # the norms and the MLP first: the reference differs from it in the attention only
    with torch.no_grad():
        want, want_pad = model(ids).logits.double(), model(ids, attention_mask=pad).logits.double()
    calls = []
    real = kernelkit.attention
    monkeypatch.setattr(kernelkit, "attention", lambda *a, **k: calls.append(k.get("causal")) or real(*a, **k))
    report = kernelkit.patch(model, attention=True)
    assert report.patched["attention (kernelkit)"] == 1 and model.config._attn_implementation == "kernelkit"
    assert sum(report.patched.values()) == 1  # the norms and the MLP were patched already
    with torch.no_grad():
        got = model(ids).logits.double()
        assert calls == [True, True]  # both layers, causal, through the kernel
        got_pad = model(ids, attention_mask=pad).logits.double()
    assert calls == [True, True]  # the mask tensor kept the padded batch on SDPA
    tol = {torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    assert (got - want).abs().max().item() < tol, (got - want).abs().max().item()
    assert torch.equal(got_pad, want_pad)


WINDOW_MODELS = {
    # Mistral: a sliding window on every layer; Gemma 2: window and full layers alternating, soft-capped logits
    # (a cap of 5 on q.k logits of a few units, so that it bends them), reference its eager attention (SDPA has no
    # soft-cap); Qwen2 with use_sliding_window: the window from layer max_window_layers on.
    "mistral": lambda: transformers.MistralConfig(sliding_window=8, attn_implementation="sdpa"),
    "gemma2": lambda: transformers.Gemma2Config(sliding_window=8, attn_logit_softcapping=5.0, head_dim=64,
                                                query_pre_attn_scalar=64, final_logit_softcapping=None,
                                                attn_implementation="eager"),
    "qwen2": lambda: transformers.Qwen2Config(sliding_window=8, use_sliding_window=True, max_window_layers=1,
                                              attn_implementation="sdpa"),
    # Gemma 3: local (window) and global layers, no soft-cap
    "gemma3": lambda: transformers.Gemma3TextConfig(sliding_window=8, head_dim=64, query_pre_attn_scalar=64,
                                                    attn_implementation="sdpa"),
    # Qwen2-MoE: its attention does not pass sliding_window to the interface (the window is the module's)
    "qwen2_moe": lambda: transformers.Qwen2MoeConfig(sliding_window=8, use_sliding_window=True, max_window_layers=2,
                                                     num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                                                     shared_expert_intermediate_size=64, attn_implementation="sdpa"),
}


@pytest.mark.parametrize("name", sorted(WINDOW_MODELS))
@pytest.mark.parametrize("device,dtype", [("cpu", torch.bfloat16)] +
                         ([("cuda", torch.float16), ("cuda", torch.bfloat16)] if torch.cuda.is_available() else []))
def test_sliding_window_and_softcap_models_run_the_kernel(name, device, dtype, monkeypatch):
    """patch(model, attention=True) on models with a sliding window (8, over 24 tokens) and / or a soft-cap: every
    layer's attention goes through kernelkit.attention (no fallback) with the layer's window and cap, and the logits
    match the model's own attention; a padded batch (a mask tensor) falls back and matches it too."""
    torch.manual_seed(0)
    cfg = WINDOW_MODELS[name]()
    for key, value in dict(hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=128, max_position_embeddings=64).items():
        setattr(cfg, key, value)
    if name in ("gemma2", "gemma3"):
        cfg.layer_types = ["sliding_attention", "full_attention"]
    if name == "qwen2":
        cfg.layer_types = ["full_attention", "sliding_attention"]
    if name == "qwen2_moe":
        cfg.layer_types = ["sliding_attention", "full_attention"]
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(device=device, dtype=dtype).eval()
    ids = torch.randint(0, 128, (2, 24), device=device)
    pad = torch.ones_like(ids)
    pad[0, :5] = 0
    kernelkit.patch(model)
    with torch.no_grad():
        want, want_pad = model(ids).logits.double(), model(ids, attention_mask=pad).logits.double()
    calls = []
    real = kernelkit.attention
    monkeypatch.setattr(kernelkit, "attention", lambda *a, **k: calls.append(
        (k["causal"], k["window_left"], k["softcap"])) or real(*a, **k))
    kernelkit.patch(model, attention=True)
    with torch.no_grad():
        got = model(ids).logits.double()
        expected = {"mistral": [(True, 7, 0.0)] * 2, "gemma2": [(True, 7, 5.0), (True, -1, 5.0)],
                    "qwen2": [(True, -1, 0.0), (True, 7, 0.0)], "qwen2_moe": [(True, 7, 0.0), (True, -1, 0.0)],
                    "gemma3": [(True, 7, 0.0), (True, -1, 0.0)]}[name]
        assert calls == expected
        got_pad = model(ids, attention_mask=pad).logits.double()
        assert calls == expected  # the padded batch stayed on the model's own attention
    tol = {torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    assert (got - want).abs().max().item() < tol, (got - want).abs().max().item()
    assert (got_pad - want_pad).abs().max().item() < tol


def test_fallbacks_keep_the_masks_the_mask_function_dropped(monkeypatch):
    """Calls the kernel does not take still get their causal / window masks: Gemma 2 in float32 (no kernel; its
    eager attention, which ignores is_causal, gets the mask made explicit) matches its own eager attention; a static
    cache's prefill (queries not at the end of the keys: sdpa_mask's top-left skip) keeps its mask and matches SDPA."""
    torch.manual_seed(0)
    cfg = WINDOW_MODELS["gemma2"]()
    for key, value in dict(hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=128, max_position_embeddings=64).items():
        setattr(cfg, key, value)
    cfg.layer_types = ["sliding_attention", "full_attention"]
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ids = torch.randint(0, 128, (2, 24))
    with torch.no_grad():
        want = model(ids).logits
    calls = []
    real = kernelkit.attention
    monkeypatch.setattr(kernelkit, "attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    kernelkit.patch(model, attention=True)
    with torch.no_grad():
        got = model(ids).logits
    assert calls == [] and torch.allclose(got, want, atol=1e-5), (got - want).abs().max().item()

    llama = transformers.LlamaConfig(hidden_size=128, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                     max_position_embeddings=64, attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(llama).to(torch.bfloat16).eval()
    ids = torch.randint(0, 128, (1, 10))
    with torch.no_grad():
        want = model(ids, past_key_values=transformers.StaticCache(config=llama, max_cache_len=32)).logits.double()
        kernelkit.patch(model, attention=True)
        got = model(ids, past_key_values=transformers.StaticCache(config=llama, max_cache_len=32)).logits.double()
    assert (got - want).abs().max().item() < 1e-1, (got - want).abs().max().item()


def test_the_window_mask_is_dropped_only_when_exact():
    """kernelkit's mask function returns None only for a padding-free sliding-window causal mask with the queries at
    the end of the keys; otherwise it is sdpa_mask's, element for element."""
    from transformers.masking_utils import causal_mask_function, chunked_overlay, sdpa_mask, \
        sliding_window_causal_mask_function, and_masks
    from kernelkit import hf_attention
    kw = dict(batch_size=2, q_length=24, kv_length=24, local_size=8, device="cpu")
    assert hf_attention.mask(mask_function=sliding_window_causal_mask_function(8), **kw) is None
    pad = torch.ones(2, 24, dtype=torch.bool)
    assert hf_attention.mask(mask_function=sliding_window_causal_mask_function(8), attention_mask=pad, **kw) is None
    pad[0, :3] = False
    others = [dict(mask_function=sliding_window_causal_mask_function(8), attention_mask=pad),   # padding
              dict(mask_function=sliding_window_causal_mask_function(6)),                        # another window
              dict(mask_function=and_masks(causal_mask_function, chunked_overlay(8, torch.zeros(2, dtype=torch.long)))),
              dict(mask_function=sliding_window_causal_mask_function(8), allow_is_causal_skip=False)]
    for extra in others:
        args = {**kw, **extra}
        got = hf_attention.mask(**args)
        assert got is not None and torch.equal(got, sdpa_mask(**args))


def test_patched_static_cache_generate_traces_without_graph_breaks():
    """transformers' fast decode path (static cache + torch.compile of forward) on a patched model: dynamo traces
    the whole forward with fullgraph=True (a kernelkit op that broke the graph would raise here), on the eager backend
    (no inductor compile: the trace is what this guards), and the greedy tokens equal the unpatched model's."""
    model = tiny_llama()
    ids = torch.randint(0, 128, (2, 6))
    gen = dict(max_new_tokens=6, do_sample=False, cache_implementation="static", pad_token_id=0)
    with torch.no_grad():
        want = model.generate(ids, **gen)
        kernelkit.patch(model)
        torch._dynamo.reset()
        model.forward = torch.compile(model.forward, backend="eager", fullgraph=True)
        got = model.generate(ids, **gen)
    assert torch.equal(got, want), (got, want)


def test_patch_auto_dtype_and_report():
    model = tiny_llama()
    report = kernelkit.patch(model, dtype="auto")
    assert report.dtype == torch.float32  # CPU model: stays fp32 ("auto" picks fp16 on a T4, bf16 on sm_80+)
    assert "LlamaRMSNorm: 5" in str(report) and "LlamaMLP: 2" in str(report)
    assert sum(kernelkit.patch(model).patched.values()) == 0  # idempotent


def test_layers_declare_what_they_support():
    assert kernelkit.layers.RMSNorm.can_torch_compile and not kernelkit.layers.RMSNorm.has_backward
    norm = transformers.models.llama.modeling_llama.LlamaRMSNorm(32, eps=1e-5)
    norm.weight.data.uniform_(0.5, 1.5)
    x = torch.randn(3, 32)
    with torch.no_grad():  # the layer is forward-only (its weight is a Parameter)
        want = norm(x)
        norm.forward = kernelkit.layers.RMSNorm.forward.__get__(norm)
        torch.testing.assert_close(norm(x), want, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def hub_repo(tmp_path_factory):
    """A hub build variant of kernelkit (torch-ext/build_variant.py), built once for the tests that load it."""
    pytest.importorskip("kernels")
    repo = tmp_path_factory.mktemp("hub") / "repo"
    archs = os.environ.get("KERNELKIT_HUB_ARCHS", "75;80;90")
    subprocess.run([sys.executable, str(ROOT / "torch-ext" / "build_variant.py"), str(repo), "--archs", archs],
                   check=True)
    return repo


def run_fresh(code):
    """Runs `code` in a fresh interpreter (a loaded variant registers its own op namespace next to the pip package's)
    and returns its stdout; a failure shows the child's stderr."""
    done = subprocess.run(sanitized([sys.executable, "-c", code]), capture_output=True, text=True)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-4000:]}"
    return done.stdout


def test_fresh_interpreters_run_behind_the_child_sanitizer(monkeypatch):
    """KERNELKIT_CHILD_SANITIZER (gpu-check's PYTEST_SANITIZER sets it) goes in front of a fresh interpreter: here
    `env` with a variable the child then sees."""
    monkeypatch.setenv("KERNELKIT_CHILD_SANITIZER", "env KK_CHILD_PREFIX=seen")
    assert run_fresh("import os; print(os.environ.get('KK_CHILD_PREFIX'))").strip() == "seen"


def test_hub_build_variant_loads_with_get_local_kernel(hub_repo):
    out = run_fresh("import torch, kernelkit, kernels; from pathlib import Path; "
                    f"k = kernels.get_local_kernel(Path({str(hub_repo)!r})); "
                    "x = torch.randn(4, 64); w = torch.rand(64) + 0.5; "
                    "torch.testing.assert_close(k.rms_norm(x, w), kernelkit.rms_norm(x, w)); "
                    "print('namespace', k._ops.NAMESPACE)")
    assert "namespace _kernelkit_0_1_0" in out


@pytest.mark.parametrize("mode", ["INFERENCE", "INFERENCE | Mode.TORCH_COMPILE"])
def test_kernelize_with_a_local_mapping(hub_repo, mode):
    """kernels.kernelize(model, mode=...) with kernelkit's local hub build: the Llama's norms, MLPs and their SiLU run
    the variant's layers (validated by kernels: stateless, same forward signature) and the logits match. For
    Mode.TORCH_COMPILE the kernelized model is then compiled whole (fullgraph: a graph break raises; inductor on CUDA,
    the eager backend on the CPU, where the trace is what this guards) and its logits match too."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    backend = "inductor" if device == "cuda" else "eager"
    out = run_fresh(f"""
import torch, transformers, kernelkit
from kernels import Mode, kernelize, use_kernel_mapping
torch.manual_seed(0)
cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
model = transformers.LlamaForCausalLM(cfg).to({device!r}).eval()
for m in model.modules():
    if type(m).__name__.endswith("RMSNorm"):
        m.weight.data.uniform_(0.5, 1.5)
ids = torch.randint(0, 128, (2, 16), device={device!r})
mlp = model.model.layers[0].mlp
with torch.no_grad():
    want = model(ids).logits.double()
    act_want = mlp.act_fn(ids.to(torch.float32) / 64).double()
    marked = kernelkit.mark_for_kernelize(model)
    # use_fallback: transformers marks functions kernelkit does not serve (apply_rotary_pos_emb as rotary_pos_emb),
    # which keep their own code; the asserts below check that kernelkit's layers replaced the norms and MLPs.
    with use_kernel_mapping(kernelkit.kernel_mapping({str(hub_repo)!r})):
        kernelize(model, mode=Mode.{mode}, device={device!r}, use_fallback=True)
    got = model(ids).logits.double()
    act_got = mlp.act_fn(ids.to(torch.float32) / 64).double()
    if Mode.TORCH_COMPILE in Mode.{mode}:
        compiled = torch.compile(model, backend={backend!r}, fullgraph=True)
        print("compiled max diff", (compiled(ids).logits.double() - want).abs().max().item())
fwd = model.model.norm.forward.__func__
print("marked", dict(sorted(marked.items())))
print("norm forward", fwd.__qualname__, fwd.__module__)
print("mlp forward", mlp.forward.__func__.__qualname__)
print("act forward", mlp.act_fn.forward.__func__.__qualname__, (act_got - act_want).abs().max().item())
print("max diff", (got - want).abs().max().item())
""")
    assert "marked {'LlamaMLP': 2, 'LlamaRMSNorm': 5}" in out, out
    assert "norm forward RMSNorm.forward" in out and "transformers" not in out.split("norm forward")[1].split()[1], out
    assert "mlp forward GatedMLP.forward" in out, out
    act = out.split("act forward")[1].split()
    assert act[0] == "SiLU.forward" and float(act[1]) < 1e-6, out
    assert float(out.split("max diff")[-1]) < 1e-4, out
    if "TORCH_COMPILE" in mode:
        assert float(out.split("compiled max diff")[1].split()[0]) < 1e-4, out


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="transformers' KernelConfig takes local kernels on accelerators only, not the CPU")
def test_transformers_use_kernels_loads_the_hub_build(hub_repo, tmp_path):
    """transformers' own integration: model.set_use_kernels(True, kernelkit.kernel_config(repo)) loads kernelkit's
    local hub build for the names transformers declares (LlamaRMSNorm: RMSNorm, the MLP's SiLUActivation: SiLU), and
    the logits match the model without it. (from_pretrained(use_kernels=True, kernel_config=...) itself fails for
    local kernels in transformers 5.17: it turns the mapping's strings into (repo, metadata) tuples before its local
    mapping splits them as strings.)"""
    tiny_llama().save_pretrained(tmp_path / "model")
    out = run_fresh(f"""
import torch, transformers, kernelkit
path = {str(tmp_path / "model")!r}
plain = transformers.LlamaForCausalLM.from_pretrained(path, device_map="cuda").eval()
model = transformers.LlamaForCausalLM.from_pretrained(path, device_map="cuda").eval()
model.set_use_kernels(True, kernelkit.kernel_config({str(hub_repo)!r}))
ids = torch.randint(0, 128, (2, 16), device="cuda")
with torch.no_grad():
    diff = (model(ids).logits.double() - plain(ids).logits.double()).abs().max().item()
print("norm forward", model.model.norm.forward.__func__.__qualname__, model.model.norm.forward.__func__.__module__)
print("act forward", model.model.layers[0].mlp.act_fn.forward.__func__.__qualname__)
print("max diff", diff)
""")
    assert "norm forward RMSNorm.forward" in out and "transformers" not in out.split("norm forward")[1].split()[1], out
    assert "act forward SiLU.forward" in out, out
    assert float(out.split("max diff")[1]) < 1e-4, out


def test_kernel_config_names_what_it_serves():
    with pytest.raises(ValueError, match="no kernelkit layer for \\['LlamaMLP'\\]"):
        kernelkit.kernel_config("/tmp/repo", ["RMSNorm", "LlamaMLP"])
    from kernelkit.patch import HUB_LAYERS
    assert set(HUB_LAYERS.values()) <= set(dir(kernelkit.layers))


def test_patched_diffusers_sd3_transformer_matches():
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    model = diffusers.SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8, num_attention_heads=2,
        joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=16, out_channels=4,
        qk_norm="rms_norm").eval()
    args = dict(hidden_states=torch.randn(2, 4, 8, 8), encoder_hidden_states=torch.randn(2, 5, 16),
                pooled_projections=torch.randn(2, 16), timestep=torch.tensor([10.0, 500.0]))
    with torch.no_grad():
        want = model(**args).sample.double()
        report = kernelkit.patch(model)
        got = model(**args).sample.double()
    assert report.patched["RMSNorm"] > 0 and report.patched["AdaLayerNormZero"] > 0
    assert report.patched["AdaLayerNormContinuous"] > 0
    assert report.patched["GELU"] > 0  # FeedForward's GELU(approximate="tanh")
    assert (got - want).abs().max().item() < 1e-4, (got - want).abs().max().item()


def test_diffusers_rmsnorm_without_weight():
    diffusers = pytest.importorskip("diffusers")
    norm = diffusers.models.normalization.RMSNorm(48, eps=1e-6, elementwise_affine=False)
    x = torch.randn(2, 7, 48)
    want = norm(x)
    kernelkit.patch(norm)
    torch.testing.assert_close(norm(x), want, rtol=1e-5, atol=1e-6)


def test_diffusers_geglu_and_gelu():
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    for module in (diffusers.models.activations.GEGLU(32, 48), diffusers.models.activations.GELU(32, 48),
                   diffusers.models.activations.GELU(32, 48, approximate="tanh")):
        x = torch.randn(2, 5, 32)
        with torch.no_grad():
            want = module(x)
            assert sum(kernelkit.patch(module).patched.values()) == 1
            torch.testing.assert_close(module(x), want, rtol=1e-5, atol=1e-6)


def test_llama_layer_benchmark_runs_and_checks(tmp_path):
    """bench/llama_layer.py's wiring on a tiny layer (the GPU run times the LLaMA-7B-sized one): patched output checked
    against eager, the report written."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import llama_layer
    finally:
        sys.path.pop(0)
    out = tmp_path / "layer.json"
    assert llama_layer.main(["--tiny", "--device", "cpu", "--dtype", "fp32", "--no-compile", "--json", str(out)]) == 0
    import json
    result = json.loads(out.read_text())
    assert result["patched"] == {"LlamaMLP": 1, "LlamaRMSNorm": 2}
    assert result["check"]["kernelkit.patch"]["ok"]


def test_generate_benchmark_runs_and_checks(tmp_path):
    """bench/generate.py's wiring on a tiny model (the GPU run times the LLaMA-7B-shaped one with inductor and CUDA
    graphs): the four variants generate, the patched compiled forward has no graph break, every token agrees, and the
    compiled pair's token check in a second dtype is recorded."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import generate
    finally:
        sys.path.pop(0)
    out = tmp_path / "generate.json"
    assert generate.main(["--tiny", "--device", "cpu", "--dtype", "fp32", "--compile-backend", "eager", "--batch", "1",
                          "--token-check", "bf16", "--json", str(out)]) == 0
    import json
    result = json.loads(out.read_text())
    assert result["graph_breaks_patched_compiled"] == 0
    assert [r["variant"] for r in result["rows"]] == ["eager", "kernelkit eager", "compiled", "kernelkit compiled"]
    assert all(r["tokens_equal_compiled"] == "4/4" and r["first_difference"] is None for r in result["rows"]), \
        result["rows"]
    # The compiled pair again in another dtype (bf16 here: its tokens may differ, so only the record is checked).
    check = result["token_check"]
    assert check["dtype"] == "bf16" and list(check["batches"]) == ["1"], check
    assert check["batches"]["1"]["equal"].endswith("/4"), check
    # Where tokens differ: the first difference and the reference's margin between its token (4) and this one (2).
    logits = torch.zeros(2, 3, 5)
    logits[1, 1, 2], logits[1, 1, 4] = 1.0, 1.5
    d = generate.divergence([[1, 2, 3], [1, 2, 3]], [[1, 2, 3], [1, 4, 3]], logits)
    assert d["equal"] == "5/6" and d["first_difference"]["step"] == 1 and d["first_difference"]["sequence"] == 1
    assert d["first_difference"]["reference_margin"] == 0.5


# Per model: classes kernelkit.patch must find, and the attention processors attention=True wraps from the run's
# config (SD3: one joint attention a block; the UNet: self- and cross-attention in each transformer block, one a layer
# in its cross-attention down levels, one more in each up level, one in the mid block; Flux: one a double- and one a
# single-stream block, twice as many of those).
DIFFUSION_MODELS = {
    "sd3": (("RMSNorm", "AdaLayerNormZero"), lambda c: c["layers"]),
    "unet": (("GEGLU",), lambda c: 2 * ((len(c["widths"]) - 1) * (2 * c["layers"] + 1) + 1)),
    "flux": (("RMSNorm", "AdaLayerNormZero"), lambda c: 3 * c["layers"]),
}


@pytest.mark.parametrize("model", sorted(DIFFUSION_MODELS))
def test_diffusion_benchmark_runs_and_checks(tmp_path, model):
    """bench/diffusion.py's wiring on each tiny denoiser: the five variants denoise, patched latents match."""
    pytest.importorskip("diffusers")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import diffusion
    finally:
        sys.path.pop(0)
    out = tmp_path / "diffusion.json"
    assert diffusion.main(["--model", model, "--tiny", "--device", "cpu", "--dtype", "fp32",
                           "--compile-backend", "eager", "--json", str(out)]) == 0
    import json
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert result["meta"]["model"] == model
    assert [r["variant"] for r in rows] == ["eager", "kernelkit eager", "kernelkit eager + attention", "compiled",
                                            "kernelkit compiled"]
    classes, processors = DIFFUSION_MODELS[model]
    assert all(rows[1]["patched"].get(c, 0) > 0 for c in classes), rows[1]["patched"]
    assert rows[2]["patched"].get("attention processors (kernelkit)", 0) == processors(result["meta"]["config"])
    assert all(r["finite"] and r["max_rel_diff_vs_eager"] < 1e-4 for r in rows), rows


def test_op_baselines_formulas_on_cpu():
    """bench/op_baselines.py's references and checks (the GPU run compares kernelkit with SDPA and F.linear)."""
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "op_baselines.py"), "--check-cpu"], check=True,
                         capture_output=True, text=True).stdout
    assert "CPU check ok" in out


def test_compare_chart_draws_every_case(tmp_path):
    """bench/compare_chart.py over both baselines scripts' JSON (made-up numbers in their formats): one row a case,
    the bar green where kernelkit is faster than the fastest baseline and red where it is not, the ratio printed."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import compare_chart
    finally:
        sys.path.pop(0)
    torch_doc = {"meta": {"gpu": "G", "commit": "c1"}, "results": [
        {"op": "rms_norm", "label": "16x4096", "dtype": "bf16", "status": "ok",
         "baselines": {"eager": {"ratio": 6.0}, "compile": {"ratio": 0.5}}},
        {"op": "rms_norm", "label": "16x4096", "dtype": "fp16", "status": "ok", "baselines": {"eager": {"ratio": 2.0}}},
        {"op": "softmax", "label": "1x8", "dtype": "bf16", "status": "failed", "baselines": {}}]}
    op_doc = {"meta": {"gpu": "G", "commit": "c2"}, "rows": [
        {"op": "attention", "shape": "b1 s4096", "impls": {
            "kernelkit": {"gpu_us": 10.0}, "kernelkit attn_wgmma=0": {"gpu_us": 14.0, "time_over_kernelkit": 1.4},
            "sdpa flash": {"gpu_us": 12.0, "time_over_kernelkit": 1.2}, "sdpa efficient": {"error": "no kernel"}}}]}
    out = tmp_path / "chart.svg"
    assert compare_chart.write_chart([torch_doc, op_doc], out, dtype="bf16") == 2  # fp16 and failed rows left out
    text = out.read_text()
    assert "commit c1, c2" in text and "0.50x vs compile" in text and "1.20x vs sdpa flash" in text
    assert text.count('fill="#d62728" opacity') == 1 and text.count('fill="#2ca02c" opacity') == 1
    assert "attn_wgmma" not in text  # kernelkit's own alternatives are not baselines
