#!/usr/bin/env bash
# zrt-train --head-unit (ln_f and the LM head in a wrap unit of their own,
# the head tied across units to wte) trains bit for bit as the default
# layout on local ranks and under mpirun -np 2 (with --clip 0: the global
# norm, reported and clipped by, sums the units in another order, so only
# the losses and weights are compared); its checkpoint resumes without the
# flag, and its export holds the tied weight once. (Under mpirun with more
# ranks, MPI may group the ranks' sums differently for the layouts'
# differently sized buffers.)
# usage: test_zrt_train_head_unit.sh ZRT-TRAIN ZRT-CKPT [MPIEXEC]
set -u
train=$1 ckpt=$2 mpiexec=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
common=(--steps 6 --batch-size 6 --seq-len 32 --clip 0 --log-every 1000)
losses() { sed 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/' "$1"; }

# 1. Both layouts, bit for bit: final weights byte for byte, every loss.
alike() {
  local name=$1; shift
  rm -f "$dir"/a.* "$dir"/b.*
  "$@" "${common[@]}" --save "$dir/a.st" --metrics "$dir/a.jsonl" > "$dir/out.txt" 2>&1 &&
  "$@" "${common[@]}" --head-unit --save "$dir/b.st" --metrics "$dir/b.jsonl" >> "$dir/out.txt" 2>&1 ||
    { cat "$dir/out.txt"; fail "$name: a run failed"; return; }
  cmp -s "$dir/a.st" "$dir/b.st" || { fail "$name: final weights differ"; return; }
  diff <(losses "$dir/a.jsonl") <(losses "$dir/b.jsonl") > /dev/null || { fail "$name: losses differ"; return; }
  ok "$name: --head-unit trains bit for bit as the default layout"
}
alike "3 local ranks, full" "$train" --ranks 3
alike "2 local ranks, grad-op bf16 micro-batches" "$train" --ranks 2 --strategy grad-op --dtype bf16 --micro-batches 3
if [ -n "$mpiexec" ]; then
  alike "mpirun -np 2, hybrid" "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$train" --strategy hybrid \
    --zero3-size 1
fi

# 2. A --head-unit checkpoint resumes in the default layout as the uninterrupted run goes on.
"$train" --ranks 2 "${common[@]}" --save "$dir/full.st" > "$dir/out.txt" 2>&1 &&
"$train" --ranks 2 "${common[@]}" --head-unit --checkpoint-dir "$dir/ck" --checkpoint-every 3 \
  > "$dir/out.txt" 2>&1 &&
"$train" --ranks 2 "${common[@]}" --checkpoint-dir "$dir/ck" --resume "$dir/ck/step-000003" --save "$dir/resumed.st" \
  > "$dir/out.txt" 2>&1 || { cat "$dir/out.txt"; fail "checkpoint runs failed"; }
cmp -s "$dir/full.st" "$dir/resumed.st" && ok "a --head-unit checkpoint resumes without it, bit for bit" ||
  fail "a --head-unit checkpoint resumed without it trains otherwise"

# 3. The export of a --head-unit checkpoint equals the default layout's weights: wte once, no lm_head.
"$ckpt" export "$dir/ck" --out "$dir/export.st" > /dev/null && cmp -s "$dir/export.st" "$dir/full.st" &&
  ok "the export holds the tied weight once" || fail "export of a --head-unit checkpoint"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
