#!/usr/bin/env bash
# Every zrt-bench suite runs once at a tiny size and exits 0 with its table
# (ops on a runtime op and a model-zoo op, and across kernel threads); bad
# values and environment fail with a message in the user's
# words (Note [User errors and internal errors]).
# usage: test_zrt_bench_suites.sh ZRT-BENCH
set -u
bench=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
. "$(dirname "$0")/user_messages.sh"

# runs NAME ARGS...: zrt-bench ARGS exits 0 and prints a table.
runs() {
  local name=$1; shift
  local out rc
  out=$(timeout 120 "$bench" "$@" 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL $name: exit code $rc: $out"; failures=$((failures + 1)); return; fi
  echo "ok   $name: $(wc -l <<<"$out") lines"
}
runs "ops" ops --device cpu --op scale_ --reps 1
runs "ops, a model-zoo op" ops --device cpu --op residual --reps 1
ZRT_CPU_THREADS=4 runs "ops on 4 threads" ops --device cpu --op flatten --reps 2
runs "comm" comm --op all_reduce --size 4096 --ranks 2 --reps 1
runs "optim" optim --params 20000 --handles 2 --device cpu --reps 1
mkdir "$dir/ck" && : > "$dir/ck/mine"
runs "ckpt" ckpt --params 20000 --ranks 2 --reps 1 --dir "$dir/ck"
mkdir -p "$dir/ck2/ckpt" && : > "$dir/ck2/ckpt/theirs"
out=$(timeout 60 "$bench" ckpt --params 20000 --reps 1 --dir "$dir/ck2" 2>&1) &&
  { echo "FAIL ckpt --dir holding ckpt/ was accepted"; failures=$((failures + 1)); }
[ -f "$dir/ck2/ckpt/theirs" ] && grep -q "already holds ckpt/" <<<"$out" &&
  echo "ok   ckpt --dir holding its own names is refused" ||
  { echo "FAIL ckpt --dir holding ckpt/: $out"; failures=$((failures + 1)); }
[ "$(ls -A "$dir/ck")" = mine ] && echo "ok   ckpt --dir keeps the directory's own files, none of its own" ||
  { echo "FAIL ckpt --dir left: $(ls -A "$dir/ck" | tr '\n' ' ')"; failures=$((failures + 1)); }
runs "train" train --preset tiny --steps 1 --warmup 0 --batch-size 2 --seq-len 16
runs "gemm" gemm --n-embd 32 --tokens 16 --vocab 64 --reps 1
runs "attention" attention --device cpu --batch 1 --seq 16 --heads 2 --head-dim 8 --dtype f32 --reps 1
runs "tensor" tensor --ops 1000 --reps 1
# --help on stdout; a rate a row lacks is null in --json; --gemm names itself.
"$bench" --help 2> /dev/null | grep -q "^suites:" && echo "ok   zrt-bench --help on stdout" ||
  { echo "FAIL zrt-bench --help is not on stdout"; failures=$((failures + 1)); }
out=$(timeout 60 "$bench" ckpt --params 20000 --reps 1 --json 2>&1)
grep -q '"GB_s":null' <<<"$out" && ! grep -q '"GB_s":""' <<<"$out" && echo "ok   ckpt --json: no rate is null" ||
  { echo "FAIL ckpt --json rows without a rate: $(grep -m1 GB_s <<<"$out")"; failures=$((failures + 1)); }
out=$("$bench" gemm --gemm mkl 2>&1)
grep -q "zrt-bench gemm: error: --gemm mkl is not one of eigen, openblas" <<<"$out" && ! grep -q ZRT_CPU_GEMM <<<"$out" &&
  echo "ok   --gemm mkl names --gemm" || { echo "FAIL --gemm mkl: $out"; failures=$((failures + 1)); }
out=$("$bench" gemm --gemm x:y 2>&1)
grep -q "zrt-bench gemm: error: --gemm x:y is not one of" <<<"$out" &&
  echo "ok   --gemm x:y is quoted whole" || { echo "FAIL --gemm x:y: $out"; failures=$((failures + 1)); }
# --device cuda where this build or machine cannot run it: named, no C++ class.
for suite in optim ops attention; do
  out=$(timeout 60 "$bench" $suite --device cuda --reps 1 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -qE "zrt-bench $suite: error: --device cuda(: this build of zrt has no CUDA support|, but no such CUDA device is usable here)" <<<"$out"; then
    echo "ok   $suite --device cuda without a usable GPU: exit $rc"
  else echo "FAIL $suite --device cuda without a usable GPU: exit $rc: $out"; failures=$((failures + 1)); fi
done

# fails NAME PATTERN ARGS...: zrt-bench ARGS exits 2 (a bad command line, as
# zrt-train) with a message matching PATTERN and no source location.
fails() {
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$(timeout 60 "$bench" "$@" 2>&1); rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL $name: exit code $rc, not 2: $out"; failures=$((failures + 1)); return; fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: message does not match /$pattern/: $out"; failures=$((failures + 1)); return
  fi
  shows_source "$name" "$out" && { failures=$((failures + 1)); return; }
  echo "ok   $name: $(head -n 1 <<<"$out")"
}
fails "ops of 0 reps" "zrt-bench ops: error: --reps must be positive \(got 0\)" ops --reps 0
fails "a reps that is no number" "--reps: many is not a whole number" ops --reps many
fails "an --op no op has" "zrt-bench ops: error: --op 'nope' is in no op's name \(cast" ops --op nope
fails "a comm --op" "zrt-bench comm: error: --op 'gather' is not one of all_gather" comm --op gather
fails "an unknown suite" "unknown suite 'kernel'" kernel
ZRT_TF32=junk fails "ZRT_TF32 of junk" "zrt-bench tensor: error: ZRT_TF32='junk' is not one of 0, 1" tensor
ZRT_SIMPLE_KERNELS=junk fails "ZRT_SIMPLE_KERNELS of junk" "ZRT_SIMPLE_KERNELS='junk': 'junk' is not a kernel" tensor
# Values the suites took and then measured nothing, or failed in other words.
fails "comm of less than an element a rank" "--size 4 is less than one fp32 element a rank \(8 bytes on 2 ranks\)" comm --op all_reduce --size 4 --ranks 2
fails "comm on too many ranks" "--ranks must be from 1 to 1024 \(got 100000\)" comm --op all_reduce --size 64 --ranks 100000
fails "optim of no weight row" "--params 64 over --handles 1 leaves fewer than 65 a handle" optim --params 64 --handles 1
fails "ckpt larger than memory" "zrt-bench ckpt: error: --params 10000000000000 needs about .* of memory, but .* is available" ckpt --params 10000000000000
fails "ckpt into a missing --dir" "zrt-bench ckpt: error: --dir $dir/none/x is not an existing directory" ckpt --params 20000 --dir "$dir/none/x"
[ ! -e "$dir/none" ] && echo "ok   ckpt made no missing --dir" || { echo "FAIL ckpt made $dir/none"; failures=$((failures + 1)); }
fails "attention of an integer dtype" "zrt-bench attention: error: --dtype i32 is not one of bf16, f16, f32, f64" attention --dtype i32
fails "gemm --isa foo" "zrt-bench gemm: error: --isa foo is not one of baseline, avx2, avx512" gemm --isa foo
fails "gemm on too many threads" "zrt-bench gemm: error: --threads 100000 is more than 1024" gemm --threads 100000
fails "gemm --gemm mkl" "zrt-bench gemm: error: --gemm mkl is not one of eigen, openblas, all" gemm --gemm mkl
# More local ranks than any suite runs: refused before a thread starts (the
# memory of 3000 ranks ran the machine out).
fails "ckpt on too many ranks" "zrt-bench ckpt: error: --ranks 3000 is more than 1024 local ranks" ckpt --ranks 3000
# A 64-bit count past its range is refused, not read as the largest value
# (--ops 10^20 ran without end).
fails "tensor --ops past 64 bits" "--ops: 99999999999999999999 is out of range for a whole number" tensor --ops 99999999999999999999
fails "ckpt --params past 64 bits" "--params: -99999999999999999999 is out of range" ckpt --params -99999999999999999999
fails "attention --simple on the cpu" "zrt-bench attention: error: --simple times the simple CUDA kernels: it needs --device cuda" attention --simple
fails "train --cpu-streams gpu" "zrt-bench train: error: --cpu-streams 'gpu' is not one of none, comm, all" train --cpu-streams gpu
fails "train --n-layer 0" "zrt-bench train: error: --n-layer must be positive \(got 0\)" train --n-layer 0
fails "a flag as a value" "--dir needs a value, but the next argument is the flag --reps" ckpt --dir --reps 1
fails "ckpt --dir of an unset variable" "zrt-bench ckpt: error: --dir: the value is empty" ckpt --params 20000 --dir ""
fails "train --save-init under /proc" "zrt-bench train: error: --save-init /proc/zrt-x.st: /proc is on a virtual filesystem" train --preset tiny --steps 1 --save-init /proc/zrt-x.st
fails "train --save-init in a missing directory" "zrt-bench train: error: --save-init $dir/none/w.st: directory $dir/none does not exist" train --preset tiny --steps 1 --save-init "$dir/none/w.st"
fails "ckpt --dir under /proc" "zrt-bench ckpt: error: --dir: /proc/sys is on a virtual filesystem" ckpt --params 20000 --dir /proc/sys
# --json is JSON lines only; a suite's --help goes to stdout; figures keep their digits.
out=$(timeout 60 "$bench" tensor --ops 1000 --reps 1 --json 2>&1)
python3 -c 'import json, sys; [json.loads(l) for l in sys.stdin]' <<<"$out" && echo "ok   tensor --json is JSON lines" ||
  { echo "FAIL tensor --json: $out"; failures=$((failures + 1)); }
"$bench" comm --help 2> /dev/null | grep -q "usage: zrt-bench comm" && echo "ok   comm --help on stdout" ||
  { echo "FAIL comm --help is not on stdout"; failures=$((failures + 1)); }
out=$(timeout 60 "$bench" attention --device cpu --batch 1 --seq 16 --heads 2 --head-dim 8 --dtype f32 --reps 1 --json 2>&1)
grep -q '"TFLOP_s":0[,}]' <<<"$out" && { echo "FAIL attention TFLOP_s rounds to 0: $out"; failures=$((failures + 1)); } ||
  echo "ok   attention TFLOP_s keeps its digits"

echo "$failures failed"
[ $failures -eq 0 ]
