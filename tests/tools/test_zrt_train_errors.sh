#!/usr/bin/env bash
# Bad input to zrt-train: each case exits non-zero with a message naming the
# problem, and writes neither the metrics nor the weights file.
# usage: test_zrt_train_errors.sh PATH/TO/zrt-train
set -u
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
. "$(dirname "$0")/user_messages.sh"

# expect_error NAME PATTERN ARGS...: runs zrt-train ARGS with --metrics/--save in $dir.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  rm -f "$dir/m.jsonl" "$dir/w.safetensors"
  local out rc
  local steps=(--steps 2)  # a flag is given once: a case's own --steps stands
  [[ " $* " == *" --steps "* ]] && steps=()
  out=$("$train" "$@" "${steps[@]}" --metrics "$dir/m.jsonl" --save "$dir/w.safetensors" 2>&1)
  rc=$?
  last_rc=$rc
  if [ $rc -eq 0 ]; then
    echo "FAIL $name: exit code 0"; failures=$((failures + 1)); return
  fi
  if ! grep -qiE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: message does not match /$pattern/: $out"; failures=$((failures + 1)); return
  fi
  if [ -e "$dir/m.jsonl" ] || [ -e "$dir/w.safetensors" ]; then
    echo "FAIL $name: wrote a file"; failures=$((failures + 1)); return
  fi
  shows_source "$name" "$out" && { failures=$((failures + 1)); return; }
  echo "ok   $name: $(grep -m1 -i error <<<"$out")"
}

expect_usage() {  # expect_error, and the exit code is 2
  expect_error "$@"
  if [ "$last_rc" -ne 2 ]; then echo "FAIL $1: exit code $last_rc, not 2"; failures=$((failures + 1)); fi
}
printf 'tiny' > "$dir/short.txt"
: > "$dir/empty.txt"
# Valid weights of other models, to load into the tiny GPT.
"$train" --model mlp --steps 1 --save "$dir/mlp.safetensors" > /dev/null || { echo "FAIL: cannot make mlp weights"; exit 1; }
"$train" --n-layer 1 --steps 1 --save "$dir/shallow.safetensors" > /dev/null || { echo "FAIL: cannot make 1-layer weights"; exit 1; }
"$train" --n-embd 64 --steps 1 --save "$dir/wide.safetensors" > /dev/null || { echo "FAIL: cannot make wide weights"; exit 1; }

expect_usage "missing data file" "no-such-file" --data "$dir/no-such-file.txt"
expect_error "empty data file" "empty" --data "$dir/empty.txt"
# A weights file given as a gpt's data names what a .safetensors data file is.
expect_error "weights as gpt data" "must hold tensors 'x' and 'y': a .safetensors data file is an mlp's feature rows \(a gpt trains on a text file" \
  --data "$dir/wide.safetensors"
expect_error "seq-len longer than the data" "seq|short|long" --data "$dir/short.txt" --seq-len 64
expect_error "batch not divisible" "divisible|divide" --ranks 2 --batch-size 3
expect_error "micro-batches not dividing" "divisible|divide" --batch-size 6 --micro-batches 4
expect_usage "unknown preset" "--preset: unknown gpt preset 'huge' \\(tiny, small, gpt2-124m\\)" --preset huge
expect_error "activation checkpointing every:0" "activation checkpointing .every:0. is not one of none, blocks, every:N" --activation-checkpointing every:0
expect_error "--transport mpi without mpirun" "--transport mpi carries the collectives of a world launched by mpirun" --transport mpi --ranks 2
expect_usage "--transport mpi alone" "not launched by either \(alone it would train one rank\)" --transport mpi
expect_error "--transport nccl on cpu" "transport nccl moves CUDA tensors only" --transport nccl
expect_error "--checkpoint-async without a directory" "checkpoint-async needs --checkpoint-dir" --checkpoint-async
expect_error "unknown flag value" "dtype" --dtype fp8
expect_error "on-inconsistency without a check" "--on-inconsistency is read by --check-consistency N only" --on-inconsistency warn
expect_error "fit without plan" "--fit 1GiB is read by --plan only" --fit 1GiB
expect_error "fit-host without fit" "--fit-host 1GiB is read by --plan --fit only" --plan --fit-host 1GiB
expect_error "a bad fit" "--fit: .abc. is not a byte count" --plan --fit abc
expect_usage "a hexadecimal memory limit" "--memory-limit: .0x100. is not a byte count" --memory-limit 0x100
# A small limit is said in its own unit, by the plan and by the run.
out=$("$train" --plan --memory-limit 1KiB 2>&1)
grep -q "the largest rank reserves [0-9.]* MiB, above --memory-limit 1.0 KiB: this run does not fit" <<<"$out" &&
  echo "ok   --plan under a 1 KiB limit: $(grep -m1 "above --memory-limit" <<<"$out")" ||
  { echo "FAIL --plan under a 1 KiB limit: $out"; failures=$((failures + 1)); }
expect_error "a run under a 1 KiB limit" "does not fit in --memory-limit 1.0 KiB: its plan reserves [0-9.]* MiB" --memory-limit 1KiB
# CPU streams other than the limit's default say where they came from.
ZRT_CPU_STREAMS=all expect_error "a limit under ZRT_CPU_STREAMS=all" "its CPU streams are 'all' \(ZRT_CPU_STREAMS\), which hold more than none, --memory-limit's default" --memory-limit 1KiB
expect_error "a limit under --cpu-streams comm" "its CPU streams are 'comm' \(--cpu-streams\)" --memory-limit 1KiB --cpu-streams comm
expect_error "a bad fit-host" "--fit-host: '12parsecs': unknown unit 'parsecs'" --plan --fit 1GiB --fit-host 12parsecs
expect_error "init file with missing keys" "h\.1\..*missing|missing.*h\.1\." --init-from "$dir/shallow.safetensors"
expect_error "init file of another model" "layers\.0" --init-from "$dir/mlp.safetensors"
expect_error "init file with mis-shaped keys" "shape" --init-from "$dir/wide.safetensors"
expect_error "init file that does not exist" "nope" --init-from "$dir/nope.safetensors"
expect_error "zero3 size not dividing the world" "--zero3-size 3 does not divide the world of 2 ranks \(--ranks\)" --ranks 2 --strategy hybrid --zero3-size 3
expect_error "block size shorter than the sequence" "block-size 32 is shorter than --seq-len 64" --block-size 32
expect_error "prefetch deeper than 2" "prefetch" --prefetch 3
expect_error "unknown reduce dtype" "reduce-dtype" --reduce-dtype fp8
expect_error "unknown gather dtype" "gather-dtype" --gather-dtype int4

