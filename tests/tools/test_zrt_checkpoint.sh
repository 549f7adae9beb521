#!/usr/bin/env bash
# zrt-train checkpoints end to end: resume is bit-exact (local ranks, also
# with an int8 parameter gather and an int4 gradient reduce, and mpirun),
# resharding a checkpoint of one world size into another continues the run,
# SIGTERM saves and exits 0, SIGKILL at random moments (synchronous and
# background saves) never leaves a `latest` that fails to verify,
# --checkpoint-async writes what synchronous saves write, zrt-ckpt
# info/verify/export/reshard work and the export loads in PyTorch; bad
# input, an index that lies included, is a named error changing nothing.
# CKPT_KILL_TRIALS (default 10; not ZRT_*, which zrt checks): the random
# kills of each kind (tools/sanitize.sh asks for fewer: AddressSanitizer
# checks each save's memory, the kills' timing is the plain run's).
# usage: test_zrt_checkpoint.sh ZRT-TRAIN ZRT-CKPT PYTHON [MPIEXEC]
set -u
train=$1 ckpt=$2 python=$3 mpiexec=${4:-}
kills=${CKPT_KILL_TRIALS:-10}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
. "$here/user_messages.sh"
run() { "$train" --log-every 1000 "$@" > "$dir/out.txt" 2>&1 || { cat "$dir/out.txt"; return 1; }; }
common=(--steps 20 --batch-size 8 --seq-len 32)

# 1. Resume is bit-exact: 20 steps == 10 + save + resume + 10 (weights byte for byte, losses).
bit_exact() {
  local name=$1; shift
  local launch=("$@")
  rm -rf "$dir/ck" "$dir"/*.jsonl
  "${launch[@]}" "${common[@]}" --save "$dir/full.st" --metrics "$dir/full.jsonl" > /dev/null 2>&1 &&
  "${launch[@]}" "${common[@]}" --checkpoint-dir "$dir/ck" --checkpoint-every 10 > /dev/null 2>&1 &&
  "${launch[@]}" "${common[@]}" --checkpoint-dir "$dir/ck" --resume "$dir/ck/step-000010" --save "$dir/resumed.st" \
    --metrics "$dir/resumed.jsonl" > /dev/null 2>&1 || { fail "$name: a run failed"; return; }
  cmp -s "$dir/full.st" "$dir/resumed.st" || { fail "$name: final weights differ"; return; }
  diff <(tail -n 10 "$dir/full.jsonl" | sed 's/"tokens_per_s.*//') <(sed 's/"tokens_per_s.*//' "$dir/resumed.jsonl") \
    > /dev/null || { fail "$name: losses of steps 11-20 differ"; return; }
  ok "$name: resumed run is bit-exact"
}
bit_exact "local ranks, layer-zero bf16 micro-batches" "$train" --ranks 4 --strategy layer-zero --zero3-size 2 \
  --dtype bf16 --micro-batches 2
bit_exact "local ranks, layer-zero bf16, int8 gather, int4 reduce" "$train" --ranks 4 --strategy layer-zero \
  --zero3-size 2 --dtype bf16 --gather-dtype int8 --reduce-dtype int4
# Note [Quantization blocks within one parameter]: its layout starts each parameter on the block grid.
grep -q '"quant_block": *256' "$dir/ck/step-000010/index.json" && "$ckpt" verify "$dir/ck/step-000010" > /dev/null &&
  ok "a quantized run's checkpoint records quant_block 256 and verifies" ||
  fail "a quantized run's checkpoint's quant_block"
# The gather and reduce dtypes are run settings, not state: that checkpoint resumes without them.
run "${common[@]}" --ranks 4 --strategy layer-zero --zero3-size 2 --dtype bf16 --resume "$dir/ck/step-000010" &&
  ok "an int8-gather, int4-reduce checkpoint resumes with the compute-dtype gather, fp32 reduce" ||
  fail "an int8-gather, int4-reduce checkpoint with the compute-dtype gather, fp32 reduce"
if [ -n "$mpiexec" ]; then
  bit_exact "mpirun -np 2, hybrid" "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$train" --strategy hybrid \
    --zero3-size 1
  # 2. The mpirun checkpoint of 2 ranks continues on 4 local ranks, and offline-resharded to 3.
  final_loss() { tail -n 1 "$1" | sed 's/.*"loss": *\([^,]*\),.*/\1/'; }
  close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * (b < 0 ? -b : b)) }'; }
  if run "${common[@]}" --ranks 4 --resume "$dir/ck/step-000010" --metrics "$dir/r4.jsonl" &&
     close "$(final_loss "$dir/r4.jsonl")" "$(final_loss "$dir/full.jsonl")"; then
    ok "2 mpirun ranks -> 4 local ranks: final loss $(final_loss "$dir/r4.jsonl") vs $(final_loss "$dir/full.jsonl")"
  else fail "2 mpirun ranks -> 4 local ranks"; fi
  if "$ckpt" reshard "$dir/ck/step-000010" --ranks 3 --strategy full --out "$dir/ck3" > /dev/null &&
     run --steps 20 --batch-size 6 --seq-len 32 --ranks 3 --resume "$dir/ck3/step-000010" > /dev/null; then
    ok "zrt-ckpt reshard to 3 ranks resumes"
  else fail "zrt-ckpt reshard to 3 ranks"; fi
