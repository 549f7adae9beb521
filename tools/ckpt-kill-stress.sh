#!/usr/bin/env bash
# Kills a checkpointing zrt-train run with SIGKILL at random moments, TRIALS
# times; after every kill the checkpoint's `latest` must verify, and every
# fifth time a run must resume from it (Note [Atomic checkpoint steps]).
# usage: ckpt-kill-stress.sh ZRT-TRAIN ZRT-CKPT [TRIALS=100] [ZRT-TRAIN FLAG...]
# (e.g. --checkpoint-async: the kills then land in background writes too)
set -u
train=$1 ckpt=$2 trials=${3:-100}
shift $(( $# < 3 ? $# : 3 ))
extra=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0 saved=0
for t in $(seq 1 "$trials"); do
  "$train" --steps 100000 --batch-size 4 --seq-len 16 --checkpoint-dir "$dir/ck" --checkpoint-every 1 \
    --keep-last 2 --log-every 100000 "${extra[@]}" > /dev/null 2>&1 &
  pid=$!
  sleep "0.$(( RANDOM % 9 + 1 ))$(( RANDOM % 10 ))"
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  [ -e "$dir/ck/latest" ] || continue  # killed before the first save completed
  saved=$((saved + 1))
  if ! out=$("$ckpt" verify "$dir/ck" 2>&1); then
    echo "FAIL trial $t: latest does not verify: $out"; failures=$((failures + 1)); continue
  fi
  for d in "$dir"/ck/step-*; do
    case "$d" in *.tmp) continue ;; esac
    [ -e "$d/index.json" ] || { echo "FAIL trial $t: $d has no index.json"; failures=$((failures + 1)); }
  done
  if [ $((t % 5)) -eq 0 ]; then
    step=$(sed -n '1s/step-0*//p' "$dir/ck/latest"); step=${step:-0}
    if ! out=$("$train" --steps $((step + 1)) --batch-size 4 --seq-len 16 --checkpoint-dir "$dir/ck" --resume \
               --log-every 100000 "${extra[@]}" 2>&1); then
      echo "FAIL trial $t: cannot resume: $out"; failures=$((failures + 1))
    fi
  fi
done
echo "kill trials: $trials, with a checkpoint: $saved, failures: $failures"
[ "$saved" -gt 0 ] && [ $failures -eq 0 ]