# Flags of the other model kind, strategy or launcher; nonsense values.
expect_error "mlp flag with gpt" "--hidden is a flag of the other model kind" --hidden 8
expect_error "gpt flag with mlp" "--n-layer is a flag of the other model kind" --model mlp --n-layer 2
expect_usage "empty --data" "--data: the path is empty; leave the flag out" --data ""
expect_usage "--plan of too many ranks" "--plan plans at most 64 ranks .*not 65" --plan --ranks 65
expect_usage "gpt layout with mlp" "--head-unit: a head unit is a gpt layout, not mlp" --model mlp --head-unit
expect_error "zero3 size with full sharding" "zero3-size is read by --strategy hybrid and layer-zero" --zero3-size 2
expect_error "too many local ranks" "ranks 100000 is more than" --ranks 100000
expect_error "too many kernel threads" "--threads: must be a whole number from 0 to 1024 \(got 5000\)" --threads 5000
expect_error "negative kernel threads" "--threads: must be a whole number from 0 to 1024 \(got -1\)" --threads -1
expect_error "prefetch of 1.5" "--prefetch: must be a whole number from 0 to 2 \(got 1.5\)" --prefetch 1.5
OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 expect_error "--ranks under mpirun" "launched by mpirun" --ranks 2
expect_error "zero layers" "n-layer: must be positive" --n-layer 0
expect_usage "width not divisible by heads" "--n-embd 1 is not divisible by --n-head 2" --n-embd 1
expect_usage "a vocabulary past int32" "--vocab-size 9223372036854775807 is above 2147483647" --vocab-size 9223372036854775807
expect_usage "a width past int32" "--n-embd 4294967296 is above 2147483647" --n-embd 4294967296 --n-head 1
expect_usage "a batch past int32" "--batch-size: must be a whole number from 1 to 2147483647" --batch-size 9223372036854775807
expect_usage "a sequence past int32" "--seq-len: must be a whole number from 1 to 2147483647" --seq-len 3000000000
expect_usage "an int flag past its type" "--log-every: 3000000000 is above 2\^31 - 1, the largest it takes" --log-every 3000000000
expect_usage "an int flag past 64 bits" "--log-every: is out of range for a whole number \(got 99999999999999999999\)" --log-every 99999999999999999999
expect_usage "a negative int flag past its type" "--log-every: must be positive \(got -3000000000\)" --log-every -3000000000
expect_usage "a choice with a space" "--model: ' mlp' is not one of gpt, mlp" --model " mlp"
expect_error "steps not a number" "steps: must be a positive number" --steps x
expect_error "negative learning rate" "lr: must not be negative" --lr -1
expect_error "beta1 of 2" "beta1" --beta1 2
# Numbers a flag may not take are usage errors (exit 2) that say so, NaN and
# infinities included.
expect_usage "NaN learning rate" "--lr: must be finite \(got nan\)" --lr nan
expect_usage "infinite learning rate" "--lr: must be finite \(got inf\)" --lr inf
expect_usage "infinite minimum learning rate" "--min-lr: must be finite" --min-lr -inf
expect_usage "NaN beta2" "beta2 must be in \[0, 1\) \(got nan\)" --beta2 nan
expect_usage "beta1 of 1" "error: --beta1 must be in \[0, 1\) \(got 1\)" --beta1 1
expect_usage "--weight-decay -1 names its flag" "error: --weight-decay must be finite and >= 0 \(got -1\)" --weight-decay -1
expect_usage "infinite weight decay" "--weight-decay must be finite" --weight-decay inf
expect_usage "negative eps" "eps must be finite and > 0" --eps -1e-8
expect_usage "zero eps" "eps must be finite and > 0" --eps 0
expect_usage "NaN clip" "--clip must be finite and >= 0 \(got nan\)" --clip nan
expect_usage "an lr past a double's range" "--lr: out of range \(got 1e400; a number's magnitude is at most about 1.8e308\)" --lr 1e400
expect_usage "an lr below a double's range" "--lr: out of range \(got 1e-400; a nonzero number's magnitude is at least" --lr 1e-400
expect_usage "a model past 2^48 parameters" "--n-layer, --n-embd, --vocab-size and --block-size make about .* parameters, more than 2\^48" --n-embd 2147483647 --n-head 1
"$train" --steps 1 --lr 1e-310 > /dev/null 2>&1 || { echo "FAIL a subnormal --lr 1e-310 was refused"; failures=$((failures + 1)); }
# Collective settings with no collective to act on are noted; where they act
# (layer-zero's update gathers with zero3 groups of 1), not.
out=$("$train" --steps 1 --reduce-dtype int8 --gather-dtype int8 2>&1)
[ "$(grep -c "note: --.*-dtype changes nothing with 1 rank(s) and --strategy full: no gradient is reduce-scattered" <<<"$out")" = 2 ] &&
  echo "ok   collective dtypes on one rank are noted" || { echo "FAIL collective dtypes on one rank: $out"; failures=$((failures + 1)); }