fi

# 3. zrt-ckpt info / verify / export; the export loads in PyTorch and into zrt-train.
rm -rf "$dir/ck"
run "${common[@]}" --ranks 2 --checkpoint-dir "$dir/ck" --save "$dir/final.st" || fail "training for zrt-ckpt"
"$ckpt" info "$dir/ck" | grep -q "step         20" && ok "info names the step" || fail "info"
"$ckpt" verify "$dir/ck" > /dev/null && ok "verify passes" || fail "verify of an intact checkpoint"
out=$("$ckpt" export "$dir/ck" --out "$dir/nodir/x.st" 2>&1)
[ $? = 2 ] && grep -q -- "--out $dir/nodir/x.st: directory $dir/nodir does not exist" <<<"$out" &&
  ok "export into a missing directory names --out (exit 2)" || fail "export into a missing directory: $out"
for sub in "export $dir/ck --out /proc/zrt-x.st" "reshard $dir/ck --ranks 2 --out /sys/zrt-ck"; do
  out=$("$ckpt" $sub 2>&1)
  [ $? = 2 ] && grep -q -- "--out: /[a-z]*/zrt-[a-z.]* is on a virtual filesystem that stores no files" <<<"$out" &&
    ok "${sub%% *} --out on a kernel filesystem (exit 2)" || fail "${sub%% *} --out on a kernel filesystem: $out"
done
# Empty paths (an unset variable) and a bad ZRT_* value: command-line faults, exit 2.
out=$("$ckpt" export "$dir/ck" --out "" 2>&1)
[ $? = 2 ] && grep -q -- "--out is empty" <<<"$out" && ok "export --out \"\" (exit 2)" || fail "export --out \"\": $out"
out=$("$ckpt" info "" 2>&1)
[ $? = 2 ] && grep -q "the checkpoint path is empty" <<<"$out" && ok "info \"\" (exit 2)" || fail "info \"\": $out"
out=$(ZRT_COMM_TIMEOUT_S=soon "$ckpt" info "$dir/ck" 2>&1)
[ $? = 2 ] && grep -q "ZRT_COMM_TIMEOUT_S" <<<"$out" && ok "a bad ZRT_* value (exit 2)" || fail "a bad ZRT_* value: $out"
# A directory's `latest` file names that directory (docs/checkpoints.md).
"$ckpt" info "$dir/ck/latest" | grep -q "step         20" && ok "info of DIR/latest names the step" ||
  fail "info of DIR/latest"
run --steps 21 --batch-size 8 --seq-len 32 --ranks 2 --resume "$dir/ck/latest" &&
  grep -q "resumed from $dir/ck at step 20" "$dir/out.txt" && ok "--resume DIR/latest resumes its step" ||
  fail "--resume DIR/latest"
exported=$("$ckpt" export "$dir/ck" --out "$dir/export.st") && cmp -s "$dir/export.st" "$dir/final.st" &&
  ok "export equals --save of the same step" || fail "export"
# A root's export names the step its `latest` gave (a live run moves it).
grep -q "^zrt-ckpt: wrote [0-9]* parameters of $dir/ck/step-000020 to $dir/export.st$" <<<"$exported" &&
  ok "export names the step it read" || fail "export's line: $exported"
if out=$("$python" "$here/load_export_torch.py" "$dir/export.st" 2>&1); then ok "PyTorch: $out"; else fail "PyTorch load: $out"; fi
run --steps 2 --init-from "$dir/export.st" && ok "export loads with --init-from" || fail "--init-from export"
# One command serves a job and its requeues: a resume reads no --init-from,
# so a pretrained file moved or broken since the first start is no obstacle.
cp "$dir/export.st" "$dir/pre.st"
run --steps 2 --init-from "$dir/pre.st" --checkpoint-dir "$dir/ick" --resume || fail "--init-from, first start"
printf 'not weights' > "$dir/pre.st"
run --steps 3 --init-from "$dir/pre.st" --checkpoint-dir "$dir/ick" --resume &&
  grep -q "init-from $dir/pre.st was not read" "$dir/out.txt" && ok "a resume reads no --init-from (broken since)" ||
  fail "a resume read --init-from: $(tail -n1 "$dir/out.txt")"
