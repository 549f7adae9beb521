#!/usr/bin/env bash
# Outputs onto inputs and resume semantics (Note [No output onto an input],
# Note [Resuming never loses work]): every refused case leaves the checkpoint
# it threatened byte for byte as it was; the accepted rollback keeps the
# abandoned steps on disk and out of the new run's way.
# usage: test_no_work_lost.sh PATH/TO/zrt-train PATH/TO/zrt-ckpt
set -u
train=$1 ckpt=$2
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
. "$(dirname "$0")/user_messages.sh"
tiny=(--n-layer 1 --n-embd 16 --n-head 2 --seq-len 16 --batch-size 4)
digest() { (cd "$1" && find . -type f ! -name .zrt-run.lock | sort | xargs sha256sum) | sha256sum; }

# expect_refused NAME PATTERN TREE CMD...: CMD exits non-zero naming PATTERN and TREE is unchanged.
expect_refused() {
  local name=$1 pattern=$2 tree=$3
  shift 3
  local before out rc
  before=$(digest "$tree")
  out=$("$@" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then fail "$name: exit code 0"; return; fi
  if ! grep -qiE -- "$pattern" <<<"$out"; then fail "$name: message does not match /$pattern/: $out"; return; fi
  if [ "$(digest "$tree")" != "$before" ]; then fail "$name: $tree changed"; return; fi
  shows_source "$name" "$out" && { failures=$((failures + 1)); return; }
  ok "$name (exit $rc): $(grep -m1 -i error <<<"$out" | cut -c1-150)"
}

ck=$dir/ck
"$train" "${tiny[@]}" --steps 4 --checkpoint-dir "$ck" --checkpoint-every 2 > /dev/null || { echo "FAIL: first run"; exit 1; }
step=$ck/step-000004

# Outputs onto the checkpoint being read, in every tool and through links and `..`.
ln -s "$step/rank-00000.safetensors" "$dir/link-to-rank-file"
expect_refused "--save onto the resumed rank file" "resumed checkpoint" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$ck" --resume --save "$step/rank-00000.safetensors"
expect_refused "--save onto latest" "latest" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$ck" --resume --save "$ck/latest"
expect_refused "--save through a link onto a rank file" "inside the resumed checkpoint" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --resume "$step" --save "$dir/link-to-rank-file"
expect_refused "--metrics into a step via .." "resumed checkpoint|checkpoints of --checkpoint-dir" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$ck" --resume --metrics "$ck/step-000002/../step-000004/index.json"
expect_refused "--trace into an older step" "checkpoints of --checkpoint-dir" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$ck" --resume --trace "$ck/step-000002/t.json"
expect_refused "--checkpoint-dir inside the resumed step" "inside the resumed checkpoint" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --resume "$step" --checkpoint-dir "$step/more"
# A --checkpoint-dir that is a step, or inside one, not being resumed.
expect_refused "--checkpoint-dir that is a step, without --resume" \
  "--checkpoint-dir $ck/step-000002 is checkpoint step .*step-000002 itself: .*name the directory that holds the steps, .*/ck" "$ck" \
  "$train" "${tiny[@]}" --steps 2 --checkpoint-dir "$ck/step-000002"
expect_refused "--checkpoint-dir inside an older step" "--checkpoint-dir $ck/step-000002/sub is inside checkpoint step" "$ck" \
  "$train" "${tiny[@]}" --steps 2 --checkpoint-dir "$ck/step-000002/sub"
expect_refused "reshard --force --out that is a step" "is checkpoint step .*step-000002 itself" "$ck" \
  "$ckpt" reshard "$ck" --ranks 2 --force --out "$ck/step-000002"
expect_refused "export --out onto a rank file" "checkpoint" "$ck" \
  "$ckpt" export "$ck" --out "$step/rank-00000.safetensors"
expect_refused "export --out onto index.json" "checkpoint" "$ck" "$ckpt" export "$step" --out "$step/index.json"
expect_refused "export --out onto latest" "latest" "$ck" "$ckpt" export "$ck" --out "$ck/latest"
expect_refused "export of DIR/latest onto it" "latest" "$ck" "$ckpt" export "$ck/latest" --out "$ck/latest"
expect_refused "export --out through a link" "checkpoint" "$ck" "$ckpt" export "$ck" --out "$dir/link-to-rank-file"
# ... nor into a step other than the one read.
expect_refused "export --out into an older step" "inside checkpoint step .*step-000002" "$ck" \
  "$ckpt" export "$ck" --out "$ck/step-000002/rank-00000.safetensors"
expect_refused "--metrics into an older step, no --checkpoint-dir" "inside checkpoint step .*step-000002" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --resume "$step" --metrics "$ck/step-000002/index.json"
"$ckpt" export "$ck" --out "$dir/export.safetensors" > /dev/null && ok "export elsewhere still works" ||
  fail "export elsewhere"

# reshard --out: never into the step read, over a step, or into another run.
"$train" --model mlp --steps 3 --checkpoint-dir "$dir/mlp" > /dev/null || fail "mlp run"
expect_refused "reshard --out into another model's run" "another model" "$dir/mlp" \
  "$ckpt" reshard "$ck" --ranks 2 --out "$dir/mlp"
"$train" "${tiny[@]}" --steps 2 --checkpoint-dir "$dir/other" > /dev/null || fail "second gpt run"
cp -r "$ck" "$dir/ck-copy"
expect_refused "reshard --out over a step of the same number" "never replaces a step" "$ck" \
  "$ckpt" reshard "$dir/ck-copy" --ranks 2 --out "$ck"
expect_refused "reshard --out holding the step read" "holds the checkpoint read" "$ck" \
  "$ckpt" reshard "$ck" --ranks 2 --out "$ck"
expect_refused "reshard --out inside the step read" "inside the checkpoint read" "$ck" \
  "$ckpt" reshard "$ck" --ranks 2 --out "$step/sub"
mkdir -p "$dir/notes" && echo keep > "$dir/notes/a.txt"
expect_refused "reshard --out into a non-empty directory" "non-empty" "$dir/notes" \
  "$ckpt" reshard "$ck" --ranks 2 --out "$dir/notes"
"$ckpt" reshard "$ck" --ranks 2 --out "$dir/notes" --force > /dev/null && [ -f "$dir/notes/a.txt" ] &&
  ok "reshard --force into a non-empty directory keeps its files" || fail "reshard --force"
"$ckpt" reshard "$ck" --ranks 2 --out "$dir/other" > /dev/null && [ -d "$dir/other/step-000002" ] &&
  ok "reshard into a run of the same model adds its step" || fail "reshard into the same model's run"
# A directory whose name begins the step's path (L beside L7) is no parent of it.
mkdir -p "$dir/L" "$dir/L7" && cp -r "$step" "$dir/L7/"
"$ckpt" reshard "$dir/L7/step-000004" --ranks 3 --out "$dir/L" > /dev/null && [ -d "$dir/L/step-000004" ] &&
  ok "reshard --out L of L7/step-000004" || fail "reshard --out L of L7/step-000004: $("$ckpt" reshard "$dir/L7/step-000004" --ranks 3 --out "$dir/L" 2>&1)"
# One writer at a time: a reshard into a directory a live run holds (here
# waiting for its --metrics FIFO's reader) is refused; the run would save its
# own step over the one written.
cp -r "$ck" "$dir/ahead" && cp -r "$ck" "$dir/live"
"$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$dir/ahead" --resume > /dev/null || fail "lock: the run ahead"
mkfifo "$dir/hold.fifo"
"$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$dir/live" --resume --metrics "$dir/hold.fifo" > /dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q "^pid $holder " "$dir/live/.zrt-run.lock" 2> /dev/null && break; sleep 0.1; done
expect_refused "reshard --out into a directory a run holds" "reshard --out $dir/live is in use by another run \(pid $holder on " \
  "$dir/live" "$ckpt" reshard "$dir/ahead" --ranks 2 --out "$dir/live"
kill -9 "$holder"; wait "$holder" 2> /dev/null
"$ckpt" reshard "$dir/ahead" --ranks 2 --out "$dir/live" > /dev/null && [ -d "$dir/live/step-000006" ] &&
  ok "the same reshard once the run ended" || fail "reshard after the run ended"
# The lock a finished writer left makes no directory non-empty: a reshard
# into a directory that holds only that (its steps removed, or an earlier
# reshard stopped before its step) goes through; a user's file of that name
# is no lock.
mkdir -p "$dir/locked" && cp "$dir/live/.zrt-run.lock" "$dir/locked/"
"$ckpt" reshard "$dir/ahead" --ranks 2 --out "$dir/locked" > /dev/null && [ -d "$dir/locked/step-000006" ] &&
  ok "reshard into a directory holding only a finished run's lock" ||
  fail "reshard into a directory holding only a lock: $("$ckpt" reshard "$dir/ahead" --ranks 2 --out "$dir/locked" 2>&1)"
mkdir -p "$dir/notlock" && echo "my notes" > "$dir/notlock/.zrt-run.lock"
expect_refused "reshard --out holding a user's .zrt-run.lock" "non-empty" "$dir/notlock" \
  "$ckpt" reshard "$dir/ahead" --ranks 2 --out "$dir/notlock"

# Resume semantics.
expect_refused "steps but no --resume" "already holds steps .*--resume" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$ck"
cp -r "$ck" "$dir/nolatest" && rm "$dir/nolatest/latest"
expect_refused "steps but no latest" "no .latest." "$dir/nolatest" \
  "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$dir/nolatest" --resume
# An emptied step directory is not named as the step to resume.
mkdir "$dir/nolatest/step-000009"
expect_refused "an emptied newest step" "no .latest.*--resume $dir/nolatest/step-000004 " \
  "$dir/nolatest" "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$dir/nolatest" --resume
mkdir -p "$dir/emptied/step-000005"
expect_refused "only an emptied step" "none is a checkpoint" "$dir/emptied" \
  "$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$dir/emptied" --resume
expect_refused "--steps below the checkpoint's step" "below the step 4" "$ck" \
  "$train" "${tiny[@]}" --steps 3 --checkpoint-dir "$ck" --resume
expect_refused "--init-from with --resume PATH" "init-from .*would not be read" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --resume "$step" --init-from "$dir/export.safetensors"
expect_refused "--warmup beyond --steps" "warmup 9 is longer than --steps 6" "$ck" \
  "$train" "${tiny[@]}" --steps 6 --warmup 9 --checkpoint-dir "$ck" --resume

# Outputs onto inputs however the name is spelled, and outputs onto each other.
io=$dir/io
mkdir -p "$io"
printf 'a text that the run reads as its data, long enough for sixteen. %.0s' $(seq 30) > "$io/data.txt"
"$train" "${tiny[@]}" --steps 1 --save "$io/init.safetensors" > /dev/null || fail "making --init-from weights"
expect_refused "--metrics onto --data via /dev/.." "is the --data file" "$io" \
  "$train" "${tiny[@]}" --steps 2 --data "$io/data.txt" --metrics "/dev/..$io/data.txt"
expect_refused "--trace onto --init-from via /dev/.." "is the --init-from file" "$io" \
  "$train" "${tiny[@]}" --steps 2 --init-from "$io/init.safetensors" --trace "/dev/..$io/init.safetensors"
expect_refused "--save and --trace on one file" "--save and --trace name the same file" "$io" \
  "$train" "${tiny[@]}" --steps 2 --save "$io/out" --trace "$io/out"
expect_refused "--metrics and --trace on one file" "--metrics and --trace name the same file" "$io" \
  "$train" "${tiny[@]}" --steps 2 --metrics "$io/out" --trace "$io/out"
: > "$io/m.json" && ln "$io/m.json" "$io/hard.json"
expect_refused "--metrics and --trace on hard links of one file" \
  "--metrics and --trace name the same file .*m.json \(.*hard.json is a hard link of it\)" "$io" \
  "$train" "${tiny[@]}" --steps 2 --metrics "$io/m.json" --trace "$io/hard.json"
# Several ranks write T.rank-R.json each: every one is checked as an output.
cp "$io/data.txt" "$io/t.rank-1.json"
expect_refused "rank 1's trace onto --data" "--trace \(rank 1's\) .*t.rank-1.json is the --data file" "$io" \
  "$train" "${tiny[@]}" --steps 2 --ranks 2 --trace "$io/t.json" --data "$io/t.rank-1.json"
expect_refused "--save onto rank 1's trace" "--save and --trace \(rank 1's\) name the same file" "$io" \
  "$train" "${tiny[@]}" --steps 2 --ranks 2 --trace "$io/c.json" --save "$io/c.rank-1.json"
ln -s "$io/l.rank-1.json" "$io/l.rank-0.json"
expect_refused "rank 0's trace a link onto rank 1's" "--trace \(rank 0's\) and --trace \(rank 1's\) name the same file" \
  "$io" "$train" "${tiny[@]}" --steps 2 --ranks 2 --trace "$io/l.json"
# A resumed run rewrites its metrics through a temporary: never an existing
# file such as a --data file named like one (Note [Partial files]).
cp "$io/data.txt" "$io/m.tmp"
"$train" "${tiny[@]}" --steps 2 --data "$io/m.tmp" --metrics "$io/m" --checkpoint-dir "$io/ck" > /dev/null ||
  fail "metrics temporary: first run"
"$train" "${tiny[@]}" --steps 4 --data "$io/m.tmp" --metrics "$io/m" --checkpoint-dir "$io/ck" --resume > /dev/null ||
  fail "metrics temporary: resumed run"
cmp -s "$io/m.tmp" "$io/data.txt" && ok "a resumed run's metrics rewrite leaves a --data file m.tmp as it was" ||
  fail "the --data file m.tmp changed when --metrics m was rewritten"

# Past a file-size limit every write fails with a message and exit 1, not
# SIGXFSZ (rc 153), and leaves no partial file behind.
fsz=$dir/fsz
mkdir -p "$fsz"
expect_small_files_refused() {  # NAME CMD...
  local name=$1
  shift
  local out rc
  out=$(ulimit -f 4; "$@" 2>&1)
  rc=$?
  local leftovers
  leftovers=$(cd "$fsz" && find . -name '*.zrt-partial-*' -o -name '*.tmp' | tr '\n' ' ')
  if [ $rc -eq 1 ] && grep -q "File too large" <<<"$out" && [ -z "$leftovers" ] &&
     ! shows_source "$name under ulimit -f" "$out"; then ok "$name under ulimit -f: exit 1, nothing partial left"
  else fail "$name under ulimit -f: exit $rc, leftovers '$leftovers': $(tail -n1 <<<"$out")"; fi
}
expect_small_files_refused "--save" "$train" --steps 1 --save "$fsz/w.safetensors"
expect_small_files_refused "a checkpoint" "$train" --steps 1 --checkpoint-dir "$fsz/ck"
expect_small_files_refused "export" "$ckpt" export "$ck" --out "$fsz/e.safetensors"
expect_small_files_refused "reshard" "$ckpt" reshard "$ck" --ranks 2 --out "$fsz/re"
expect_small_files_refused "--trace" "$train" --steps 1 --trace "$fsz/t.json"
# (the trace is streamed, so the steps written before the limit stay: Note [Streamed trace])

# A --data file changed under its path since the save: the resume says so.
"$train" "${tiny[@]}" --steps 2 --data "$io/data.txt" --checkpoint-dir "$io/dck" > /dev/null || fail "data change: first run"
printf 'other words now, in a file that keeps its name but not its text. %.0s' $(seq 30) > "$io/data.txt"
out=$("$train" "${tiny[@]}" --steps 3 --data "$io/data.txt" --checkpoint-dir "$io/dck" --resume 2>&1)
grep -q "warning: these flags differ from the checkpoint's run: --data (contents)" <<<"$out" &&
  ok "a resume names a --data file changed since the save" || fail "data changed under its path: $out"
# ... past its first MiB, at the same size.
python3 -c "import sys; open(sys.argv[1], 'w').write('some words of a long text. ' * 80000)" "$io/big.txt"
"$train" "${tiny[@]}" --steps 2 --data "$io/big.txt" --checkpoint-dir "$io/bck" > /dev/null || fail "big data: first run"
python3 -c "import sys; t = open(sys.argv[1]).read(); open(sys.argv[1], 'w').write(t[:1500000] + 'S' + t[1500001:])" "$io/big.txt"
out=$("$train" "${tiny[@]}" --steps 3 --data "$io/big.txt" --checkpoint-dir "$io/bck" --resume 2>&1)
grep -q "warning: these flags differ from the checkpoint's run: --data (contents)" <<<"$out" &&
  ok "a resume names a --data file changed past its first MiB" || fail "data changed past its first MiB: $out"

# A run resumed for more steps differs in --steps alone: its checkpoint keeps
# --warmup and --block-size as given (5, and 0 for the preset's), not as
# resolved from --steps 2 and --seq-len 80, as checkpoints always have.
long=(--n-layer 1 --n-embd 16 --n-head 2 --seq-len 80 --batch-size 4 --checkpoint-dir "$io/sck")
"$train" "${long[@]}" --steps 2 > /dev/null || fail "more steps: first run"
out=$("$train" "${long[@]}" --steps 3 --resume 2>&1)
index=$io/sck/step-000002/index.json
# The warmup it ran, 5 cut to --steps 2, is stored too: this run's, cut to 3,
# is another, and the warning names the flag that keeps it.
if grep -qx "zrt-train: warning: these flags differ from the checkpoint's run: --steps 2 -> 3" <<<"$out" &&
   grep -q "warmed the learning rate up over 2 step(s), this run over 3 .*give --warmup 2 to keep" <<<"$out" &&
   grep -q '"block_size": 0,' "$index" && grep -q '"warmup": 5,' "$index"; then
  ok "a resume for more steps names --steps alone and the warmup it changes; --warmup and --block-size stored as given"
else fail "more steps: $(grep warning <<<"$out"), $(grep -E '"(block_size|warmup)"' "$index" | tr -d '\n')"; fi

# Resumed for fewer steps than the checkpoint's warmup: --warmup 5 would be
# refused as longer than --steps 4, so the warning advises no such flag.
"$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$io/wck" --checkpoint-every 2 > /dev/null || fail "short resume: first run"
out=$("$train" "${tiny[@]}" --steps 4 --checkpoint-dir "$io/wck" --resume "$io/wck/step-000002" 2>&1)
if grep -q "warmed the learning rate up over 5 step(s), this run over 4 " <<<"$out" && ! grep -q "give --warmup" <<<"$out"; then
  ok "a resume shorter than the checkpoint's warmup advises no refused --warmup"
else fail "short resume: $(grep warning <<<"$out")"; fi

# A changed learning rate names both rates as a person writes them: the
# default --min-lr of --lr 0.003 is 0.003 / 10, shown 0.0003.
"$train" "${tiny[@]}" --steps 2 --lr 0.003 --checkpoint-dir "$io/lck" > /dev/null || fail "lr change: first run"
out=$("$train" "${tiny[@]}" --steps 3 --lr 0.001 --checkpoint-dir "$io/lck" --resume 2>&1)
grep -q "these flags differ from the checkpoint's run: .*--lr 0.003 -> 0.001, --min-lr 0.0003 -> 0.0001" <<<"$out" &&
  ok "a changed --lr shows the rates in few digits" || fail "lr change: $(grep warning <<<"$out")"

# A dimension spelt out at its preset's value is no difference (the
# checkpoint stores 0 for "the preset's"); a longer --seq-len, which raises
# the block size, names both flags in the error of the shapes that differ.
out=$("$train" "${long[@]}" --steps 4 --resume --vocab-size 256 --block-size 80 2>&1)
grep -qx "zrt-train: warning: these flags differ from the checkpoint's run: --steps 3 -> 4" <<<"$out" &&
  ok "preset values spelt out are no difference" || fail "preset values spelt out: $(grep warning <<<"$out")"
out=$("$train" "${long[@]/80/96}" --steps 5 --resume 2>&1)
grep -q "wpe.weight was saved as \[80, 16\] but the model has \[96, 16\] (these flags differ from the checkpoint's run: --block-size --seq-len)" <<<"$out" &&
  ok "a longer --seq-len names --block-size in the shape error" || fail "longer --seq-len: $(tail -n1 <<<"$out")"
# A parameter missing on either side names the model flags too, --model alone when it differs.
expect_refused "a resume with more layers names --n-layer" \
  "has no parameter h\.1\..* \(these flags differ from the checkpoint's run: --n-layer\)$" "$ck" \
  "$train" --n-layer 2 --n-embd 16 --n-head 2 --seq-len 16 --batch-size 4 --steps 6 --checkpoint-dir "$ck" --resume
expect_refused "a resume as another model names --model" \
  "\(these flags differ from the checkpoint's run: --model\)$" "$ck" \
  "$train" --model mlp --steps 6 --checkpoint-dir "$ck" --resume

# Two runs in one directory: the second names the first.
"$train" "${tiny[@]}" --steps 100000 --log-every 100000 --checkpoint-dir "$dir/busy" > /dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do [ -s "$dir/busy/.zrt-run.lock" ] && break; sleep 0.1; done
out=$("$train" "${tiny[@]}" --steps 2 --checkpoint-dir "$dir/busy" --resume 2>&1)
if [ $? -ne 0 ] && grep -qE "in use by another run \(pid $holder on .*, started [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} UTC\)" <<<"$out" &&
   ! shows_source "second run in a busy directory" "$out"; then ok "second run names the first: $(grep -m1 error <<<"$out" | cut -c1-150)"
else fail "second run in a busy directory: $out"; fi
kill -9 $holder; wait $holder 2>/dev/null  # a crash: the kernel drops the lock
"$train" "${tiny[@]}" --steps 2 --checkpoint-dir "$dir/busy" --resume > /dev/null 2>&1 &&
  ok "the lock goes with its run" || fail "the directory stayed locked after its run ended"

# Rollback: resume step 4 of a run that reached 8, keep the 2 newest; the
# abandoned 6 and 8 are set aside, not pruned over the new ones, not lost.
rb=$dir/rb
"$train" "${tiny[@]}" --steps 8 --checkpoint-dir "$rb" --checkpoint-every 2 --metrics "$dir/rb.jsonl" > /dev/null ||
  fail "rollback: first run"
# A user's directory named like a newer step (no index) is no checkpoint: left alone.
mkdir "$rb/step-000099" && echo mine > "$rb/step-000099/notes.txt"
"$train" "${tiny[@]}" --steps 10 --checkpoint-dir "$rb" --checkpoint-every 2 --keep-last 2 \
  --resume "$rb/step-000004" --metrics "$dir/rb.jsonl" > "$dir/rb.txt" 2>&1 || fail "rollback: resumed run"
kept=$(cd "$rb" && ls -d step-* | tr '\n' ' ')
aside=$(cd "$rb" && ls -d abandoned-from-4-*/step-* 2>/dev/null | sed 's|.*/||' | tr '\n' ' ')
if [ "$kept" = "step-000008 step-000010 step-000099 " ] && [ "$aside" = "step-000006 step-000008 " ] &&
   [ -f "$rb/step-000099/notes.txt" ] &&
   [ "$(head -n1 "$rb/latest")" = "step-000010" ]; then ok "rollback keeps the new steps and sets the abandoned aside"
else fail "rollback: kept '$kept', aside '$aside', latest $(head -n1 "$rb/latest")"; fi
rm -r "$rb/step-000099"
steps=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" "$dir/rb.jsonl")
[ "$steps" = "0 1 2 3 4 5 6 7 8 9" ] && ok "the resumed metrics file holds each step once" ||
  fail "resumed metrics steps: $steps"
# A last line torn by the stop (no newline) goes too, so the file stays JSON lines.
tm=$dir/tm
"$train" "${tiny[@]}" --steps 4 --checkpoint-dir "$tm" --checkpoint-every 2 --metrics "$dir/tm.jsonl" > /dev/null ||
  fail "torn metrics: first run"
head -c -40 "$dir/tm.jsonl" > "$dir/tm.cut" && cp "$dir/tm.cut" "$dir/tm.jsonl"
"$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$tm" --resume --metrics "$dir/tm.jsonl" > /dev/null ||
  fail "torn metrics: resumed run"
steps=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" "$dir/tm.jsonl" 2>&1)
[ "$steps" = "0 1 2 4 5" ] && ok "a torn last metrics line (step 3) is dropped at resume" || fail "torn metrics line: $steps"

# Resuming step 8 of the abandoned trajectory: the directory's own step 8
# (of the other trajectory) is set aside too, with its 10, so that the steps
# saved next sit beside their own parents only.
"$train" "${tiny[@]}" --steps 12 --checkpoint-dir "$rb" --checkpoint-every 2 \
  --resume "$(ls -d "$rb"/abandoned-from-4-*)/step-000008" > /dev/null 2>&1 || fail "resume of an abandoned step"
kept=$(cd "$rb" && ls -d step-* | tr '\n' ' ')
aside=$(cd "$rb" && ls -d abandoned-from-8-*/step-* 2>/dev/null | sed 's|.*/||' | tr '\n' ' ')
if [ "$aside" = "step-000008 step-000010 " ] && [ "$kept" = "step-000010 step-000012 " ]; then
  ok "resuming an abandoned step sets the directory's step of that number aside"
else fail "resume of an abandoned step: kept '$kept', aside '$aside'"; fi

# A rollback whose aside directory's name is taken (one to the same step in
# the same second, a requeued job): it sets its steps aside in another.
rr=$dir/rr
"$train" "${tiny[@]}" --steps 4 --checkpoint-dir "$rr" --checkpoint-every 2 > /dev/null || fail "taken: first run"
now=$(date +%s)
for t in $(seq "$now" $((now + 60))); do mkdir -p "$rr/abandoned-from-2-$t/step-000004" && : > "$rr/abandoned-from-2-$t/step-000004/x"; done
"$train" "${tiny[@]}" --steps 4 --checkpoint-dir "$rr" --checkpoint-every 2 --resume "$rr/step-000002" \
  > "$dir/rr.txt" 2>&1 || fail "rollback into a taken aside name: $(cat "$dir/rr.txt")"
moved=$(cd "$rr" && ls abandoned-from-2-*/step-000004/index.json 2>/dev/null | wc -l)
[ "$moved" = 1 ] && [ -f "$rr/step-000004/index.json" ] &&
  ok "a rollback whose aside name is taken sets its step aside in another" ||
  fail "rollback into a taken aside name: $moved steps set aside"

# A resume refused for its --steps sets nothing aside; one that trains nothing
# abandons nothing.
st=$dir/st
"$train" "${tiny[@]}" --steps 4 --checkpoint-dir "$st" --checkpoint-every 2 --metrics "$dir/st.jsonl" > /dev/null ||
  fail "steps: first run"
expect_refused "--steps below the resumed step" "--steps 1 is below the step 2" "$st" \
  "$train" "${tiny[@]}" --steps 1 --checkpoint-dir "$st" --resume "$st/step-000002"
out=$("$train" "${tiny[@]}" --steps 1 --checkpoint-dir "$st" --resume "$st/step-000002" 2>&1)
grep -qE "resumed from|warning" <<<"$out" && fail "--steps below the resumed step still said: $out" ||
  ok "--steps below the resumed step says nothing of a resume before its error"
before=$(digest "$st")
lines=$(wc -l < "$dir/st.jsonl")
"$train" "${tiny[@]}" --steps 2 --checkpoint-dir "$st" --resume "$st/step-000002" --metrics "$dir/st.jsonl" > /dev/null 2>&1 &&
  [ "$(digest "$st")" = "$before" ] && [ "$(wc -l < "$dir/st.jsonl")" = "$lines" ] &&
  ok "a resume that trains nothing sets no step aside and keeps the metrics" ||
  fail "a resume with nothing to train changed $st: $(ls "$st")"
# ... but drops the lines of steps after the newest checkpoint, which a run
# killed after its last save wrote: no checkpoint or weights hold them.
sed -e 's/"step":3,/"step":4,/' -e 's/"step":3}/"step":4}/' <(tail -n1 "$dir/st.jsonl") >> "$dir/st.jsonl"
grep -q '"step":4' "$dir/st.jsonl" || fail "metrics of a killed run: the test's line for step 4 was not made"
"$train" "${tiny[@]}" --steps 4 --checkpoint-dir "$st" --resume --metrics "$dir/st.jsonl" > /dev/null 2>&1 &&
  [ "$(wc -l < "$dir/st.jsonl")" = "$lines" ] && ! grep -q '"step":4' "$dir/st.jsonl" &&
  ok "a resume that trains nothing drops the metrics of steps no checkpoint holds" ||
  fail "a resume that trains nothing kept steps past its newest checkpoint: $(cut -c1-20 "$dir/st.jsonl")"

# The user's files named as a run names its own: refused, not overwritten.
sq=$dir/squat
mkdir "$sq"
"$train" "${tiny[@]}" --steps 1 --save "$dir/w.safetensors" > /dev/null || fail "squat: --save"
cp "$dir/w.safetensors" "$sq/step-000001"
expect_refused "a weights file named like a step, read by --init-from" "step-000001, which is not a checkpoint step" "$sq" \
  "$train" "${tiny[@]}" --steps 1 --init-from "$sq/step-000001" --checkpoint-dir "$sq"
rm "$sq/step-000001"
echo precious > "$sq/.zrt-run.lock"
expect_refused "a user's file named as the run lock" "not a zrt-train run lock" "$sq" \
  "$train" "${tiny[@]}" --steps 1 --checkpoint-dir "$sq"
[ "$(cat "$sq/.zrt-run.lock")" = precious ] || fail "the user's .zrt-run.lock was overwritten"
rm "$sq/.zrt-run.lock"
mkfifo "$sq/.zrt-run.lock"
expect_refused "a FIFO named as the run lock, not opened" "not a zrt-train run lock" "$sq" \
  timeout 60 "$train" "${tiny[@]}" --steps 1 --checkpoint-dir "$sq"
rm "$sq/.zrt-run.lock"
# A copy of a step under another name (step-4) is the user's: not a step to
# prune or set aside.
cp -r "$st/step-000004" "$st/step-4"
"$train" "${tiny[@]}" --steps 6 --checkpoint-dir "$st" --checkpoint-every 1 --keep-last 1 --resume \
  > "$dir/st.txt" 2>&1 && [ -f "$st/step-4/index.json" ] && [ "$(cd "$st" && ls -d step-0*)" = step-000006 ] &&
  ok "a step copied as step-4 is left alone by --keep-last" || fail "step-4 beside --keep-last: $(tail -n2 "$dir/st.txt")"

[ $failures -eq 0 ] && echo "all cases passed" || echo "$failures case(s) failed"
exit $((failures > 0))
