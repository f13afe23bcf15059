"""The op namespace of the compiled library, in the layout the Hugging Face `kernels` hub expects.

Loading `_kernelkit_ops.so` registers the `kernelkit::*` ops with PyTorch (TORCH_LIBRARY); `ops` is that namespace.
"""
from pathlib import Path

import torch

_LIB = Path(__file__).with_name("_kernelkit_ops.so")
torch.ops.load_library(str(_LIB))
ops = torch.ops.kernelkit


def add_op_namespace_prefix(op_name: str) -> str:
    """The fully qualified op name, e.g. for torch.library.register_fake."""
    return f"kernelkit::{op_name}"