rm "$dir/pre.st"
run --steps 4 --init-from "$dir/pre.st" --checkpoint-dir "$dir/ick" --resume &&
  ok "a resume reads no --init-from (removed since)" || fail "a resume needs --init-from: $(tail -n1 "$dir/out.txt")"
# A checkpoint of more ranks than the process may open files: verify, export
# and resume keep a bounded number open (the reader used to hold every one).
"$ckpt" reshard "$dir/ck" --ranks 100 --out "$dir/r100" > /dev/null || fail "reshard to 100 ranks"
if (ulimit -n 48 && "$ckpt" verify "$dir/r100" > /dev/null &&
    "$ckpt" export "$dir/r100" --out "$dir/export100.st" > /dev/null &&
    "$train" --log-every 1000 --steps 21 --batch-size 8 --seq-len 32 --resume "$dir/r100" > /dev/null) &&
  cmp -s "$dir/export100.st" "$dir/final.st"; then
  ok "100 rank files under ulimit -n 48: verify, export, resume"
else fail "100 rank files under ulimit -n 48"; fi
# Under an address-space limit zrt-ckpt, which multiplies nothing, loads no
# OpenBLAS, whose load-time workers spun forever on a 128 MiB buffer that did
# not fit (Note [OpenBLAS loaded on first use]). 96 MiB above what its own
# libraries map (by bisection on --help, with no OpenBLAS workers); sanitizers' shadow memory cannot.
if ! nm -D "$ckpt" 2>/dev/null | grep -qE "__(asan|tsan)_init"; then
  lo=0 hi=$((8 << 20))  # KiB
  while [ $((hi - lo)) -gt 4096 ]; do
    mid=$(((lo + hi) / 2))
    if (ulimit -v $mid && OPENBLAS_NUM_THREADS=1 timeout -s KILL 10 "$ckpt" --help > /dev/null 2>&1); then hi=$mid; else lo=$mid; fi
  done
  if (ulimit -v $((hi + 96 * 1024)) && timeout -s KILL 30 "$ckpt" info "$dir/ck" > /dev/null 2>&1); then
    ok "zrt-ckpt info under ulimit -v of 96 MiB above its libraries"
  else fail "zrt-ckpt info under ulimit -v $((hi + 96 * 1024)): exit $? (137: it spun)"; fi
fi

# 4. SIGTERM: finish the step, save, exit 0; the checkpoint resumes.
rm -rf "$dir/sig"
# --save is the final weights: a stopped run says it did not write them.
"$train" --steps 100000 --checkpoint-dir "$dir/sig" --log-every 100000 --save "$dir/sig.safetensors" \
  > "$dir/sig.txt" 2>&1 &
pid=$!
sleep 1.5
kill -TERM "$pid"
wait "$pid"; rc=$?
if [ $rc -eq 0 ] && grep -q "stopped by a signal" "$dir/sig.txt" && "$ckpt" verify "$dir/sig" > /dev/null &&
   grep -q "^zrt-train: --save .*sig.safetensors was not written (the run did not finish)$" "$dir/sig.txt" &&
   [ ! -e "$dir/sig.safetensors" ]; then
  ok "SIGTERM: exit 0, $(grep -o 'saved checkpoint.*' "$dir/sig.txt"), --save not written and said so"
else fail "SIGTERM: rc $rc: $(cat "$dir/sig.txt")"; fi

# stops_cleanly NAME SIGNALS ARGS...: zrt-train ARGS, sent SIGNALS 50 ms
# apart once it runs, exits 0 saying so, with a checkpoint that verifies.
stops_cleanly() {
  local name=$1 signals=$2 sig rc
  shift 2
  rm -rf "${dir:?}/$name"
  "$train" "$@" --steps 100000 --checkpoint-dir "$dir/$name" --log-every 100000 > "$dir/$name.txt" 2>&1 &
  local pid=$!
  sleep 1.5
  for sig in $signals; do kill -"$sig" "$pid"; sleep 0.05; done
  wait "$pid"; rc=$?
  [ $rc -eq 0 ] && grep -q "stopped by a signal" "$dir/$name.txt" && "$ckpt" verify "$dir/$name" > /dev/null
}

# 4a. One signal sent twice, as a launcher sends it to the process and then
# to its group (timeout, mpirun), is one stop: the checkpoint is written.
# Steps of about a second, so that the copy lands inside one.
if stops_cleanly copy "TERM TERM" --n-layer 2 --n-embd 384 --n-head 4 --batch-size 32 --seq-len 128; then
  ok "a signal sent twice 50 ms apart: exit 0, $(grep -o 'saved checkpoint.*' "$dir/copy.txt")"
else fail "a signal sent twice: $(cat "$dir/copy.txt")"; fi

