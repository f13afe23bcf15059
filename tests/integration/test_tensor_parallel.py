"""kernelkit.tp: a transformers Llama sharded Megatron-style (column-parallel q / k / v / gate / up, row-parallel o /
down with an all-reduce) and patched with kernelkit, against the unsharded model: world size 1 in process (CPU and
CUDA), two and four gloo ranks on the CPU under torchrun (bench/tp_llama.py, which checks every rank's logits),
transformers' own tp_plan="auto" patched, and the refusals."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import kernelkit
from torch_testing import DEVICES

transformers = pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]


def tiny_llama(dtype, device):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()


@pytest.mark.parametrize("device", DEVICES)
def test_world_size_one_is_the_model(device):
    """Without a process group (or a group of one) the shards are the whole weights: the same logits, bit for bit;
    patched on top, kernelkit.patch's own tolerance."""
    dtype = torch.float32 if device == "cpu" else torch.float16
    model = tiny_llama(dtype, device)
    ids = torch.randint(0, 128, (2, 9), device=device)
    with torch.no_grad():
        want = model(ids).logits
        done = kernelkit.tp.parallelize(model)
        assert done == {"colwise": 2 * 5, "rowwise": 2 * 2}
        assert type(model.model.layers[0].mlp.down_proj) is kernelkit.tp.RowParallelLinear
        assert torch.equal(model(ids).logits, want)
        kernelkit.patch(model, attention=device != "cpu")
        tol = 1e-4 if dtype == torch.float32 else 2e-2
        assert (model(ids).logits.double() - want.double()).abs().max().item() < tol


def torchrun(nproc, *args):
    # CPU ranks with no GPU visible: on a CUDA machine transformers' tp_plan would put rank r on cuda:r, which a
    # one-GPU machine lacks.
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                           str(ROOT / "bench" / "tp_llama.py"), *args], capture_output=True, text=True, timeout=300,
                          env=env)


# The torchrun cases are CPU processes (gloo): marked cpu, so the CUDA pass (PYTEST_K="not cpu") leaves them to CI.
# Under compute-sanitizer, which follows child processes, their CUDA-less ranks would count as failed launches.
@pytest.mark.cpu
@pytest.mark.parametrize("nproc,args", [(2, ()), (2, ("--dtype", "bf16", "--attention")),
                                        (4, ("--dtype", "bf16", "--attention", "--heads", "8", "--kv-heads", "4"))])
def test_gloo_ranks_match_the_unsharded_model(nproc, args):
    """Two and four CPU ranks (gloo): every rank's logits match the unsharded model's (fp32, and bf16 with kernelkit's
    attention on each rank's heads)."""
    r = torchrun(nproc, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    # The ranks' lines may interleave in the shared stdout: each rank's verdict found anywhere in it.
    oks = re.findall(r"rank (\d+)/\d+: max \|tp - reference\| = \S+ \(tol \S+\) ok", r.stdout)
    assert sorted(map(int, oks)) == list(range(nproc)), r.stdout + r.stderr


@pytest.mark.cpu
@pytest.mark.parametrize("args", [(), ("--dtype", "bf16", "--attention")])
def test_transformers_tp_plan_patched(tmp_path, args):
    """transformers' own tensor parallelism (from_pretrained(tp_plan="auto"): DTensor weights, its colwise / rowwise
    hooks) on two gloo ranks, then kernelkit.patch: the patched norms, MLP (and attention) run on the local shards and
    every rank's logits match the unsharded model's."""
    pytest.importorskip("accelerate")  # transformers' device placement for tp_plan
    r = torchrun(2, "--hf-tp", str(tmp_path / "ckpt"), *args)
    assert r.returncode == 0, r.stdout + r.stderr
    oks = re.findall(r"rank (\d+)/\d+: max \|tp - reference\| = \S+ \(tol \S+\) ok", r.stdout)
    assert sorted(map(int, oks)) == [0, 1], r.stdout + r.stderr


def test_refusals_name_what_does_not_divide():
    with pytest.raises(ValueError, match=r"out_features of a column-parallel linear \(6\) must be divisible by the "
                                         r"world size 4"):
        kernelkit.tp.ColumnParallelLinear(nn.Linear(8, 6), 0, 4)
    with pytest.raises(ValueError, match=r"in_features of a row-parallel linear \(6\) must be divisible"):
        kernelkit.tp.RowParallelLinear(nn.Linear(6, 8), 0, 4)
    with pytest.raises(ValueError, match="no module of Sequential holds all of"):
        kernelkit.tp.parallelize(nn.Sequential(nn.Linear(4, 4)))
    model = tiny_llama(torch.float32, "cpu")
    kernelkit.quantize(model, bits=8)
    with pytest.raises(ValueError, match=r"self_attn.q_proj is a Int8Linear, not an nn.Linear \(parallelize before "
                                         r"quantizing\)"):
        kernelkit.tp.parallelize(model)
    model = tiny_llama(torch.float32, "cpu")
    plan = dict(kernelkit.tp.LLAMA_PLAN, **{"mlp.down_proj": "diagonal"})
    with pytest.raises(ValueError, match="style of mlp.down_proj must be 'colwise' or 'rowwise', got 'diagonal'"):
        kernelkit.tp.parallelize(model, plan=plan)
    assert all(type(m) is not kernelkit.tp.ColumnParallelLinear for m in model.modules())  # nothing replaced
