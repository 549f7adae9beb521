"""zrt's model-zoo models written functionally in PyTorch over a dict of
parameters named as zrt names them (Hugging Face GPT-2 names; layers.{i}.* for
the MLP). loss = sum of per-target cross-entropy / normaliser."""
import math

import torch
import torch.nn.functional as F


def gpt_loss(p, idx, targets, n_head, normaliser):
    B, T = idx.shape
    C = p["wte.weight"].shape[1]
    n_layer = len({k.split(".")[1] for k in p if k.startswith("h.")})
    x = p["wte.weight"][idx.long()] + p["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(n_layer):
        q = lambda n: p[f"h.{i}.{n}"]
        h = F.layer_norm(x, (C,), q("ln_1.weight"), q("ln_1.bias"), eps=1e-5)
        qkv = h @ q("attn.c_attn.weight") + q("attn.c_attn.bias")
        qq, kk, vv = (z.view(B, T, n_head, C // n_head).transpose(1, 2) for z in qkv.split(C, dim=2))
        att = (qq @ kk.transpose(-2, -1)) / math.sqrt(C // n_head)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        o = (att @ vv).transpose(1, 2).reshape(B, T, C)
        x = x + o @ q("attn.c_proj.weight") + q("attn.c_proj.bias")
        h = F.layer_norm(x, (C,), q("ln_2.weight"), q("ln_2.bias"), eps=1e-5)
        m = F.gelu(h @ q("mlp.c_fc.weight") + q("mlp.c_fc.bias"), approximate="tanh")
        x = x + m @ q("mlp.c_proj.weight") + q("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    logits = x @ p["wte.weight"].t()
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1).long(), reduction="sum") / normaliser


def mlp_loss(p, x, targets, activation, normaliser):
    n = len({k.split(".")[1] for k in p if k.startswith("layers.")})
    act = (lambda z: F.gelu(z, approximate="tanh")) if activation == "gelu" else F.relu
    h = x
    for i in range(n):
        h = F.linear(h, p[f"layers.{i}.weight"], p[f"layers.{i}.bias"])
        if i + 1 < n:
            h = act(h)
    return F.cross_entropy(h, targets.long(), reduction="sum") / normaliser


def model_loss(kind, p, inputs, targets, normaliser, n_head=None, activation="gelu"):
    if kind == "gpt":
        return gpt_loss(p, inputs, targets, n_head, normaliser)
    return mlp_loss(p, inputs.to(next(iter(p.values())).dtype), targets, activation, normaliser)