# 4a''. A signal during a periodic save stops the run once that save is
# written: the step is kept, and no further step and save eat into a
# preemption's grace. The signal follows step 2's line (a save of about
# 0.5 s follows it).
rm -rf "$dir/insave"
"$train" --n-layer 4 --n-embd 512 --n-head 4 --batch-size 4 --seq-len 32 --steps 8 --checkpoint-every 2 \
  --checkpoint-dir "$dir/insave" --log-every 1 > "$dir/insave.txt" 2>&1 &
pid=$!
for _ in $(seq 3000); do grep -q "^step     2/8" "$dir/insave.txt" && break; sleep 0.01; done
kill -TERM "$pid"
wait "$pid"; rc=$?
if [ $rc -eq 0 ] && grep -q "stopped by a signal after step 2 of 8" "$dir/insave.txt" &&
  [ "$(cd "$dir/insave" && echo step-*)" = "step-000002" ]; then
  ok "a signal during a save: exit 0 after that save, $(cd "$dir/insave" && echo step-*)"
else fail "a signal during a save: rc $rc, steps $(cd "$dir/insave" && echo step-*): $(grep -v '^step' "$dir/insave.txt")"; fi

# 4a'. The soft CPU-time limit (SIGXCPU, repeated every second after) stops
# as SIGTERM does: before, its default action ended the run, no checkpoint.
rm -rf "$dir/xcpu"
(ulimit -S -t 3; exec "$train" --steps 100000 --checkpoint-dir "$dir/xcpu" --log-every 100000) \
  > "$dir/xcpu.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "stopped by a signal" "$dir/xcpu.txt" && "$ckpt" verify "$dir/xcpu" > /dev/null; then
  ok "SIGXCPU (ulimit -S -t): exit 0, $(grep -o 'saved checkpoint.*' "$dir/xcpu.txt")"
else fail "SIGXCPU: rc $rc: $(cat "$dir/xcpu.txt")"; fi

# 4b. SIGHUP (a closed terminal) stops as SIGTERM does; so does a reader of
# the output that went away: the job's `| tee` stopped with it (its next
# progress line would have killed the run with SIGPIPE, no checkpoint).
if stops_cleanly hup HUP; then ok "SIGHUP: exit 0, $(grep -o 'saved checkpoint.*' "$dir/hup.txt")"
else fail "SIGHUP: $(cat "$dir/hup.txt")"; fi
rm -rf "$dir/pipe"
mkfifo "$dir/pipe.fifo"
"$train" --steps 100000 --checkpoint-dir "$dir/pipe" --log-every 1 > "$dir/pipe.fifo" 2> "$dir/pipe.err" &
pid=$!
head -n 3 "$dir/pipe.fifo" > /dev/null  # reads three lines, then the reader is gone
wait "$pid"; rc=$?
if [ $rc -eq 0 ] && grep -q "the output's reader is gone" "$dir/pipe.err" && "$ckpt" verify "$dir/pipe" > /dev/null; then
  ok "the output's reader gone: exit 0 with a checkpoint"
else fail "the output's reader gone: rc $rc: $(cat "$dir/pipe.err"; ls "$dir/pipe")"; fi
# ... and so does the reader of --trace or --metrics on a stream: the
# failed write is the stop's, not the run's failure.
for flag in --trace --metrics; do
  rm -rf "$dir/pipe"
  "$train" --steps 100000 --checkpoint-dir "$dir/pipe" --log-every 100000 "$flag" /dev/stdout > "$dir/pipe.fifo" 2> "$dir/pipe.err" &
  pid=$!
  head -n 3 "$dir/pipe.fifo" > /dev/null
  wait "$pid"; rc=$?
  if [ $rc -eq 0 ] && grep -q "the output's reader is gone" "$dir/pipe.err" && "$ckpt" verify "$dir/pipe" > /dev/null; then
    ok "$flag /dev/stdout's reader gone: exit 0 with a checkpoint"
  else fail "$flag /dev/stdout's reader gone: rc $rc: $(cat "$dir/pipe.err"; ls "$dir/pipe")"; fi
done
# A FIFO that no process reads yet: the run says it waits for the reader
# (opening it blocks until one comes), then writes to it once it comes.
for flag in --trace --metrics; do
  rm -f "$dir/out.fifo" "$dir/out.txt" && mkfifo "$dir/out.fifo"
  "$train" --steps 2 "$flag" "$dir/out.fifo" > /dev/null 2> "$dir/fifo.err" &
  pid=$!
  for _ in $(seq 100); do grep -q "waiting for its reader" "$dir/fifo.err" && break; sleep 0.1; done
  said=$(cat "$dir/fifo.err")
  timeout 60 cat "$dir/out.fifo" > "$dir/out.txt"
  wait "$pid"; rc=$?
  if [ $rc -eq 0 ] && grep -q -- "$flag $dir/out.fifo is a FIFO that no process reads yet: waiting for its reader" <<<"$said" &&
    [ -s "$dir/out.txt" ]; then
    ok "$flag on a FIFO without a reader: said so, then wrote $(wc -c < "$dir/out.txt") bytes to its reader"
  else fail "$flag on a FIFO without a reader: rc $rc, said: $said"; fi
