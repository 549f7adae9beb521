"""Loads a zrt-ckpt export (plain safetensors) with PyTorch alone and checks
it is a GPT-2 state dict: Hugging Face names and shapes, finite values, and a
forward pass of the embedding and first block's layer norm."""
import json
import struct
import sys

import torch

path = sys.argv[1]
with open(path, "rb") as f:
    data = f.read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
base = 8 + n
tensors = {}
for name, e in header.items():
    if name == "__metadata__":
        continue
    assert e["dtype"] == "F32", (name, e["dtype"])
    begin, end = e["data_offsets"]
    tensors[name] = torch.frombuffer(bytearray(data[base + begin:base + end]), dtype=torch.float32).reshape(e["shape"])
wte, wpe = tensors["wte.weight"], tensors["wpe.weight"]
for name in ["h.0.ln_1.weight", "h.0.attn.c_attn.weight", "h.0.mlp.c_proj.bias", "ln_f.bias"]:
    assert name in tensors, f"missing {name}"
assert tensors["h.0.attn.c_attn.weight"].shape == (wte.shape[1], 3 * wte.shape[1])
assert all(torch.isfinite(t).all() for t in tensors.values())
ids = torch.arange(8) % wte.shape[0]
x = wte[ids] + wpe[:8]
y = torch.nn.functional.layer_norm(x, (wte.shape[1],), tensors["h.0.ln_1.weight"], tensors["h.0.ln_1.bias"])
assert torch.isfinite(y).all()
print(f"{len(tensors)} tensors, vocab {wte.shape[0]}, width {wte.shape[1]}")
