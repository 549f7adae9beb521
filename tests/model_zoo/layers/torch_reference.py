"""PyTorch reference for test_layers_torch: reads a case's inputs (raw
float32 / int64 .bin files) from a directory, runs the layer forward and
backward with torch (float32, CPU), writes the outputs as float32 .bin.

usage: torch_reference.py CASE DIR [key=value ...]
"""
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # reported by the C++ test as a clear failure
    print(f"cannot import torch: {e}", file=sys.stderr)
    sys.exit(3)


def main():
    case, d = sys.argv[1], sys.argv[2]
    args = dict(a.split("=", 1) for a in sys.argv[3:])
    shapes = {}

    def load(name, dtype=torch.float32, grad=False):
        shape = [int(s) for s in args[name + "_shape"].split(",") if s]
        np_dtype = {torch.float32: 4, torch.int64: 8}[dtype]
        with open(os.path.join(d, name + ".bin"), "rb") as f:
            raw = bytearray(f.read())
        t = torch.frombuffer(raw, dtype=dtype).reshape(shape).clone() if raw else torch.zeros(shape, dtype=dtype)
        shapes[name] = shape
        return t.requires_grad_(grad)

    def save(name, t):
        with open(os.path.join(d, name + ".bin"), "wb") as f:
            f.write(t.detach().to(torch.float32).contiguous().numpy().tobytes())

    if case in ("linear_out_in", "linear_in_out"):
        x, w, b, dy = load("x", grad=True), load("w", grad=True), load("b", grad=True), load("dy")
        y = F.linear(x, w, b) if case == "linear_out_in" else x @ w + b
        y.backward(dy)
        save("y", y), save("dx", x.grad), save("dw", w.grad), save("db", b.grad)
    elif case in ("gelu", "relu"):
        x, dy = load("x", grad=True), load("dy")
        y = F.gelu(x, approximate="tanh") if case == "gelu" else F.relu(x)
        y.backward(dy)
        save("y", y), save("dx", x.grad)
    elif case == "layernorm":
        x, w, b, dy = load("x", grad=True), load("w", grad=True), load("b", grad=True), load("dy")
        y = F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)
        y.backward(dy)
        save("y", y), save("dx", x.grad), save("dw", w.grad), save("db", b.grad)
    elif case == "embedding":
        ids, wte, wpe, dy = load("ids", torch.int64), load("wte", grad=True), load("wpe", grad=True), load("dy")
        t = ids.shape[-1]
        y = F.embedding(ids, wte) + wpe[:t]
        y.backward(dy)
        save("y", y), save("dwte", wte.grad), save("dwpe", wpe.grad)
    elif case == "attention":
        x, dy = load("x", grad=True), load("dy")
        wqkv, bqkv = load("wqkv", grad=True), load("bqkv", grad=True)
        wproj, bproj = load("wproj", grad=True), load("bproj", grad=True)
        nh = int(args["n_head"])
        B, T, C = x.shape
        q, k, v = F.linear(x, wqkv, bqkv).split(C, dim=2)
        q, k, v = (z.view(B, T, nh, C // nh).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // nh)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, C)
        y = F.linear(o, wproj, bproj)
        y.backward(dy)
        save("y", y), save("dx", x.grad)
        save("dwqkv", wqkv.grad), save("dbqkv", bqkv.grad), save("dwproj", wproj.grad), save("dbproj", bproj.grad)
    elif case == "cross_entropy":
        logits, targets = load("logits", grad=True), load("targets", torch.int64)
        norm, dloss = float(args["normaliser"]), float(args["dloss"])
        loss = F.cross_entropy(logits, targets, ignore_index=-1, reduction="sum") / norm
        (loss * dloss).backward()
        save("loss", loss.reshape(1)), save("dlogits", logits.grad)
    else:
        print(f"unknown case {case}", file=sys.stderr)
        sys.exit(2)


main()