done

# 5. Random SIGKILLs during saves never leave a bad `latest`, also while they are written in the background.
"$here/../../tools/ckpt-kill-stress.sh" "$train" "$ckpt" "$kills" && ok "$kills kill trials" || fail "kill trials"
"$here/../../tools/ckpt-kill-stress.sh" "$train" "$ckpt" "$kills" --checkpoint-async && ok "$kills kill trials, saves in the background" ||
  fail "kill trials, saves in the background"

# 5b. --checkpoint-async: the same weights and the same checkpoint files as synchronous saves; SIGTERM waits for the write.
rm -rf "$dir/cks" "$dir/cka"
if run "${common[@]}" --ranks 2 --checkpoint-dir "$dir/cks" --checkpoint-every 7 --save "$dir/sync.st" &&
   run "${common[@]}" --ranks 2 --checkpoint-dir "$dir/cka" --checkpoint-every 7 --save "$dir/async.st" \
     --checkpoint-async && grep -q "saved checkpoint $dir/cka/step-000020" "$dir/out.txt"; then
  same=1
  for f in "$dir"/cks/step-*/*; do cmp -s "$f" "$dir/cka/${f#"$dir"/cks/}" || { same=0; echo "differs: $f"; }; done
  cmp -s "$dir/sync.st" "$dir/async.st" || same=0
  [ $same -eq 1 ] && [ "$(ls "$dir/cks")" = "$(ls "$dir/cka")" ] && ok "--checkpoint-async: steps and weights equal synchronous saves" ||
    fail "--checkpoint-async differs from synchronous saves"
else fail "--checkpoint-async run: $(cat "$dir/out.txt")"; fi
if [ -n "$mpiexec" ]; then
  rm -rf "$dir/ckm" "$dir/ckma"
  mpi=("$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$train" --log-every 1000 "${common[@]}" --checkpoint-every 5)
  if "${mpi[@]}" --checkpoint-dir "$dir/ckm" --save "$dir/sync-mpi.st" > "$dir/out.txt" 2>&1 &&
     "${mpi[@]}" --checkpoint-dir "$dir/ckma" --save "$dir/async-mpi.st" --checkpoint-async > "$dir/out.txt" 2>&1 &&
     cmp -s "$dir/sync-mpi.st" "$dir/async-mpi.st" && cmp -s "$dir/ckm/step-000015/index.json" "$dir/ckma/step-000015/index.json" &&
     "$ckpt" verify "$dir/ckma" > /dev/null; then
    ok "mpirun -np 2 --checkpoint-async: the steps and weights of synchronous saves"
  else fail "mpirun -np 2 --checkpoint-async: $(cat "$dir/out.txt")"; fi
fi
rm -rf "$dir/siga"
"$train" --steps 100000 --checkpoint-dir "$dir/siga" --checkpoint-async --log-every 100000 > "$dir/siga.txt" 2>&1 &
pid=$!
sleep 1.5
kill -TERM "$pid"
wait "$pid"; rc=$?
if [ $rc -eq 0 ] && grep -q "saved checkpoint" "$dir/siga.txt" && "$ckpt" verify "$dir/siga" > /dev/null; then
  ok "SIGTERM with --checkpoint-async: exit 0, the background write finished"
else fail "SIGTERM with --checkpoint-async: rc $rc: $(cat "$dir/siga.txt")"; fi

# 6. Bad input: a named error, non-zero exit, nothing changed.
expect_error() {
  local name=$1 pattern=$2; shift 2
  local before after out
  before=$(ls -lR "$dir/ck" 2>&1 | md5sum)
  if out=$("$@" 2>&1); then fail "$name: exit code 0"; return; fi
  grep -qiE -- "$pattern" <<<"$out" || { fail "$name: message does not match /$pattern/: $out"; return; }
  after=$(ls -lR "$dir/ck" 2>&1 | md5sum)
  [ "$before" = "$after" ] || { fail "$name: the checkpoint directory changed"; return; }
  shows_source "$name" "$out" && { failures=$((failures + 1)); return; }
  ok "$name: $(grep -m1 -i error <<<"$out")"
}
expect_error "export onto the directory's run lock" "--out .*/ck/.zrt-run.lock is the checkpoint directory .*'s own .zrt-run.lock file" \
  "$ckpt" export "$dir/ck" --out "$dir/ck/.zrt-run.lock"
