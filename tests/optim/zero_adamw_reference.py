"""Runs torch.optim.AdamW with torch.nn.utils.clip_grad_norm_ in float64 on the scenario
the optimizer tests write, single-process. Usage: zero_adamw_reference.py DIR

DIR/config.txt: "steps beta1 beta2 eps weight_decay max_grad_norm" on line 1,
the lr of each step on line 2, then one line per parameter: "ndim d0 d1 ...".
DIR/param.bin holds the initial parameters and DIR/grad_<k>.bin (k = 0 ..
steps-1) the gradients of step k, concatenated in parameter order, as
little-endian float32. Parameters with two or more dims decay, the others do
not (GPT-2 convention). Clipping is skipped when max_grad_norm <= 0.
Writes DIR/{param,exp_avg,exp_avg_sq}_out.bin and DIR/norms.txt (the total
gradient norm of each step, before clipping).
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
        steps = int(head[0])
        beta1, beta2, eps, wd, max_norm = map(float, head[1:6])
        lrs = [float(x) for x in f.readline().split()]
        shapes = [tuple(int(x) for x in line.split()[1:]) for line in f if line.strip()]
    assert len(lrs) == steps
    numels = [int(np.prod(s)) for s in shapes]
    offsets = np.cumsum([0] + numels)

    def split(flat):
        # float64: the reference is AdamW's exact value for these fp32 inputs,
        # so the comparison measures zrt's fp32 rounding alone.
        return [torch.from_numpy(flat[offsets[i]:offsets[i + 1]].astype("<f8")).reshape(shapes[i])
                for i in range(len(shapes))]

    params = [torch.nn.Parameter(t) for t in split(np.fromfile(f"{d}/param.bin", dtype="<f4"))]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=lrs[0], betas=(beta1, beta2), eps=eps, foreach=False)
    norms = []
    for k in range(steps):
        for p, g in zip(params, split(np.fromfile(f"{d}/grad_{k}.bin", dtype="<f4"))):
            p.grad = g
        if max_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        else:
            norm = torch.norm(torch.stack([torch.norm(p.grad) for p in params]))
        norms.append(float(norm))
        for group in opt.param_groups:
            group["lr"] = lrs[k]
        opt.step()

    def gather(get):
        return np.concatenate([get(p).detach().reshape(-1).numpy() for p in params]).astype("<f4")

    gather(lambda p: p).tofile(f"{d}/param_out.bin")
    gather(lambda p: opt.state[p]["exp_avg"]).tofile(f"{d}/exp_avg_out.bin")
    gather(lambda p: opt.state[p]["exp_avg_sq"]).tofile(f"{d}/exp_avg_sq_out.bin")
    with open(f"{d}/norms.txt", "w") as f:
        f.write("\n".join(repr(n) for n in norms) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
