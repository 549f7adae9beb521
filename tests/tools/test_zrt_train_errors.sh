#!/usr/bin/env bash
# Bad input to zrt-train: each case exits non-zero with a message naming the
# problem, and writes neither the metrics nor the weights file.
# usage: test_zrt_train_errors.sh PATH/TO/zrt-train
set -u
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0

# expect_error NAME PATTERN ARGS...: runs zrt-train ARGS with --metrics/--save in $dir.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  rm -f "$dir/m.jsonl" "$dir/w.safetensors"
  local out rc
  out=$("$train" "$@" --steps 2 --metrics "$dir/m.jsonl" --save "$dir/w.safetensors" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "FAIL $name: exit code 0"; failures=$((failures + 1)); return
  fi
  if ! grep -qiE "$pattern" <<<"$out"; then
    echo "FAIL $name: message does not match /$pattern/: $out"; failures=$((failures + 1)); return
  fi
  if [ -e "$dir/m.jsonl" ] || [ -e "$dir/w.safetensors" ]; then
    echo "FAIL $name: wrote a file"; failures=$((failures + 1)); return
  fi
  echo "ok   $name: $(grep -m1 -i error <<<"$out")"
}

printf 'tiny' > "$dir/short.txt"
: > "$dir/empty.txt"
# Valid weights of other models, to load into the tiny GPT.
"$train" --model mlp --steps 1 --save "$dir/mlp.safetensors" > /dev/null || { echo "FAIL: cannot make mlp weights"; exit 1; }
"$train" --n-layer 1 --steps 1 --save "$dir/shallow.safetensors" > /dev/null || { echo "FAIL: cannot make 1-layer weights"; exit 1; }
"$train" --n-embd 64 --steps 1 --save "$dir/wide.safetensors" > /dev/null || { echo "FAIL: cannot make wide weights"; exit 1; }

expect_error "missing data file" "no-such-file" --data "$dir/no-such-file.txt"
expect_error "empty data file" "empty" --data "$dir/empty.txt"
expect_error "seq-len longer than the data" "seq|short|long" --data "$dir/short.txt" --seq-len 64
expect_error "batch not divisible" "divisible|divide" --ranks 2 --batch-size 3
expect_error "micro-batches not dividing" "divisible|divide" --batch-size 6 --micro-batches 4
expect_error "unknown preset" "preset" --preset huge
expect_error "unknown flag value" "dtype" --dtype fp8
expect_error "init file with missing keys" "h\.1\..*missing|missing.*h\.1\." --init-from "$dir/shallow.safetensors"
expect_error "init file of another model" "layers\.0" --init-from "$dir/mlp.safetensors"
expect_error "init file with mis-shaped keys" "shape" --init-from "$dir/wide.safetensors"
expect_error "init file that does not exist" "nope" --init-from "$dir/nope.safetensors"
expect_error "zero3 size not dividing the world" "divide" --ranks 2 --strategy hybrid --zero3-size 3
expect_error "block size shorter than the sequence" "block-size 32 is shorter than --seq-len 64" --block-size 32
expect_error "prefetch deeper than 2" "prefetch" --prefetch 3
expect_error "unknown reduce dtype" "reduce-dtype" --reduce-dtype fp8

echo "$(( 15 - failures )) passed, $failures failed"
[ $failures -eq 0 ]