expect_error "--checkpoint-every without a directory" "checkpoint-dir" "$train" --checkpoint-every 5
expect_error "--keep-last without a directory" "checkpoint-dir" "$train" --keep-last 2
expect_error "--resume without a path or directory" "checkpoint-dir" "$train" --resume
expect_error "--resume of a missing step" "step-000999.*no such checkpoint" "$train" --resume "$dir/ck/step-000999"
expect_error "--resume into another model" "has no parameter layers\.0\.weight \(these flags differ from the checkpoint's run: --model\)" "$train" --model mlp --resume "$dir/ck"
expect_error "--resume into another width" "wte.weight was saved as \\[256, 32\\] but the model has \\[256, 64\\]" "$train" --n-embd 64 --checkpoint-dir "$dir/ck" --resume
run --steps 2 --batch-size 8 --seq-len 32 --seed 5 --checkpoint-dir "$dir/other-run" || fail "another run"
expect_error "--resume another run into a directory holding steps" "holds steps 20 of another run" \
  "$train" --resume "$dir/other-run" --checkpoint-dir "$dir/ck" --keep-last 1
expect_error "--checkpoint-every negative" "checkpoint-every" "$train" --checkpoint-dir "$dir/x" --checkpoint-every -1
: > "$dir/a-file"
expect_error "--checkpoint-dir under a file" "checkpoint-dir .*a-file/ck cannot be created" "$train" \
  --checkpoint-dir "$dir/a-file/ck"
expect_error "info of a non-checkpoint" "not a checkpoint" "$ckpt" info "$dir"
expect_error "info of two checkpoints" "unexpected value .* \(a flag takes one value, a command the arguments --help lists\)" "$ckpt" info "$dir/ck" "$dir/ck"
expect_error "reshard to 0 ranks" "--ranks: must be a whole number from 1 to 65536 \(got 0\)" "$ckpt" reshard "$dir/ck" \
  --ranks 0 --out "$dir/x"
expect_error "reshard to a negative zero3 size" "--zero3-size: must be a whole number of at least 0 \(got -1\)" "$ckpt" \
  reshard "$dir/ck" --ranks 2 --zero3-size -1 --out "$dir/x"
mkdir -p "$dir/latest-dir/latest"
expect_error "info where latest is a directory" "latest-dir/latest is a directory, not a file" "$ckpt" info "$dir/latest-dir"
expect_error "resume where latest is a directory" "latest-dir/latest is a directory, not a file" "$train" \
  --checkpoint-dir "$dir/latest-dir" --resume
expect_error "reshard with a zero3 size not dividing" "reshard --zero3-size 3 does not divide --ranks 4" "$ckpt" reshard "$dir/ck" --ranks 4 --strategy hybrid \
  --zero3-size 3 --out "$dir/x"
expect_error "reshard into the checkpoint itself" "holds the checkpoint read" "$ckpt" reshard "$dir/ck" --ranks 2 --out "$dir/ck"
cp -r "$dir/ck" "$dir/bad"
printf '\x55' | dd of="$dir/bad/step-000020/rank-00001.safetensors" bs=1 seek=2000 conv=notrunc status=none
expect_error "verify of a flipped byte" "rank-00001.safetensors.*checksum" "$ckpt" verify "$dir/bad"
expect_error "resume of a flipped byte" "rank-00001.safetensors.*checksum" "$train" --ranks 2 --resume "$dir/bad"
truncate -s 100 "$dir/bad/step-000020/rank-00000.safetensors"
expect_error "verify of a truncated file" "rank-00000.safetensors.*truncated" "$ckpt" verify "$dir/bad"
rm "$dir/bad/step-000020/rank-00000.safetensors"
expect_error "verify of a missing rank file" "rank-00000.safetensors.*missing" "$ckpt" verify "$dir/bad"

# 7. The index cannot lie: its checksums (index.json.xxh64, the second line of `latest`) are an
# independent xxHash64 of it; an edit with them rewritten is refused by validation, naming the
# field; one without, by the checksum. Intact files throughout.
edit_index() { "$python" "$here/ckpt_index_edit.py" "$@"; }
edit_index "$dir/ck/step-000020" check && ok "index.json.xxh64 and latest hold index.json's xxh64" ||
  fail "index checksums: $(edit_index "$dir/ck/step-000020" check 2>&1)"
