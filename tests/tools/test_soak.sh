#!/usr/bin/env bash
# Soak (label soak, not in the default run): STEPS steps of tiny GPT on 2
# local ranks. The caching allocator's reserved memory is flat after step 2,
# the process's RSS is flat within 5% after warm-up, and every loss is finite.
# usage: test_soak.sh ZRT-TRAIN PYTHON [STEPS=5000]
set -u
train=$1 python=$2 steps=${3:-5000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$train" --steps "$steps" --ranks 2 --metrics "$dir/m.jsonl" --log-every 1000 || { echo "FAIL: training"; exit 1; }
"$python" - "$dir/m.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert all(math.isfinite(r["loss"]) for r in rows), "a non-finite loss"
reserved = {r["mem_reserved"] for r in rows[2:]}
assert len(reserved) == 1, f"reserved memory moved after step 2: {sorted(reserved)}"
warm = rows[min(100, len(rows) - 1)]["rss"]
worst = max(r["rss"] for r in rows[100:]) if len(rows) > 100 else warm
assert worst <= 1.05 * warm, f"RSS grew from {warm} to {worst} bytes"
print(f"ok   {len(rows)} steps: loss {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f}, reserved {reserved.pop()} bytes "
      f"flat after step 2, RSS {warm / 2**20:.1f} MiB at step 100, at most {worst / 2**20:.1f} MiB after")
PY
