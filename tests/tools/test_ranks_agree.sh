#!/usr/bin/env bash
# Ranks given different flags or data fail at start, each with the same error
# naming the flag and the ranks, before any step and before any output is
# written; ranks given the same flags train.
# usage: test_ranks_agree.sh PATH/TO/zrt-train PATH/TO/mpirun
set -u
train=$1 mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
. "$(dirname "$0")/user_messages.sh"
export ZRT_COMM_TIMEOUT_S=60  # a missed agreement would hang until this, and fail the test's timeout
base=(--n-layer 1 --n-embd 16 --n-head 2 --batch-size 4)
# with_defaults ARGS...: ARGS plus --steps 2 and --seq-len 16 where ARGS set neither.
with_defaults() {
  local args=("$@")
  [[ " ${args[*]} " == *" --steps "* ]] || args+=(--steps 2)
  [[ " ${args[*]} " == *" --seq-len "* ]] || args+=(--seq-len 16)
  echo "${args[@]}"
}
printf 'one text for the data file, long enough for a few sequences of sixteen. %.0s' $(seq 20) > "$dir/a.txt"
printf 'another text for the data, long enough for a few sequences of sixteen. %.0s' $(seq 20) > "$dir/b.txt"

# expect_disagreement NAME PATTERN RANK0-ARGS -- RANK1-ARGS
expect_disagreement() {
  local name=$1 pattern=$2
  shift 2
  local first=() second=()
  while [ "$1" != "--" ]; do first+=("$1"); shift; done
  shift
  second=("$@")
  rm -f "$dir/m.jsonl"
  local out rc
  # shellcheck disable=SC2046  # the cases' arguments hold no spaces
  out=$("$mpiexec" --oversubscribe --allow-run-as-root -np 1 "$train" "${base[@]}" --metrics "$dir/m.jsonl" \
          $(with_defaults "${first[@]}") : -np 1 "$train" "${base[@]}" --metrics "$dir/m.jsonl" \
          $(with_defaults "${second[@]}") 2>&1)
  rc=$?
  local said
  said=$(grep -cE -- "$pattern" <<<"$out")
  if [ $rc -eq 0 ]; then echo "FAIL $name: exit code 0"; failures=$((failures + 1))
  elif [ "$said" -lt 2 ]; then echo "FAIL $name: not every rank named /$pattern/: $out"; failures=$((failures + 1))
  elif [ -e "$dir/m.jsonl" ] && [ -s "$dir/m.jsonl" ]; then echo "FAIL $name: a step ran"; failures=$((failures + 1))
  elif shows_source "$name" "$out"; then failures=$((failures + 1))
  else echo "ok   $name: $(grep -m1 -E -- "$pattern" <<<"$out")"; fi
}

expect_disagreement "different --seq-len" "--seq-len: rank 0 has 16; rank 1 has 8" -- --seq-len 8
expect_disagreement "different --lr" "--lr: rank 0 has 0.003; rank 1 has 0.001" -- --lr 1e-3
expect_disagreement "different --seed" "--seed: rank 0 has 1337; rank 1 has 7" -- --seed 7
expect_disagreement "different --strategy" "--strategy: rank 0 has \"full\"; rank 1 has \"grad-op\"" -- --strategy grad-op
expect_disagreement "different --steps" "--steps: rank 0 has 2; rank 1 has 3" -- --steps 3
expect_disagreement "different --data contents" "--data \\(contents\\): rank 0 has \"1440 bytes" --data "$dir/a.txt" -- --data "$dir/b.txt"
expect_disagreement "--save on one rank only" "--save \\(given\\): rank 0 has true; rank 1 has false" \
  --save "$dir/w.safetensors" --
expect_disagreement "--checkpoint-dir on one rank only" "--checkpoint-dir \\(given\\): rank 0 has false; rank 1 has true" -- --checkpoint-dir "$dir/ck"
expect_disagreement "--cpu-streams on one rank only" "--cpu-streams: rank 0 has \"\\(not given\\)\"; rank 1 has \"none\"" \
  -- --cpu-streams none
# Different --checkpoint-dir values (hosts without a shared filesystem):
# refused before any step, not at the first save.
if out=$("$mpiexec" --oversubscribe --allow-run-as-root -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 \
     --checkpoint-dir "$dir/cka" --metrics "$dir/mc.jsonl" : -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 \
     --checkpoint-dir "$dir/ckb" --metrics "$dir/mc.jsonl" 2>&1); then
  echo "FAIL different --checkpoint-dir: exit code 0"; failures=$((failures + 1))