lie() {
  local edit=$1 pattern=$2; shift 2
  rm -rf "$dir/lie" && cp -r "$dir/ck" "$dir/lie" && edit_index "$dir/lie/step-000020" "$edit" "$@" ||
    { fail "editing the index ($edit)"; return; }
  expect_error "verify of an index with $edit ${*:-(checksums rewritten)}" "$pattern" "$ckpt" verify "$dir/lie"
}
lie shift-offset "step-000020/index.json: index field layout.handles\[h.0\].params\[.*\].offset is"
lie swap-zero1-ranks "index.json: index field ranks\[0\].zero1_rank is 1"
lie step "index.json: index field step is 21 but state.next_step is 20"
lie shift-offset "index.json.xxh64 records xxh64 [0-9a-f]{16}, the file hashes to [0-9a-f]{16}" stale
expect_error "resume of an index with a shifted offset" "index.json.xxh64 records xxh64" "$train" --ranks 2 --resume \
  "$dir/lie"

# Special files in place of a checkpoint's files, or as --init-from: named and
# refused within seconds, never a hang (Note [One rule for every file zrt reads]).
expect_quick_error() {  # NAME PATTERN CMD...
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$(timeout 30 "$@" 2>&1)
  rc=$?
  if [ $rc -eq 124 ]; then fail "$name: hung"; return; fi
  if [ $rc -eq 0 ]; then fail "$name: exit code 0"; return; fi
  grep -qiE -- "$pattern" <<<"$out" || { fail "$name: message does not match /$pattern/: $out"; return; }
  shows_source "$name" "$out" && { failures=$((failures + 1)); return; }
  ok "$name: $(grep -m1 -i error <<<"$out" | cut -c1-160)"
}
for file in step-000020/index.json step-000020/index.json.xxh64 latest step-000020/rank-00000.safetensors; do
  rm -rf "$dir/special" && cp -r "$dir/ck" "$dir/special" && rm "$dir/special/$file" && mkfifo "$dir/special/$file"
  for sub in verify info; do
    expect_quick_error "$sub with a FIFO for $file" "is a FIFO" "$ckpt" "$sub" "$dir/special"
  done
  expect_quick_error "export with a FIFO for $file" "is a FIFO" "$ckpt" export "$dir/special" --out "$dir/special.st"
  expect_quick_error "reshard with a FIFO for $file" "is a FIFO" "$ckpt" reshard "$dir/special" --ranks 2 \
    --out "$dir/special-2"
  expect_quick_error "--ranks 2 --resume with a FIFO for $file" "is a FIFO" "$train" --ranks 2 --steps 22 \
    --checkpoint-dir "$dir/special" --resume
done
rm -rf "$dir/special" && cp -r "$dir/ck" "$dir/special" && rm "$dir/special/step-000020/index.json.xxh64"
expect_quick_error "a step without its index.json.xxh64" \
  "index.json.xxh64: is missing; format [0-9]+ always writes it next to index.json, so this step is incomplete or was altered: resume another step$" \
  "$ckpt" verify "$dir/special/step-000020"
rm -rf "$dir/special" && cp -r "$dir/ck" "$dir/special" && rm "$dir/special/latest" && mkdir "$dir/special/latest"
expect_quick_error "a directory for latest" "latest.* is a directory" "$ckpt" info "$dir/special"
rm -f "$dir/special/step-000020/rank-00000.safetensors"
ln -s /dev/zero "$dir/special/step-000020/rank-00000.safetensors"
expect_quick_error "/dev/zero for a rank file" "is a character device" "$ckpt" verify "$dir/special/step-000020"
rm -rf "$dir/special" && cp -r "$dir/ck" "$dir/special"
cp "$dir/special/step-000020/rank-00000.safetensors" "$dir/special/step-000020/rank-00007.safetensors"
expect_quick_error "verify of a step holding a stray rank file" "not as it was saved.*rank-00007.safetensors" \
  "$ckpt" verify "$dir/special"
expect_quick_error "reshard --zero3-size with strategy full" "--zero3-size is read by --strategy hybrid" \
  "$ckpt" reshard "$dir/ck" --ranks 2 --strategy full --zero3-size 2 --out "$dir/z3"
"$ckpt" reshard "$dir/ck" --ranks 2 --strategy full --zero3-size 2 --out "$dir/z3" > /dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "a flag combination reshard cannot read exits 2" || fail "reshard flag combination: exit $rc, not 2"
# reshard never points a directory's `latest` at another run's step, or back in time.
"$train" --steps 6 --checkpoint-every 3 --checkpoint-dir "$dir/run-a" > /dev/null &&
  "$train" --steps 6 --checkpoint-every 3 --seed 7 --checkpoint-dir "$dir/run-b" > /dev/null ||
  fail "cannot make two runs' checkpoints"
expect_quick_error "reshard into another run's directory" "holds checkpoints of another run \(another --seed" \
  "$ckpt" reshard "$dir/run-a/step-000003" --ranks 2 --out "$dir/run-b"
mkdir -p "$dir/copy-b" && cp -r "$dir/run-b/step-000003" "$dir/copy-b/"
expect_quick_error "reshard behind a newer step" "holds step-000006, newer than step-000003: its .latest. would move back" \
  "$ckpt" reshard "$dir/copy-b/step-000003" --ranks 2 --out "$dir/run-b"
