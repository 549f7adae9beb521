#!/usr/bin/env bash
# tools/plot_metrics.py turns a zrt-train --metrics file into a PNG, and names
# a file that is not one. Exit 77 (skipped) without matplotlib.
# usage: test_plot_metrics.sh ZRT-TRAIN PYTHON
set -u
train=$1 python=$2
plot="$(dirname "$0")/../../tools/plot_metrics.py"
"$python" -c "import matplotlib" 2> /dev/null || { echo "matplotlib is not installed: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$train" --steps 5 --metrics "$dir/m.jsonl" > /dev/null || { echo "FAIL: training"; exit 1; }
"$python" "$plot" "$dir/m.jsonl" --out "$dir/m.png" || { echo "FAIL: plot"; exit 1; }
[ "$(head -c 8 "$dir/m.png" | od -An -tx1 | tr -d ' ')" = "89504e470d0a1a0a" ] || { echo "FAIL: not a PNG"; exit 1; }
echo '{"not": "metrics"}' > "$dir/bad.jsonl"
out=$("$python" "$plot" "$dir/bad.jsonl" --out "$dir/bad.png" 2>&1) && { echo "FAIL: accepted a non-metrics file"; exit 1; }
grep -q "lack 'step'" <<<"$out" || { echo "FAIL: message: $out"; exit 1; }
[ ! -e "$dir/bad.png" ] || { echo "FAIL: wrote a PNG for a bad file"; exit 1; }
echo "ok"