out=$("$train" --steps 1 --ranks 2 --strategy layer-zero --zero3-size 1 --prefetch 0 --gather-dtype int8 2>&1)
grep -q "changes nothing" <<<"$out" && { echo "FAIL layer-zero's gathers noted as idle: $out"; failures=$((failures + 1)); } ||
  echo "ok   layer-zero with zero3 groups of 1 notes nothing"
# A value read only in part is no number ("0,001" is not 0).
expect_usage "a decimal comma" "--lr: 0,001 is not" --lr 0,001
# -0 is 0: the log does not print a negative learning rate.
out=$("$train" --steps 1 --lr -0 2>&1)
grep -q "  lr 0.00e+00  " <<<"$out" && echo "ok   --lr -0 trains at lr 0" ||
  { echo "FAIL --lr -0: $out"; failures=$((failures + 1)); }
# A weight decay that wipes the weights out: warned, and a divergence names it.
out=$("$train" --steps 5 --weight-decay 1e308 --max-skipped-steps 0 2>&1)
if grep -q "warning: --weight-decay 1e+308 at --lr 0.003 takes .* of each matrix off it every step" <<<"$out" &&
   grep -q "error: the run diverged.*; lower --weight-decay or --lr" <<<"$out"; then
  echo "ok   a weight decay past lr x decay 0.1 is warned of and named"
else
  echo "FAIL huge weight decay: $out"; failures=$((failures + 1))
fi
expect_usage "NaN batch size" "--batch-size: must be a whole number from 1 to 2147483647 \(got nan\)" --batch-size nan
# A run whose loss stays non-finite stops after --max-skipped-steps skips in
# a row with exit code 1, instead of skipping every remaining step and exiting 0;
# the step that reached the limit has its line, as every skipped step.
out=$("$train" --lr 1e30 --steps 60 --max-skipped-steps 3 --log-every 1 --metrics "$dir/nan.jsonl" 2>&1)
rc=$?
stopped=$(sed -nE 's/.*the run stopped at step ([0-9]+) of 60.*/\1/p' <<<"$out")
if shows_source "a loss that stays non-finite" "$out"; then failures=$((failures + 1))
elif [ $rc -eq 1 ] && grep -qE "error: the run stopped at step [0-9]+ of 60 by --max-skipped-steps 3: 3 optimizer steps in a row were skipped.*; lower --lr$" <<<"$out" && [ "$(wc -l < "$dir/nan.jsonl")" -lt 10 ] &&
     [ "$(wc -l < "$dir/nan.jsonl")" = "$stopped" ] && tail -n1 "$dir/nan.jsonl" | grep -q "\"step\":$((stopped - 1)),.*\"skipped\":true" &&
     grep -qE "^step +$stopped/60 .*\(skipped\)" <<<"$out"; then
  echo "ok   a loss that stays non-finite: $(grep -m1 error <<<"$out" | cut -c1-150)"
else
  echo "FAIL a loss that stays non-finite: exit $rc, $(wc -l < "$dir/nan.jsonl") metrics lines: $out"; failures=$((failures + 1))
