"""Runs torch.optim.AdamW on the inputs test_adamw_torch writes and writes the
results back. Usage: adamw_torch_reference.py DIR

DIR/config.txt: "n steps lr beta1 beta2 eps weight_decay" on line 1, then the
decay ranges as "begin end" lines. DIR/param.bin and DIR/grad_<k>.bin (k = 1
.. steps) are little-endian float32. Writes DIR/{param,exp_avg,exp_avg_sq}_out.bin.
Each decay range (and each gap between them) is its own parameter, the
decaying ones in a group with weight_decay and the others with 0.
"""
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # the C++ test turns this exit code into a clear failure
    print(f"cannot import torch/numpy with {sys.executable}: {e}", file=sys.stderr)
    sys.exit(3)


def main(d):
    with open(f"{d}/config.txt") as f:
        head = f.readline().split()
        n, steps = int(head[0]), int(head[1])
        lr, beta1, beta2, eps, wd = map(float, head[2:7])
        ranges = [tuple(map(int, line.split())) for line in f if line.strip()]
    flat = np.fromfile(f"{d}/param.bin", dtype="<f4")
    assert flat.size == n
    pieces, pos = [], 0  # (begin, end, decays)
    for b, e in ranges:
        if b > pos:
            pieces.append((pos, b, False))
        if e > b:
            pieces.append((b, e, True))
        pos = e
    if n > pos:
        pieces.append((pos, n, False))
    params = [torch.nn.Parameter(torch.from_numpy(flat[b:e].copy())) for b, e, _ in pieces]
    groups = [
        {"params": [p for p, pc in zip(params, pieces) if pc[2]], "weight_decay": wd},
        {"params": [p for p, pc in zip(params, pieces) if not pc[2]], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=eps, foreach=False)
    for k in range(1, steps + 1):
        grad = np.fromfile(f"{d}/grad_{k}.bin", dtype="<f4")
        for p, (b, e, _) in zip(params, pieces):
            p.grad = torch.from_numpy(grad[b:e].copy())
        opt.step()
    def gather(get):
        return np.concatenate([get(p).detach().numpy() for p in params]).astype("<f4")
    gather(lambda p: p).tofile(f"{d}/param_out.bin")
    gather(lambda p: opt.state[p]["exp_avg"]).tofile(f"{d}/exp_avg_out.bin")
    gather(lambda p: opt.state[p]["exp_avg_sq"]).tofile(f"{d}/exp_avg_sq_out.bin")


if __name__ == "__main__":
    main(sys.argv[1])
