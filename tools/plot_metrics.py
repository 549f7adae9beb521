#!/usr/bin/env python3
"""Plots a zrt-train --metrics JSONL file: loss, gradient norm, tokens/s and
memory per step, into one PNG.

usage: tools/plot_metrics.py METRICS.jsonl [--out metrics.png] [--title TEXT]

Needs matplotlib (Debian: python3-matplotlib); without it, says so and exits 2.
"""
import argparse
import json
import math
import sys


def read_metrics(path):
    steps = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                steps.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics: {path}:{n}: not a JSON line: {e}")
    if not steps:
        sys.exit(f"plot_metrics: {path} holds no steps")
    for key in ("step", "loss", "grad_norm", "tokens_per_s", "mem_allocated", "mem_reserved"):
        if key not in steps[0]:
            sys.exit(f"plot_metrics: {path}: lines lack '{key}' (is this a zrt-train --metrics file?)")
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics")
    parser.add_argument("--out", default="metrics.png")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    steps = read_metrics(args.metrics)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_metrics: matplotlib is not installed (Debian: apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 2

    x = [s["step"] + 1 for s in steps]
    finite = lambda v: v if isinstance(v, (int, float)) and math.isfinite(v) else float("nan")
    fig, ax = plt.subplots(2, 2, figsize=(10, 6.5), sharex=True)
    ax[0][0].plot(x, [finite(s["loss"]) for s in steps])
    ax[0][0].set_ylabel("loss")
    ax[0][1].plot(x, [finite(s["grad_norm"]) for s in steps])
    ax[0][1].set_ylabel("gradient norm (before clipping)")
    skipped = [xi for xi, s in zip(x, steps) if s.get("skipped")]
    if skipped:
        ax[0][1].plot(skipped, [0] * len(skipped), "rx", label="skipped step")
        ax[0][1].legend()
    ax[1][0].plot(x, [finite(s["tokens_per_s"]) for s in steps])
    ax[1][0].set_ylabel("tokens (rows) / s")
    ax[1][1].plot(x, [s["mem_allocated"] / 2**20 for s in steps], label="allocated")
    ax[1][1].plot(x, [s["mem_reserved"] / 2**20 for s in steps], label="reserved")
    ax[1][1].set_ylabel("rank 0 memory (MiB)")
    ax[1][1].legend()
    for a in ax[1]:
        a.set_xlabel("step")
    for row in ax:
        for a in row:
            a.grid(alpha=0.3)
    fig.suptitle(args.title or args.metrics)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"plot_metrics: wrote {args.out} ({len(steps)} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