# A step inside --out is refused first, --force or not: no hint that cannot help.
for force in "" --force; do
  expect_quick_error "reshard of a step inside --out $force" "--out $dir/run-b holds the checkpoint read, $dir/run-b/step-000003: write" \
    "$ckpt" reshard "$dir/run-b/step-000003" --ranks 2 --out "$dir/run-b" $force
done
# An --out that cannot be made is named, exit 2 (the run lock's file was named).
: > "$dir/a-file"
out=$("$ckpt" reshard "$dir/run-a/step-000003" --ranks 2 --out "$dir/a-file/sub" 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q "reshard --out $dir/a-file/sub cannot be created: Not a directory" <<<"$out" &&
  ok "reshard into an --out that cannot be made: exit 2" || fail "reshard --out under a file: exit $rc: $out"
[ "$(head -1 "$dir/run-b/latest")" = "step-000006" ] || fail "reshard moved run-b's latest: $(cat "$dir/run-b/latest")"
# An interrupted reshard leaves step-N.tmp: the retry writes the step and removes it.
mkdir -p "$dir/retry/step-000003.tmp" && : > "$dir/retry/step-000003.tmp/rank-00000.zrt"
if "$ckpt" reshard "$dir/run-a/step-000003" --ranks 2 --out "$dir/retry" > /dev/null &&
  [ ! -e "$dir/retry/step-000003.tmp" ] && "$ckpt" verify "$dir/retry" > /dev/null; then
  ok "reshard retried over an interrupted one"
else fail "reshard retried over an interrupted one: $(ls "$dir/retry")"; fi
# SIGINT stops export and reshard before their first shard and leaves nothing
# behind: sent to itself between fork and exec with SIGINT blocked, the signal
# is pending when zrt-ckpt starts and is delivered once it takes it.
if out=$("$python" - "$ckpt" "$dir" <<'PY' 2>&1
import glob, os, signal, subprocess, sys
ckpt, d = sys.argv[1], sys.argv[2]
for args, out in ((["export", d + "/ck", "--out", d + "/stopped.st"], d + "/stopped.st"),
                  (["reshard", d + "/ck", "--ranks", "2", "--out", d + "/stopped-ck"], d + "/stopped-ck")):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    p = subprocess.run([ckpt] + args, capture_output=True, text=True,
                       preexec_fn=lambda: os.kill(os.getpid(), signal.SIGINT))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    said = "stopped by SIGINT; " + ("nothing was written to --out " if args[0] == "export"
                                    else "no step was written into --out ") + out
    left = glob.glob(d + "/.stopped.st.zrt-partial-*") + glob.glob(out + "/step-*")
    if p.returncode != 130 or said not in p.stderr or os.path.isfile(out) or left:
        sys.exit(f"{args[0]}: exit {p.returncode}, left {left}: {p.stderr}")
PY
); then ok "SIGINT stops export and reshard, leaving nothing"; else fail "SIGINT during export/reshard: $out"; fi
# A signal during the last step stops nothing: the run has finished and
# writes --save (pending at start as above, it arrives in step 1 of 1).
if out=$("$python" - "$train" "$dir" <<'PY' 2>&1
import os, signal, subprocess, sys
train, d = sys.argv[1], sys.argv[2]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
p = subprocess.run([train, "--steps", "1", "--batch-size", "8", "--seq-len", "32", "--save", d + "/last.st"],
                   capture_output=True, text=True, preexec_fn=lambda: os.kill(os.getpid(), signal.SIGTERM))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
if p.returncode != 0 or not os.path.isfile(d + "/last.st") or "was not written" in p.stdout:
    sys.exit(f"exit {p.returncode}: {p.stdout} {p.stderr}")
PY
); then ok "a signal during the last step still writes --save"; else fail "signal during the last step: $out"; fi
expect_quick_error "reshard to 100000 ranks" "--ranks: must be a whole number from 1 to 65536 \(got 100000\)" \
  "$ckpt" reshard "$dir/run-a" --ranks 100000 --out "$dir/many"
mkfifo "$dir/fifo.st" && ln -s fifo.st "$dir/fifo-link.st"
expect_quick_error "--init-from a FIFO" "--init-from .*is a FIFO" "$train" --init-from "$dir/fifo.st"
expect_quick_error "--init-from a link to a FIFO" "--init-from .*is a FIFO" "$train" --init-from "$dir/fifo-link.st"
expect_quick_error "--init-from a directory" "--init-from .*is a directory" "$train" --init-from "$dir"
expect_quick_error "--init-from /dev/zero" "--init-from /dev/zero is a character device" "$train" --init-from /dev/zero

echo "$failures failed"
[ $failures -eq 0 ]