fi
expect_usage "negative skip limit" "max-skipped-steps" --max-skipped-steps -1
# A short run that diverges without --max-skipped-steps catching it (the
# skips are not all in a row) fails at its end and saves nothing (Note [A
# diverged run fails]).
rm -f "$dir/w.safetensors"
out=$("$train" --dtype fp16 --lr 5 --steps 30 --save "$dir/w.safetensors" 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q "the run diverged.*or use --dtype bf16; --save .*w.safetensors was not written" <<<"$out" && [ ! -e "$dir/w.safetensors" ] &&
   ! shows_source "a run that ends diverged" "$out"; then
  echo "ok   a run that ends diverged: $(grep -m1 error <<<"$out" | cut -c1-150)"
else
  echo "FAIL a run that ends diverged: exit $rc: $(tail -n2 <<<"$out")"; failures=$((failures + 1))
fi
# Non-finite weights are never saved: the checkpoint that would hold them is
# refused and the last finite one stays `latest`, byte for byte.
"$train" --steps 2 --checkpoint-dir "$dir/nanck" --checkpoint-every 1 > /dev/null || echo "FAIL: first nanck run"
before=$(cd "$dir/nanck" && find . -type f ! -name .zrt-run.lock | sort | xargs sha256sum | sha256sum)
out=$("$train" --steps 4 --lr 1e38 --weight-decay 100 --checkpoint-dir "$dir/nanck" --checkpoint-every 1 --resume 2>&1)
rc=$?
after=$(cd "$dir/nanck" && find . -type f ! -name .zrt-run.lock | sort | xargs sha256sum | sha256sum)
if [ $rc -eq 1 ] && grep -q "hold NaN or Inf values" <<<"$out" && [ "$before" = "$after" ] &&
   ! shows_source "a non-finite checkpoint" "$out"; then
  echo "ok   a checkpoint of non-finite weights is refused, the last finite one kept"
else
  echo "FAIL non-finite checkpoint: exit $rc, $( [ "$before" = "$after" ] && echo unchanged || echo changed): $(tail -n1 <<<"$out")"
  failures=$((failures + 1))
fi
rm -f "$dir/w.safetensors"
out=$("$train" --steps 1 --lr 1e38 --weight-decay 100 --save "$dir/w.safetensors" 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q "holds NaN or Inf values" <<<"$out" && [ ! -e "$dir/w.safetensors" ] &&
   ! shows_source "--save of non-finite weights" "$out"; then
  echo "ok   --save of non-finite weights is refused"
else
  echo "FAIL --save of non-finite weights: exit $rc: $(tail -n1 <<<"$out")"; failures=$((failures + 1))
fi
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 expect_usage "a torchrun launch on cpu" "launched torchrun-style .* add --device cuda"
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 expect_usage "--ranks under a torchrun launch" "already one of 2 ranks launched by torchrun: drop --ranks" --ranks 2
expect_usage "--min-lr above --lr" "--min-lr 0.5 is above --lr 0.1" --lr 0.1 --min-lr 0.5
"$train" --lr 1e-4 --steps 1 > /dev/null 2>&1 && echo "ok   --lr below the default --min-lr trains (--min-lr follows --lr)" ||
  { echo "FAIL --lr 1e-4 alone is refused"; failures=$((failures + 1)); }
if [ -w /dev/full ]; then
  out=$("$train" --steps 1 --trace /dev/full 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && grep -q -- "--trace /dev/full: writing failed: No space left on device" <<<"$out" && ! shows_source "--trace /dev/full" "$out"; then
    echo "ok   --trace /dev/full fails the run (exit $rc)"
  else echo "FAIL --trace /dev/full: exit $rc: $out"; failures=$((failures + 1)); fi
fi
# A model that cannot fit is refused with the numbers before anything is
# allocated, not killed without a word (this one needs 2.3 TiB; with AdamW's
# state on disk, 8 of the 16 bytes per parameter stay: 1.1 TiB).
expect_error "a model that cannot fit in memory" "cannot fit in memory: 154634321920 parameters need at least 2\.3 TiB.*--offload-optimizer disk" \
  --n-embd 16384 --n-head 16 --n-layer 48
expect_error "a model that cannot fit even with its optimizer state on disk" \
  "cannot fit in memory: 154634321920 parameters need at least 1\.1 TiB .*fp32 weights and gradients of each" \
  --n-embd 16384 --n-head 16 --n-layer 48 --offload-optimizer "disk:$dir"
# ... nor a micro-batch whose logits alone cannot fit (2^31 sequences of one
# token over 256 tokens in fp32: 2 TiB), which was killed by the kernel.
expect_error "a micro-batch whose logits cannot fit" \
  "cannot fit in memory: .*one micro-batch's logits \(2\.0 TiB a rank\).*a smaller --batch-size or more --micro-batches" \
  --batch-size 2147483647 --seq-len 1
# ... nor a --seq-len that raised the block size, and so the position
# embedding, past what fits: the advice names --seq-len.
expect_error "a --seq-len whose position embedding cannot fit" \
  "cannot fit in memory: .*Use a smaller --seq-len \(it raised --block-size to 2000000000" \
  --seq-len 2000000000 --batch-size 1
# A replicated strategy holds a whole copy of the state on every rank:
# GPT-2 124M on 64 local ranks needs 2 GiB of it sharded, 120 GiB replicated.
expect_error "no-shard state replicated on 64 ranks" \
  "need at least 1[0-9][0-9]\.[0-9] GiB .*a copy sharded over 1 rank\(s\) by --strategy no-shard.*Use --strategy full" \
  --preset gpt2-124m --ranks 64 --batch-size 64 --strategy no-shard --steps 1
# Environment values are checked, never overflowed or silently taken.
ZRT_COMM_TIMEOUT_S=1e10 expect_error "a collective timeout past the clock" "ZRT_COMM_TIMEOUT_S='1e10' is above" --ranks 2
ZRT_COMM_TIMEOUT_S=-5 expect_error "a negative collective timeout" "ZRT_COMM_TIMEOUT_S='-5' is not a positive" --ranks 2
ZRT_CPU_THREADS=5000 expect_error "5000 kernel threads" "ZRT_CPU_THREADS='5000' is not a whole number of kernel threads from 1 to 1024"
ZRT_CPU_THREADS=two expect_error "kernel threads not a number" "ZRT_CPU_THREADS='two'"
# Every ZRT_* variable is checked at start (Note [Environment variables]).
ZRT_TF32=junk expect_error "ZRT_TF32 of junk" "ZRT_TF32='junk' is not one of 0, 1"
ZRT_SIMPLE_KERNELS=junk expect_error "ZRT_SIMPLE_KERNELS of junk" \
  "ZRT_SIMPLE_KERNELS='junk': 'junk' is not a kernel; name kernels separated by commas: cross_entropy"
ZRT_SIMPLE_KERNELS=layernorm,bogus expect_error "ZRT_SIMPLE_KERNELS with one bad name" "'bogus' is not a kernel"
ZRT_ATTENTION_PATH=fast expect_error "ZRT_ATTENTION_PATH of fast" "ZRT_ATTENTION_PATH='fast' is not one of gemm, flash"
ZRT_CPU_STREAMS=some expect_error "ZRT_CPU_STREAMS of some" "ZRT_CPU_STREAMS='some' is not one of none, comm, all"
ZRT_POISON_MEMORY=yes expect_error "ZRT_POISON_MEMORY of yes" "ZRT_POISON_MEMORY='yes' is not one of 0, 1"
ZRT_CPU_GEMM=mkl expect_error "ZRT_CPU_GEMM of mkl" "ZRT_CPU_GEMM='mkl' is not one of eigen, openblas"
ZRT_CPU_ISA=sse9 expect_error "ZRT_CPU_ISA of sse9" "ZRT_CPU_ISA='sse9' is not one of baseline, avx2, avx512"
ZRT_FLIGHT_RECORDER_ENTRIES=0 expect_error "no flight recorder entries" "ZRT_FLIGHT_RECORDER_ENTRIES='0' is not a whole number"
ZRT_LINK_GBPS=fast expect_error "ZRT_LINK_GBPS of fast" "ZRT_LINK_GBPS='fast' is not a bandwidth in Gb/s from 0.001 to 1e.06"
ZRT_LINK_US=-2 expect_error "a negative link latency" "ZRT_LINK_US='-2' is not a latency in microseconds"
ZRT_DEBUG=yes expect_error "ZRT_DEBUG of yes" "ZRT_DEBUG='yes' is not one of 0, 1"
ZRT_FLIGHT_RECORDER_DIR="$dir/short.txt" expect_error "a file for the flight recorder directory" "ZRT_FLIGHT_RECORDER_DIR='.*short.txt' is not a directory"
# A ZRT_* variable zrt does not read is named in a warning (a typo?), and the run goes on.
out=$(ZRT_SIMPEL_KERNELS=all "$train" --steps 1 2>&1)
if [ $? -eq 0 ] && grep -q "zrt-train: warning: ZRT_SIMPEL_KERNELS is set but zrt reads no such variable" <<<"$out"; then
  echo "ok   an unknown ZRT_* variable: $(grep -m1 warning <<<"$out")"
else echo "FAIL an unknown ZRT_* variable: $out"; failures=$((failures + 1)); fi
# ZRT_DEBUG=1 adds where the check sits in the source, on a line of its own.
out=$(ZRT_DEBUG=1 "$train" --n-embd 1 --steps 1 2>&1)
if grep -q "^zrt-train: error: --n-embd 1 is not divisible by --n-head" <<<"$out" &&
   grep -qE '^zrt-train: debug: check `d\.n_embd % d\.n_head == 0` failed at .*model_config\.cpp:[0-9]+$' <<<"$out"; then
  echo "ok   ZRT_DEBUG=1 names the check: $(grep debug <<<"$out")"
else echo "FAIL ZRT_DEBUG=1 does not name the check: $out"; failures=$((failures + 1)); fi
# Data must be a regular file: never a hang on a FIFO, a read of /dev/zero
# until memory runs out, or a directory without its name.
mkfifo "$dir/data.fifo" "$dir/data.fifo.safetensors"
expect_error "data from a FIFO" "data.fifo is a FIFO" --data "$dir/data.fifo"
expect_error "data from /dev/zero" "/dev/zero is a character device" --data /dev/zero
mkdir -p "$dir/data-dir"
expect_error "data from a directory" "data-dir is a directory" --data "$dir/data-dir"
# ... or a file of the kernel's, whose reported size is not its contents
# (/proc/cpuinfo says 0 bytes: it read as "empty", an --init-from as "truncated").
expect_usage "data from /proc" "data file /proc/cpuinfo is a file of the kernel \(on proc\), not a file on a disk" --data /proc/cpuinfo
expect_usage "--init-from /proc" "--init-from /proc/self/status is a file of the kernel \(on proc\)" --init-from /proc/self/status
# Data smaller than one step's batch trains, and says that each step reads
# some of it twice.
printf 'a few words of text, %.0s' $(seq 5) > "$dir/few.txt"
out=$("$train" --data "$dir/few.txt" --seq-len 16 --batch-size 8 --steps 1 2>&1)
if grep -q "warning: the data set ($dir/few.txt) holds 105 tokens, fewer than one step reads (--batch-size 8 x --seq-len 16): every step reads some of them more than once" <<<"$out"; then
  echo "ok   data smaller than a step's batch is named"
else echo "FAIL data smaller than a step's batch: $out"; failures=$((failures + 1)); fi
# A tail the data order never reaches is named (Note [Data order]): 48
# tokens and --seq-len 16 start sequences at 0, 16 and never 17..31 (the
# last 15 tokens no target); 49 tokens, three sequences and one, are read whole.
printf 'abcdefghijklmnop%.0s' 1 2 3 > "$dir/tail.txt"
out=$("$train" --data "$dir/tail.txt" --seq-len 16 --batch-size 1 --steps 1 2>&1)
if grep -q "warning: the last 15 tokens of the data set ($dir/tail.txt) are never a target: --seq-len 16 and its 48 tokens share the factor 16" <<<"$out"; then
  echo "ok   a data tail never read is named"
else echo "FAIL a data tail never read: $out"; failures=$((failures + 1)); fi
printf 'q' >> "$dir/tail.txt"
out=$("$train" --data "$dir/tail.txt" --seq-len 16 --batch-size 1 --steps 1 2>&1)
if ! grep -q "never a target" <<<"$out" && grep -q "^step" <<<"$out"; then
  echo "ok   N·T + 1 tokens are read whole"
else echo "FAIL N·T + 1 tokens: $out"; failures=$((failures + 1)); fi
# Headerless uint16 tokens under a name that is not .bin: binary, not text.
printf 'ab\x05\x00\x07\x01' > "$dir/raw-u16.dat"
expect_error "headerless tokens" "raw-u16.dat holds a NUL byte \(at byte 3\), which no text does" --data "$dir/raw-u16.dat"
expect_error "mlp rows from a FIFO" "data.fifo.safetensors is a FIFO" --model mlp --data "$dir/data.fifo.safetensors"
expect_usage "negative seed" "--seed: must be a whole number from 0 to 2\^64 - 1 \(got -1\)" --seed -1
expect_usage "seed beyond 64 bits" "--seed: is above 2\^64 - 1" --seed 18446744073709551616
# --save onto a pipe through /dev/stdout (a /proc link naming "pipe:[N]"):
# refused before training, not after it.
out=$("$train" --steps 2 --save /dev/stdout 2>&1 | cat)
if grep -q "save /dev/stdout is a FIFO" <<<"$out" && ! grep -q "^step" <<<"$out"; then
  echo "ok   --save onto a pipe: $out"
else echo "FAIL --save onto a pipe: $out"; failures=$((failures + 1)); fi
expect_error "--trace to a stream from several ranks" "--trace /dev/stderr is a stream, but each of several ranks" \
  --ranks 2 --trace /dev/stderr
# /dev/shm is a directory of files like any other.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  shm=/dev/shm/zrt-test-trace-$$
  if "$train" --steps 1 --ranks 2 --trace "$shm.json" > /dev/null 2>&1 && [ -s "$shm.rank-1.json" ]; then
    echo "ok   --trace under /dev/shm from several ranks"
  else echo "FAIL --trace under /dev/shm from several ranks"; failures=$((failures + 1)); fi
  rm -f "$shm.rank-0.json" "$shm.rank-1.json"
fi
# /dev/stdout redirected to a file is a regular file, yet T.rank-R would be made in /dev.
out=$("$train" --steps 1 --ranks 2 --trace /dev/stdout 2>&1 > "$dir/stdout.txt")
if [ $? -eq 2 ] && grep -q -- "--trace /dev/stdout is a stream, but each of several ranks" <<<"$out"; then
  echo "ok   --trace /dev/stdout onto a file from several ranks"
else echo "FAIL --trace /dev/stdout onto a file from several ranks: $out"; failures=$((failures + 1)); fi
expect_usage "steps beyond 63 bits" "--steps: is out of range for a whole number \(got 99999999999999999999\)" --steps 99999999999999999999
expect_usage "steps beyond 63 bits after a space" "--steps: is out of range for a whole number \(got  99999999999999999999" --steps " 99999999999999999999"
expect_usage "negative steps beyond 63 bits" "--steps: must be positive \(got -99999999999999999999\)" --steps -99999999999999999999
# ... while a real-valued flag takes a whole number beyond 64 bits as the real it is.
if out=$("$train" --steps 1 --lr 100000000000000000000 --min-lr 0 2>&1) && grep -q "lr 1.00e+20" <<<"$out"; then
  echo "ok   --lr of 21 digits is a learning rate"
else
  echo "FAIL --lr of 21 digits: $out"; failures=$((failures + 1))
fi
# Variables of a launcher whose MPI is not the one zrt was built with (OpenMPI
# keeps memory at exit: no leak check).
ASAN_OPTIONS=detect_leaks=0 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 \
  expect_error "mpirun of another MPI" "mpirun says rank 0 of 2: launch with the mpirun|without MPI" --ranks 0
expect_error "empty --init-from" "--init-from: the path is empty" --init-from ""
expect_error "empty --checkpoint-dir" "--checkpoint-dir: the path is empty" --checkpoint-dir ""
expect_usage "a flag given twice" "--lr is given more than once; give it once" --lr 1e-3 --lr 2e-3
expect_usage "a list flag given twice" "--hidden is given more than once" --model mlp --hidden 8 --hidden 4
expect_usage "an unknown flag" "unknown flag --n-layers \(zrt-train --help lists the flags\)" --n-layers 2
expect_usage "an empty width in --hidden" "--hidden: '64,,64' is not whole numbers separated by commas" --model mlp --hidden 64,,64
expect_usage "a lone comma for --hidden" "--hidden: ',' is not whole numbers" --model mlp --hidden , --lr 1e-3
expect_usage "a million layers" "--n-layer: must be a whole number from 1 to 65536 \(got 100000000\)" --n-layer 100000000
expect_usage "a fraction for a whole number" "--n-head: 1.5 is not a whole number" --n-head 1.5
expect_usage "two values for one flag" "unexpected value '2' \(a flag takes one value" --n-layer 1 2
# A `latest` in --checkpoint-dir that is no checkpoint's: refused before
# training, the user's file unchanged.
mkdir -p "$dir/notes-ck" "$dir/latest-dir-ck/latest" && echo notes > "$dir/notes-ck/latest"
expect_usage "a user's file named latest" "--checkpoint-dir .*notes-ck/latest that names no checkpoint step" --checkpoint-dir "$dir/notes-ck"
[ "$(cat "$dir/notes-ck/latest")" = notes ] || { echo "FAIL: the user's latest was overwritten"; failures=$((failures + 1)); }
expect_usage "a directory named latest" "--checkpoint-dir .* holds a directory .*latest-dir-ck/latest" --checkpoint-dir "$dir/latest-dir-ck"
# ... also when --resume reads another directory (DIR's latest is then only written).
"$train" --steps 1 --checkpoint-dir "$dir/other-ck" > /dev/null || { echo "FAIL: other-ck"; failures=$((failures + 1)); }
expect_usage "a user's latest beside --resume of another directory" "notes-ck/latest that names no checkpoint step" \
  --checkpoint-dir "$dir/notes-ck" --resume "$dir/other-ck" --steps 3
[ "$(cat "$dir/notes-ck/latest")" = notes ] || { echo "FAIL: the user's latest was overwritten on resume"; failures=$((failures + 1)); }
[ -z "$(ls "$dir/latest-dir-ck" | grep -v latest)" ] || { echo "FAIL: a step was written beside latest/"; failures=$((failures + 1)); }
expect_usage "empty --resume" "--resume: the path is empty" --checkpoint-dir "$dir/ck" --resume ""
expect_usage "empty --resume=" "--resume: the path is empty" --checkpoint-dir "$dir/ck" --resume=
expect_error "zero batch" "batch-size: must be a whole number from 1 to 2147483647 \(got 0\)" --batch-size 0
expect_error "unknown strategy" "strategy" --strategy zero4
expect_error "unknown device" "device" --device tpu
expect_error "unknown activation" "activation" --model mlp --activation tanh
# Outputs that would destroy an input or cannot be written.
printf 'some training text for the data file, long enough for a few sequences. %.0s' $(seq 40) > "$dir/data.txt"
cp "$dir/data.txt" "$dir/data.orig"
expect_error_raw() {  # like expect_error, with the caller's own output flags
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$train" "$@" --steps 2 2>&1); rc=$?
  if [ $rc -eq 0 ]; then echo "FAIL $name: exit code 0"; failures=$((failures + 1)); return; fi
  if ! grep -qiE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: message does not match /$pattern/: $out"; failures=$((failures + 1)); return
  fi
  if ! cmp -s "$dir/data.txt" "$dir/data.orig"; then echo "FAIL $name: the data file changed"; failures=$((failures + 1)); return; fi
  shows_source "$name" "$out" && { failures=$((failures + 1)); return; }
  echo "ok   $name: $(grep -m1 -i error <<<"$out")"
}
expect_error_raw "--save onto --data" "save .* is the --data file" --data "$dir/data.txt" --save "$dir/data.txt"
expect_error_raw "--metrics onto --data" "metrics .* is the --data file" --data "$dir/data.txt" --metrics "$dir/data.txt"
expect_error_raw "--save into a missing directory" "directory .*no-dir does not exist" --save "$dir/no-dir/w.safetensors"
: > "$dir/a-file"
expect_error_raw "--save under a file" "a-file is not a directory" --save "$dir/a-file/w.safetensors"
expect_error_raw "--save onto a directory" "is a directory" --save "$dir"
expect_error_raw "--metrics on a full disk" "writing the metrics file /dev/full failed" --metrics /dev/full
# --save is renamed into place: never over a device, FIFO or socket, and
# through a symbolic link, which stays a link (Note [Outputs write through
# links, never over devices]).
expect_error_raw "--save onto a character device" "/dev/null is a character device" --save /dev/null
[ -c /dev/null ] || { echo "FAIL: /dev/null is no longer a device"; failures=$((failures + 1)); }
mkfifo "$dir/fifo"
expect_error_raw "--save onto a FIFO" "fifo is a FIFO" --save "$dir/fifo"
ln -s /dev/zero "$dir/to-device"
expect_error_raw "--save through a link onto a device" "to-device \\(-> /dev/zero\\) is a character device" --save "$dir/to-device"
ln -s loop-b "$dir/loop-a"; ln -s loop-a "$dir/loop-b"
expect_error_raw "--save through a loop of links" "too many levels of symbolic links" --save "$dir/loop-a"
ln -s "$dir/target.safetensors" "$dir/link.safetensors"
if ! "$train" --steps 1 --save "$dir/link.safetensors" > /dev/null 2>&1 || [ ! -L "$dir/link.safetensors" ] ||
   [ ! -f "$dir/target.safetensors" ] || [ -L "$dir/target.safetensors" ]; then
  echo "FAIL --save through a link: the link was replaced or the target not written"; failures=$((failures + 1))
else
  echo "ok   --save through a link: written to its target, the link stays"
fi
# Malformed files of every format.
python3 "$(dirname "$0")/make_bad_files.py" "$dir" || { echo "FAIL: cannot make the bad files"; exit 1; }
expect_error "llm.c file with a wrong magic" "has magic 1234.*headerless uint16 file \(nanoGPT's train.bin\)" --data "$dir/magic.bin"
expect_error "llm.c file with a wrong version" "has version 7" --data "$dir/version.bin"
expect_error "llm.c file with a wrong count" "declares 1000 tokens" --data "$dir/count.bin"
expect_error "llm.c tokens beyond the vocabulary" "tokens up to 999" --data "$dir/vocab.bin" --seq-len 8
expect_error "safetensors with overlapping tensors" "overlap" --init-from "$dir/overlap.safetensors"
expect_error "safetensors with a hole" "hole" --init-from "$dir/hole.safetensors"
expect_error "truncated safetensors" "outside the data section" --init-from "$dir/truncated.safetensors"
expect_error "safetensors with a huge header" "not a safetensors file .*header length of 1099511627776 bytes" \
  --init-from "$dir/huge-header.safetensors"
printf '{"step": 1, "loss": 2.5}\n' > "$dir/text.json"
expect_error "--init-from a text file" "text.json: not a safetensors file" --init-from "$dir/text.json"
expect_error "--offload-optimizer disk onto a file" "disk:.*empty\.txt is not a directory" --offload-optimizer "disk:$dir/empty.txt"
# The kernel's own filesystems store no files: named as such, before anything
# is made there (a directory made under a cgroup hierarchy is a control group).
expect_usage "--offload-optimizer disk under /proc" "--offload-optimizer disk:/proc: /proc is on a virtual filesystem that stores no files" \
  --offload-optimizer disk:/proc
expect_usage "--checkpoint-dir under /sys" "--checkpoint-dir: /sys/zrt-ck/a is on a virtual filesystem that stores no files" \
  --checkpoint-dir /sys/zrt-ck/a
cgroup=$(awk '$3 ~ /^cgroup2?$/ {print $2; exit}' /proc/mounts)
if [ -n "$cgroup" ] && [ -w "$cgroup" ]; then
  expect_usage "--checkpoint-dir under a cgroup hierarchy" "--checkpoint-dir: $cgroup/zrt-ck-$$ is on a virtual filesystem" \
    --checkpoint-dir "$cgroup/zrt-ck-$$"
  [ -e "$cgroup/zrt-ck-$$" ] && { rmdir "$cgroup/zrt-ck-$$"; echo "FAIL --checkpoint-dir made a control group"; failures=$((failures + 1)); }
else
  echo "skip --checkpoint-dir under a cgroup hierarchy: none writable here"
fi
expect_error "safetensors with bad JSON" "safetensors header \(23 bytes\) is not valid JSON at its byte" --init-from "$dir/bad-json.safetensors"
expect_error "safetensors with a bad dtype" "unknown safetensors dtype 'F7'" --init-from "$dir/bad-dtype.safetensors"
expect_error "safetensors with an I16 tensor" "holds a tensor of safetensors dtype 'I16', which zrt does not read \(it reads F32" \
  --init-from "$dir/i16.safetensors"
expect_error "NaN feature in MLP rows" "nan-rows.safetensors: feature 5 of row 1 is nan" --model mlp --data "$dir/nan-rows.safetensors"
expect_error "Inf feature in MLP rows" "inf-rows.safetensors: feature 15 of row 2 is -inf" --model mlp --data "$dir/inf-rows.safetensors"
# A safetensors file is known by its contents too: renamed, it is still read
# as rows (here named by its bad feature), never trained on as text.
cp "$dir/nan-rows.safetensors" "$dir/nan-rows.data"
expect_error "MLP rows under another name" "nan-rows.data: feature 5 of row 1 is nan" --model mlp --data "$dir/nan-rows.data"
expect_error "a gpt on rows without an extension" "data .*rows-without-extension holds feature rows, but a gpt model trains on tokens" \
  --data "$dir/rows-without-extension"
expect_error "safetensors naming a tensor twice" "names tensor 'a' twice" --init-from "$dir/duplicate-key.safetensors"
# Finite weights only: a NaN planted in valid weights is named with its index.
python3 - "$dir/shallow.safetensors" "$dir/nan.safetensors" <<'PY' || { echo "FAIL: cannot plant a NaN"; exit 1; }
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
begin = header["ln_f.weight"]["data_offsets"][0]
struct.pack_into("<f", data, 8 + n + begin + 4 * 3, float("nan"))
open(sys.argv[2], "wb").write(data)
PY
expect_error "NaN in the initial weights" "ln_f.weight' holds nan at flat index 3" --init-from "$dir/nan.safetensors" --n-layer 1
# An f64 weight past fp32's range is named as what the file holds, not as inf.
python3 - "$dir/shallow.safetensors" "$dir/huge.safetensors" <<'PY' || { echo "FAIL: cannot write f64 weights"; exit 1; }
import array, json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
out, blobs, at = {}, [], 0
for name, e in sorted((k, v) for k, v in header.items() if k != "__metadata__"):
    b, end = e["data_offsets"]
    raw, dtype = data[8 + n + b:8 + n + end], "F32"
    if name == "ln_f.weight":
        a = array.array("d", array.array("f", raw))
        a[2] = 1e300
        raw, dtype = a.tobytes(), "F64"
    out[name] = {"dtype": dtype, "shape": e["shape"], "data_offsets": [at, at + len(raw)]}
    blobs.append(raw)
    at += len(raw)
h = json.dumps(out).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
expect_error "an f64 weight past fp32's range" "ln_f.weight' holds 1e\+300 at flat index 2, past fp32's range" --init-from "$dir/huge.safetensors" --n-layer 1
# lm_head.weight, tied to wte.weight in the model, loads when it equals wte and is refused when
# it differs (an untied head would be dropped).
python3 - "$dir/shallow.safetensors" "$dir" <<'PY' || { echo "FAIL: cannot add an lm_head"; exit 1; }
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header, body = json.loads(data[8:8 + n]), data[8 + n:]
wte = header["wte.weight"]
values = body[wte["data_offsets"][0]:wte["data_offsets"][1]]
for name, head in (("tied-equal", values), ("tied-other", values[:-4] + struct.pack("<f", 0.5))):
    h = dict(header)
    h["lm_head.weight"] = {"dtype": "F32", "shape": wte["shape"], "data_offsets": [len(body), len(body) + len(head)]}
    text = json.dumps(h).encode()
    open(f"{sys.argv[2]}/{name}.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + body + head)
PY
if "$train" --n-layer 1 --steps 1 --init-from "$dir/tied-equal.safetensors" > /dev/null 2>&1; then
  echo "ok   an lm_head equal to wte loads"
else echo "FAIL an lm_head equal to wte: $("$train" --n-layer 1 --steps 1 --init-from "$dir/tied-equal.safetensors" 2>&1)"; failures=$((failures + 1)); fi
expect_error "an lm_head other than wte" "'lm_head.weight' differs from 'wte.weight' at flat index [0-9]+ \\(0.5 vs" \
  --init-from "$dir/tied-other.safetensors" --n-layer 1

# --plan writes no output and makes no directory, and says so.
out=$("$train" --plan --save "$dir/plan.st" --checkpoint-dir "$dir/plan-ck" 2>&1 &&
  "$train" --plan --checkpoint-dir "$dir/notes-ck" 2>&1) ||
  { echo "FAIL --plan with outputs: $out"; failures=$((failures + 1)); }
grep -q -- "note: --plan trains nothing and writes nothing: --save, --checkpoint-dir ignored" <<<"$out" ||
  { echo "FAIL --plan did not name the outputs it ignores: $out"; failures=$((failures + 1)); }
[ ! -e "$dir/plan.st" ] && [ ! -e "$dir/plan-ck" ] ||
  { echo "FAIL --plan wrote an output or made --checkpoint-dir"; failures=$((failures + 1)); }

# --check-consistency: agreeing ranks train on without a word.
out=$("$train" --ranks 3 --threads 1 --strategy no-shard --dtype bf16 --batch-size 6 --steps 2 --check-consistency 1 2>&1) ||
  { echo "FAIL --check-consistency 1 on agreeing ranks: $out"; failures=$((failures + 1)); }
if grep -q "warning" <<<"$out"; then echo "FAIL --check-consistency 1 warned: $out"; failures=$((failures + 1)); fi
# ... also where the zero3 shards are int8 (Note [Quantized parameter gather]).
out=$("$train" --ranks 4 --threads 1 --strategy layer-zero --zero3-size 2 --dtype bf16 --gather-dtype int8 \
  --batch-size 8 --steps 2 --check-consistency 1 2>&1) ||
  { echo "FAIL --check-consistency 1 with --gather-dtype int8: $out"; failures=$((failures + 1)); }
if grep -q "warning" <<<"$out"; then echo "FAIL --check-consistency 1 int8 warned: $out"; failures=$((failures + 1)); fi

total=$(grep -cE '^([A-Z_]+=[^ ]* )*expect_(error|error_raw|usage) "' "$0")
echo "$(( total - failures )) of $total passed, $failures failed"
[ $failures -eq 0 ]
