"""Tensor parallelism over torch.distributed, Megatron-style: each rank holds a slice of every decoder layer's
projections and computes its share.

Column-parallel (q, k, v, gate, up): a rank keeps its rows of the weight, so its output is its slice of the features:
its query and KV heads, its part of the MLP's intermediate width. Row-parallel (o, down): a rank keeps the matching
columns, multiplies its slice of the input and the partial sums are all-reduced over the group (the bias added once,
after). Norms, embeddings and the LM head stay replicated. A layer's attention then runs on the rank's heads only
(transformers' attention reads the head count from the projected shapes), so `kernelkit.patch(model,
attention=True)` before or after `parallelize` runs kernelkit's norms, MLP and attention on each rank's shards. Any
backend works: NCCL across GPUs (one rank a GPU), gloo on the CPU.

    torch.distributed.init_process_group("nccl")          # torchrun --nproc-per-node N script.py
    model = AutoModelForCausalLM.from_config(config)       # the same weights on every rank (load, or seed)
    kernelkit.tp.parallelize(model)                        # shards in place; returns {style: count}
    kernelkit.patch(model, attention=True)
"""
from __future__ import annotations

from collections import Counter
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "parallelize", "LLAMA_PLAN"]

# The decoder layer's projections by style, for Llama-style layers (Llama, Mistral, Qwen2, Qwen3, Gemma, ...), named
# as transformers names them inside a layer.
LLAMA_PLAN = {
    "self_attn.q_proj": "colwise",
    "self_attn.k_proj": "colwise",
    "self_attn.v_proj": "colwise",
    "self_attn.o_proj": "rowwise",
    "mlp.gate_proj": "colwise",
    "mlp.up_proj": "colwise",
    "mlp.down_proj": "rowwise",
}


def _split(size: int, world: int, what: str) -> int:
    if size % world:
        raise ValueError(f"kernelkit.tp: {what} ({size}) must be divisible by the world size {world}")
    return size // world


class ColumnParallelLinear(nn.Module):
    """Rows [rank * n / world, (rank + 1) * n / world) of an nn.Linear's weight (and bias): y = this rank's slice of
    the output features. No communication."""

    def __init__(self, linear: nn.Linear, rank: int, world: int):
        super().__init__()
        n = _split(linear.out_features, world, "out_features of a column-parallel linear")
        rows = slice(rank * n, (rank + 1) * n)
        self.in_features, self.out_features, self.rank, self.world = linear.in_features, n, rank, world
        self.weight = nn.Parameter(linear.weight.detach()[rows].clone(), requires_grad=False)
        self.bias = (None if linear.bias is None else
                     nn.Parameter(linear.bias.detach()[rows].clone(), requires_grad=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features} (rank {self.rank} of {self.world})"


class RowParallelLinear(nn.Module):
    """Columns [rank * k / world, (rank + 1) * k / world) of an nn.Linear's weight: x is this rank's slice of the
    input features (a column-parallel layer's output), the partial products are summed over `group` (all-reduce),
    then the bias is added."""

    def __init__(self, linear: nn.Linear, rank: int, world: int, group: Optional[dist.ProcessGroup] = None):
        super().__init__()
        k = _split(linear.in_features, world, "in_features of a row-parallel linear")
        self.in_features, self.out_features, self.rank, self.world = k, linear.out_features, rank, world
        self.group = group
        self.weight = nn.Parameter(linear.weight.detach()[:, rank * k:(rank + 1) * k].clone(), requires_grad=False)
        self.bias = (None if linear.bias is None else
                     nn.Parameter(linear.bias.detach().clone(), requires_grad=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight)
        if self.world > 1:
            dist.all_reduce(y, group=self.group)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features} (rank {self.rank} of {self.world}), "
                f"out_features={self.out_features}, all-reduced")


def _layers(model: nn.Module, plan: dict):
    """The modules holding every projection of `plan` (the decoder layers), in order."""
    for module in model.modules():
        if all(_has(module, path) for path in plan):
            yield module


def _has(module: nn.Module, path: str) -> bool:
    try:
        module.get_submodule(path)
        return True
    except AttributeError:
        return False


def parallelize(model: nn.Module, group: Optional[dist.ProcessGroup] = None, plan: Optional[dict] = None) -> Counter:
    """Shards every decoder layer of `model` in place for this rank of `group` (default: the default process group;
    without an initialized one, world size 1): the projections of `plan` (default LLAMA_PLAN) become
    ColumnParallelLinear / RowParallelLinear. Every rank must hold the same weights first. The query and KV head counts
    and the MLP width must divide by the world size (ValueError naming which does not). Returns {style: layers
    replaced}."""
    plan = LLAMA_PLAN if plan is None else plan
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(group), dist.get_world_size(group)
    else:
        rank, world = 0, 1
    config = getattr(model, "config", None)
    for attr in ("num_attention_heads", "num_key_value_heads"):
        if config is not None and getattr(config, attr, None) is not None:
            _split(getattr(config, attr), world, f"config.{attr}")
    layers = list(_layers(model, plan))
    if not layers:
        raise ValueError(f"kernelkit.tp.parallelize: no module of {type(model).__name__} holds all of "
                         f"{sorted(plan)}")
    # Every projection checked before any is replaced: a refusal leaves the model as it was.
    todo = []
    for layer in layers:
        for path, style in plan.items():
            parent_path, _, name = path.rpartition(".")
            parent = layer.get_submodule(parent_path)  # "" is the layer itself
            linear = getattr(parent, name)
            if type(linear) is not nn.Linear:
                raise ValueError(f"kernelkit.tp.parallelize: {path} is a {type(linear).__name__}, not an nn.Linear "
                                 "(parallelize before quantizing)")
            if style not in ("colwise", "rowwise"):
                raise ValueError(f"kernelkit.tp.parallelize: style of {path} must be 'colwise' or 'rowwise', "
                                 f"got {style!r}")
            _split(linear.out_features if style == "colwise" else linear.in_features, world,
                   f"{path}.{'out' if style == 'colwise' else 'in'}_features")
            todo.append((parent, name, linear, style))
    done = Counter()
    for parent, name, linear, style in todo:
        shard = (ColumnParallelLinear(linear, rank, world) if style == "colwise"
                 else RowParallelLinear(linear, rank, world, group))
        setattr(parent, name, shard)
        done[style] += 1
    return done
