"""Trains a zrt model-zoo model in PyTorch (float32, CPU) the way zrt-train
does, as the reference of the training engine's tests.

usage: torch_train_reference.py --kind gpt|mlp --init INIT.safetensors --data DATA
         --steps N --batch B [--seq-len T] [--world W] [--micro M]
         [--n-head H] [--activation gelu|relu]
         [--lr 1e-3] [--min-lr 0] [--warmup 0] [--decay-steps N]
         [--beta1 0.9] [--beta2 0.95] [--eps 1e-8] [--weight-decay 0.1] [--clip 1.0]
         [--dtype float32|float64]
         --out-losses LOSSES.json [--out-weights FINAL.safetensors]

INIT: every primary parameter by zrt fqn (a leading "transformer." is removed;
tied lm_head.weight and attention-mask buffers are ignored). DATA: llm.c
token file (.bin), a safetensors file (`x` f32 [N, d_in] and `y` i64 [N] for
mlp, or `tokens` [len] for gpt), or any other file read as byte tokens.
Model shapes come from INIT; only the head count and activation are options.

Per step s (0-based): the global batch is built exactly as
model_zoo/data/micro_batch.h's Note [Data order] says, run as W ranks × M
micro-batches in order (rank-major), each with loss = sum / (B·T) (gpt) or
/ B (mlp), gradients accumulated; then global-norm clipping (torch's
clip_grad_norm_; --clip 0 disables), the learning rate
  s < warmup: lr·(s+1)/warmup;  s ≥ decay_steps: min_lr;
  else min_lr + 0.5·(1 + cos(π·(s − warmup)/(decay_steps − warmup)))·(lr − min_lr)
and one torch.optim.AdamW step (weight decay only on ≥2-dim parameters).
LOSSES.json: {"losses": [loss of step 0, ...], "lrs": [...], "grad_norms": [...]}
(loss = the global-batch mean before the update). FINAL: the trained fp32
parameters by fqn.
"""
import argparse
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
except ImportError as e:
    print(f"cannot import torch: {e}", file=sys.stderr)
    sys.exit(3)
import safetensors_io
from torch_models import model_loss


def load_params(path):
    t, _ = safetensors_io.read(path)
    out = {}
    for k, v in t.items():
        k = k[len("transformer."):] if k.startswith("transformer.") else k
        if k == "lm_head.weight" or k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue
        out[k] = v
    return out


def load_data(path):
    """('tokens', int64 [len]) or ('rows', (x f32 [N, d], y i64 [N]))."""
    if path.endswith(".bin"):
        with open(path, "rb") as f:
            raw = f.read()
        magic, version, count = struct.unpack("<3i", raw[:12])
        assert magic == 20240520 and version == 1 and len(raw) == 1024 + 2 * count, "bad llm.c file"
        return "tokens", torch.frombuffer(bytearray(raw[1024:]), dtype=torch.int16).to(torch.int64) & 0xFFFF
    if path.endswith(".safetensors"):
        t, _ = safetensors_io.read(path)
        if "tokens" in t:
            return "tokens", t["tokens"].to(torch.int64)
        return "rows", (t["x"].to(torch.float32), t["y"].to(torch.int64))
    with open(path, "rb") as f:
        return "tokens", torch.tensor(list(f.read()), dtype=torch.int64)


def global_batch_indices(step, B, T, n, kind):
    """Start offsets (tokens) or row indices of the B sequences/rows of a step."""
    if kind == "tokens":
        span = n - T
        return [((step * B + j) * T) % span for j in range(B)]
    return [(step * B + j) % n for j in range(B)]


def lr_at(s, a):
    decay = a.decay_steps if a.decay_steps is not None else a.steps
    if s < a.warmup:
        return a.lr * (s + 1) / a.warmup
    if s >= decay:
        return a.min_lr
    r = (s - a.warmup) / (decay - a.warmup)
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (a.lr - a.min_lr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", required=True, choices=["gpt", "mlp"])
    ap.add_argument("--init", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--micro", type=int, default=1)
    ap.add_argument("--n-head", type=int)
    ap.add_argument("--activation", default="gelu", choices=["gelu", "relu"])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=0.0)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--decay-steps", type=int)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--out-losses", required=True)
    ap.add_argument("--out-weights")
    a = ap.parse_args()
    if a.kind == "gpt" and (a.n_head is None or a.seq_len < 1):
        sys.exit("gpt needs --n-head and --seq-len")
    B, W, M, T = a.batch, a.world, a.micro, a.seq_len
    if B % (W * M):
        sys.exit(f"batch {B} is not divisible by world {W} x micro {M}")
    dtype = getattr(torch, a.dtype)
    params = {k: v.to(dtype).clone().requires_grad_(True) for k, v in load_params(a.init).items()}
    kind, data = load_data(a.data)
    n = data.numel() if kind == "tokens" else data[1].numel()
    if kind == "tokens" and n < T + 1:
        sys.exit(f"seq-len {T} too long for {n} tokens")
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    normaliser = float(B * T) if kind == "tokens" else float(B)
    b = B // (W * M)
    losses, lrs, norms = [], [], []
    for s in range(a.steps):
        idx = global_batch_indices(s, B, T, n, kind)
        opt.zero_grad(set_to_none=False)
        step_loss = 0.0
        for c in range(W * M):  # rank r's micro-batch m is chunk r·M + m
            chunk = idx[c * b:(c + 1) * b]
            if kind == "tokens":
                x = torch.stack([data[i:i + T] for i in chunk])
                y = torch.stack([data[i + 1:i + T + 1] for i in chunk])
            else:
                x, y = data[0][chunk].to(dtype), data[1][chunk]
            loss = model_loss(a.kind, params, x, y, normaliser, a.n_head, a.activation)
            loss.backward()
            step_loss += loss.item()
        all_p = list(params.values())
        if a.clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(all_p, a.clip)
        else:
            norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in all_p]))
        lr = lr_at(s, a)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(step_loss)
        lrs.append(lr)
        norms.append(float(norm))
    with open(a.out_losses, "w") as f:
        json.dump({"losses": losses, "lrs": lrs, "grad_norms": norms}, f)
    if a.out_weights:
        safetensors_io.write(a.out_weights, {k: v.detach().to(torch.float32) for k, v in params.items()})


if __name__ == "__main__":
    main()
