#!/usr/bin/env bash
# The "CPU training speed vs PyTorch" table of README.md: torch_gpt.py
# --compare on each case, one Markdown row per case, 3 alternating rounds.
# usage: tools/bench/cpu_vs_torch.sh [ZRT-BENCH] [PYTHON]   (PYTHON: one with PyTorch 2.x)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=${1:-$here/../../build/tools/bench/zrt-bench}
python=${2:-python3}
compare() { "$python" "$here/torch_gpt.py" --compare --zrt-bench "$bench" --rounds 3 --markdown "$@"; }
git -C "$here" rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /' || true
echo "| model, batch | ranks × threads | zrt step | torch step | zrt/torch | zrt GFLOP/s (of peak) | torch GFLOP/s (of peak) | zrt memory: allocator / RSS | torch RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for t in 1 2; do compare --preset small --batch-size 16 --seq-len 128 --threads "$t" --warmup 1 --steps 3; done
for t in 1 2; do compare --preset gpt2-124m --batch-size 4 --seq-len 64 --threads "$t" --warmup 1 --steps 2; done
compare --preset small --batch-size 16 --seq-len 128 --ranks 4 --threads 1 --warmup 1 --steps 3
compare --preset small --batch-size 16 --seq-len 128 --ranks 4 --threads 1 --warmup 1 --steps 3 --mpirun