elif grep -q -- "--checkpoint-dir: rank 1 does not see the directory rank 0 writes into" <<<"$out" &&
     [ ! -s "$dir/mc.jsonl" ]; then
  echo "ok   different --checkpoint-dir is refused before any step"
else echo "FAIL different --checkpoint-dir: $out"; failures=$((failures + 1)); fi
# --metrics on rank 1 only: rank 0 writes the metrics, so none would be.
if out=$("$mpiexec" --oversubscribe --allow-run-as-root -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 \
     : -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 --metrics "$dir/m1.jsonl" 2>&1); then
  echo "FAIL --metrics on rank 1 only: exit code 0"; failures=$((failures + 1))
elif grep -q -- "--metrics (given): rank 0 has false; rank 1 has true" <<<"$out"; then
  echo "ok   --metrics on rank 1 only is refused"
else echo "FAIL --metrics on rank 1 only: $out"; failures=$((failures + 1)); fi
# Every flag is compared, with no line per flag: one added since the list was written.
expect_disagreement "--offload-grads on one rank only" "--offload-grads: rank 0 has true; rank 1 has false" \
  --offload-grads --
"$train" "${base[@]}" --steps 1 --seq-len 16 --save "$dir/w1.safetensors" > /dev/null
"$train" "${base[@]}" --steps 2 --seq-len 16 --save "$dir/w2.safetensors" > /dev/null
expect_disagreement "different --init-from contents" "--init-from \\(contents\\): rank 0 has \"[0-9]+ bytes" \
  --init-from "$dir/w1.safetensors" -- --init-from "$dir/w2.safetensors"
# Two checkpoints of the same step (other seeds): each rank resuming its own would train a mix.
"$train" "${base[@]}" --steps 2 --seq-len 16 --checkpoint-dir "$dir/ck1" --checkpoint-every 1 > /dev/null
"$train" "${base[@]}" --steps 2 --seq-len 16 --seed 7 --checkpoint-dir "$dir/ck2" > /dev/null
expect_disagreement "different resumed checkpoints" "--resume \\(checkpoint index\\): rank 0 has \"step-000002, [0-9]+ bytes" \
  --steps 3 --resume "$dir/ck1/step-000002" -- --steps 3 --resume "$dir/ck2/step-000002"
# Two steps of one run: the message names them.
expect_disagreement "two resumed steps" "--resume \\(checkpoint index\\): rank 0 has \"step-000001, .*rank 1 has \"step-000002, " \
  --steps 3 --resume "$dir/ck1/step-000001" -- --steps 3 --resume "$dir/ck1/step-000002"

cp "$dir/a.txt" "$dir/a-copy.txt"
if "$mpiexec" --oversubscribe --allow-run-as-root -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 --data "$dir/a.txt" \
     : -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 --data "$dir/a-copy.txt" > "$dir/same.txt" 2>&1; then
  echo "ok   the same data under another path trains"
else
  echo "FAIL the same data under another path: $(cat "$dir/same.txt")"; failures=$((failures + 1))
fi
# A number spelled two ways is one value.
if "$mpiexec" --oversubscribe --allow-run-as-root -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 --lr 1e-3 \
     : -np 1 "$train" "${base[@]}" --steps 2 --seq-len 16 --lr 0.001 > "$dir/same.txt" 2>&1; then
  echo "ok   --lr 1e-3 and --lr 0.001 agree"
else
  echo "FAIL --lr 1e-3 and --lr 0.001: $(cat "$dir/same.txt")"; failures=$((failures + 1))
fi
# Open MPI gives ranks a pty: output to a file still gets a line per --log-every, not a \r per step.
"$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$train" "${base[@]}" --steps 25 --log-every 10 --seq-len 16 \
  > "$dir/log.txt" 2>&1
if ! grep -q $'\r' "$dir/log.txt" && [ "$(grep -c '^step' "$dir/log.txt")" -eq 4 ]; then
  echo "ok   --log-every 10 under mpirun: 4 progress lines for 25 steps"
else
  echo "FAIL --log-every 10 under mpirun: $(grep -c $'\r' "$dir/log.txt") lines with \\r: $(tr '\r' '\n' < "$dir/log.txt" | head -5)"
  failures=$((failures + 1))
fi
[ $failures -eq 0 ] && echo "all cases passed"
exit $((failures > 0))
