#!/usr/bin/env python3
"""Export a transformers Llama (small random config, no download) patched with kernelkit ops through torch.export and
package it with AOTInductor; writes the package, the token ids and the Python model's logits for the C++ runner.

  python3 deploy/aoti/export_llama.py OUT_DIR [--device cpu|cuda] [--dtype fp32|fp16|bf16]
"""
import argparse
import json
from pathlib import Path

import torch
import transformers

import kernelkit


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    a = p.parse_args(argv)
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(device=a.device, dtype=dtype).eval()
    for m in model.modules():  # random norm weights: ones would hide a missing weight
        if type(m).__name__.endswith("RMSNorm"):
            m.weight.data.uniform_(0.5, 1.5)
    report = kernelkit.patch(model)
    wrapped = Logits(model)
    ids = torch.randint(0, cfg.vocab_size, (2, 16), device=a.device)
    with torch.no_grad():
        logits = wrapped(ids)
        program = torch.export.export(wrapped, (ids,))
        kernelkit_calls = sum("kernelkit" in str(n.target) for n in program.graph.nodes)
        package = torch._inductor.aoti_compile_and_package(program, package_path=str(out / "model.pt2"))
    ids.cpu().numpy().tofile(out / "ids.bin")
    logits.float().cpu().numpy().tofile(out / "logits_python.bin")
    info = {"rows": ids.shape[0], "cols": ids.shape[1], "vocab": cfg.vocab_size, "patched": dict(report.patched),
            "kernelkit_calls_in_graph": kernelkit_calls, "package": package, "device": a.device, "dtype": a.dtype,
            "ops_library": kernelkit.info()["library"]}
    (out / "export.json").write_text(json.dumps(info, indent=2))
    print(json.dumps(info))


if __name__ == "__main__":
    main()
