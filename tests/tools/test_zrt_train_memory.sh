#!/usr/bin/env bash
# zrt-train's memory flags: every --metrics line carries the step's allocator
# peak (mem_peak, bytes); --activation-checkpointing blocks and every:2 train
# the same losses as none on two local ranks, with a lower mem_peak; so does
# --offload-optimizer disk:DIR and host; --plan predicts the peak.
# usage: test_zrt_train_memory.sh ZRT-TRAIN PYTHON
set -u
train=$1 python=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for mode in none blocks every:2; do
  "$train" --ranks 2 --threads 1 --n-layer 4 --batch-size 16 --steps 3 --activation-checkpointing "$mode" \
    --metrics "$dir/$mode.jsonl" > "$dir/$mode.out" 2>&1 || fail "--activation-checkpointing $mode: $(cat "$dir/$mode.out")"
done
"$python" - "$dir" <<'PY' || fail "metrics"
import json, sys
runs = {m: [json.loads(l) for l in open(f"{sys.argv[1]}/{m}.jsonl")] for m in ("none", "blocks", "every:2")}
for mode, rows in runs.items():
    assert len(rows) == 3 and all(r["mem_peak"] >= r["mem_allocated"] > 0 for r in rows), (mode, rows)
    assert [r["loss"] for r in rows] == [r["loss"] for r in runs["none"]], (mode, rows)
peak = {m: runs[m][-1]["mem_peak"] for m in runs}
assert peak["blocks"] < peak["every:2"] < peak["none"], peak
print("ok   same losses; last step's mem_peak " + ", ".join(f"{m} {p} B" for m, p in peak.items()))
PY
grep -q "(peak " "$dir/blocks.out" || fail "the progress line has no peak: $(cat "$dir/blocks.out")"

# --plan: the peak it prints for each rank is the mem_peak the same run
# measures (compute on the calling thread, Note [Memory plan]), within 5%;
# --fit lists settings for a generous budget and none (exit 3) for a tiny one.
run=(--preset small --ranks 2 --threads 1 --batch-size 8 --seq-len 128 --cpu-streams none --activation-checkpointing every:2)
"$train" "${run[@]}" --plan > "$dir/plan.out" 2>&1 || fail "--plan: $(cat "$dir/plan.out")"
"$train" "${run[@]}" --steps 2 --metrics "$dir/planned.jsonl" > "$dir/planned.out" 2>&1 || fail "planned run: $(cat "$dir/planned.out")"
"$python" - "$dir" <<'PY' || fail "plan against the run: $(cat "$dir/plan.out")"
import json, sys
d = sys.argv[1]
row = [l.split() for l in open(f"{d}/plan.out") if l.startswith("0-1 ")]
assert len(row) == 1, "no row for ranks 0-1"
planned = float(row[0][1]) * 2**20
measured = max(json.loads(l)["mem_peak"] for l in open(f"{d}/planned.jsonl"))
assert abs(planned - measured) <= 0.05 * measured, (planned, measured)
print(f"ok   --plan: {planned / 2**20:.1f} MiB planned, {measured / 2**20:.1f} MiB measured")
PY
# The host columns hold the data set (Note [Host memory in the plan]): a
# text file of 1 MiB is 4 MiB of tokens, from its size alone.
"$python" -c "open('$dir/data.txt', 'w').write('a' * 2**20)"
"$train" "${run[@]}" --data "$dir/data.txt" --plan > "$dir/plan_data.out" 2>&1 || fail "--plan --data: $(cat "$dir/plan_data.out")"
data_col=$(awk '$1 == "0-1" { print $15 }' "$dir/plan_data.out")
[ "$data_col" = "4.0" ] || fail "--plan --data: data column '$data_col', not 4.0 MiB: $(cat "$dir/plan_data.out")"
echo "ok   --plan --data: the host columns hold 4.0 MiB of tokens"
"$train" "${run[@]}" --plan --fit 1GiB > "$dir/fit.out" 2>&1 || fail "--fit 1GiB: $(cat "$dir/fit.out")"
grep -q -- "--strategy no-shard --prefetch 0 --activation-checkpointing none --offload-optimizer none" "$dir/fit.out" ||
  fail "--fit 1GiB does not list the cheapest setting: $(cat "$dir/fit.out")"
# The sweep tries every strategy with the given hybrid group size kept for
# hybrid alone (the others read none and refuse one); its lines paste: a
# hybrid line names its group size, the others none.
"$train" --model mlp --ranks 4 --strategy hybrid --zero3-size 2 --plan --fit 1GiB > "$dir/hfit.out" 2>&1 &&
  grep -q -- "--strategy hybrid" "$dir/hfit.out" && grep -q -- "--strategy no-shard" "$dir/hfit.out" ||
  fail "--fit with --strategy hybrid --zero3-size 2: $(cat "$dir/hfit.out")"
out=$(cat "$dir/hfit.out")
grep -q -- "--strategy hybrid --zero3-size 2 --prefetch" <<<"$out" || fail "--fit's hybrid lines lack --zero3-size: $out"
grep -q -- "--strategy full --zero3-size" <<<"$out" && fail "--fit's full lines name --zero3-size: $out"
grep -q "replace the command's --strategy, --zero3-size" <<<"$out" || fail "--fit does not say what its lines replace: $out"
line=$(grep -m1 -o -- "--strategy hybrid --zero3-size 2 --prefetch .*" <<<"$out")
# shellcheck disable=SC2086
"$train" --model mlp --plan --ranks 4 $line > /dev/null 2>&1 || fail "a pasted --fit line is refused: $line"
echo "ok   --fit lines name --zero3-size where the strategy reads it, and paste"
"$train" "${run[@]}" --plan --fit 1MiB > "$dir/nofit.out" 2>&1; [ $? -eq 3 ] || fail "--fit 1MiB: not exit 3: $(cat "$dir/nofit.out")"
grep -q "0 setting(s) fit" "$dir/nofit.out" || fail "--fit 1MiB: $(cat "$dir/nofit.out")"
# SIGTERM ends a plan however long it would take (--plan installs no stop
# handler: there is no step to finish or checkpoint to write).
"$train" --plan --n-layer 65536 > "$dir/long_plan.out" 2>&1 &
long_plan=$!
sleep 1
kill -TERM "$long_plan"
for _ in $(seq 50); do kill -0 "$long_plan" 2> /dev/null || break; sleep 0.1; done
kill -0 "$long_plan" 2> /dev/null && { kill -9 "$long_plan"; fail "--plan still running 5 s after SIGTERM"; }
wait "$long_plan"; rc=$?
[ "$rc" -eq 143 ] || fail "--plan after SIGTERM: exit $rc, not 143: $(cat "$dir/long_plan.out")"
echo "ok   SIGTERM ends a long --plan"
out=$("$train" --fit 1GiB 2>&1) && fail "--fit without --plan was accepted"
grep -q "read by --plan only" <<<"$out" || fail "--fit without --plan: $out"
out=$("$train" --plan --fit 12parsecs 2>&1) && fail "a bad --fit was accepted"
grep -q "unknown unit 'parsecs'" <<<"$out" || fail "bad --fit: $out"
echo "ok   --fit lists what fits, and nothing for 1 MiB"

# --offload-optimizer disk:DIR and host: the same losses as in memory, a
# lower mem_peak (host: the master and moments leave the caching allocator,
# as they leave a GPU); a missing DIR is refused; host on cpu says it saves
# no memory.
mkdir "$dir/scratch"
"$train" --ranks 2 --threads 1 --n-layer 4 --batch-size 16 --steps 3 --offload-optimizer "disk:$dir/scratch" \
  --metrics "$dir/disk.jsonl" > "$dir/disk.out" 2>&1 || fail "--offload-optimizer disk: $(cat "$dir/disk.out")"
"$train" --ranks 2 --threads 1 --n-layer 4 --batch-size 16 --steps 3 --offload-optimizer host \
  --metrics "$dir/host.jsonl" > "$dir/host.out" 2>&1 || fail "--offload-optimizer host: $(cat "$dir/host.out")"
grep -q "saves no memory on --device cpu" "$dir/host.out" || fail "host on cpu says nothing: $(cat "$dir/host.out")"
# --offload-grads acts between micro-batches: alone in a step it says so.
out=$("$train" --plan --offload-grads 2>&1) || fail "--plan --offload-grads: $out"
grep -q "with --micro-batches 1 there are none to keep" <<<"$out" || fail "--offload-grads on 1 micro-batch says nothing: $out"
out=$("$train" --plan --offload-grads --micro-batches 2 2>&1) || fail "--plan --offload-grads --micro-batches 2: $out"
grep -q "none to keep" <<<"$out" && fail "--offload-grads on 2 micro-batches: $out"
out=$("$train" --plan --offload-grads --head-unit 2>&1) || fail "--plan --offload-grads --head-unit: $out"
grep -q "none to keep" <<<"$out" && fail "--offload-grads with a tie across units: $out"
echo "ok   --offload-grads on one micro-batch says it changes nothing"
# The plan's header names every setting that moves memory.
out=$("$train" --plan --optimizer-state-dtype bf16 --offload-grads --micro-batches 2 --gather-dtype int8 \
  --reduce-dtype bf16 --memory-limit 1GiB 2>&1) || fail "--plan with memory settings: $out"
for want in "--optimizer-state-dtype bf16" "--offload-grads" "--gather-dtype int8" "--reduce-dtype bf16" "--memory-limit 1024MiB"; do
  grep -m1 "^zrt-train --plan:" <<<"$out" | grep -q -- "$want" || fail "the plan's header lacks $want: $out"
done
echo "ok   the plan's header names the memory settings"
# The header says what a preset became; into one file with stderr it comes
# before a later error (stdout is line-buffered).
"$train" --dtype fp16 --lr 5 --steps 10 --n-layer 3 --n-embd 48 --n-head 3 --batch-size 2 --seq-len 16 > "$dir/order.txt" 2>&1 &&
  fail "a diverging run succeeded: $(cat "$dir/order.txt")"
header=$(grep -n "^zrt-train: gpt/tiny (3 layers, 48 wide, 3 heads, vocab 256), 1 rank(s)" "$dir/order.txt" | cut -d: -f1)
error=$(grep -n "^zrt-train: error: the run diverged" "$dir/order.txt" | cut -d: -f1)
[ -n "$header" ] && [ -n "$error" ] && [ "$header" -lt "$error" ] ||
  fail "the header (line ${header:-none}) before the error (line ${error:-none}): $(cat "$dir/order.txt")"
echo "ok   the header names the dimensions and comes before a later error"
"$python" - "$dir" <<'PY' || fail "offload metrics"
import json, sys
none, disk, host = ([json.loads(l) for l in open(f"{sys.argv[1]}/{m}.jsonl")] for m in ("none", "disk", "host"))
for name, run in (("disk", disk), ("host", host)):
    assert [r["loss"] for r in run] == [r["loss"] for r in none], (name, run, none)
    assert run[-1]["mem_peak"] < none[-1]["mem_peak"], (name, run[-1], none[-1])
    print(f"ok   --offload-optimizer {name}: same losses; mem_peak {run[-1]['mem_peak']} B against {none[-1]['mem_peak']} B")
PY

# --optimizer-state-dtype bf16: m and v at 2 bytes each, so a lower mem_peak
# (by about 4 of 16 bytes per parameter), and losses near fp32 state's.
"$train" --ranks 2 --threads 1 --n-layer 4 --batch-size 16 --steps 3 --optimizer-state-dtype bf16 \
  --metrics "$dir/bf16.jsonl" > "$dir/bf16.out" 2>&1 || fail "--optimizer-state-dtype bf16: $(cat "$dir/bf16.out")"
"$python" - "$dir" <<'PY' || fail "bf16 optimizer state metrics"
import json, sys
none, bf16 = ([json.loads(l) for l in open(f"{sys.argv[1]}/{m}.jsonl")] for m in ("none", "bf16"))
assert bf16[-1]["mem_peak"] < none[-1]["mem_peak"], (bf16[-1], none[-1])
for a, b in zip(bf16, none):
    assert abs(a["loss"] - b["loss"]) <= 1e-2 * b["loss"], (a, b)
print(f"ok   --optimizer-state-dtype bf16: losses within 1%; mem_peak {bf16[-1]['mem_peak']} B against {none[-1]['mem_peak']} B")
PY
out=$("$train" --optimizer-state-dtype fp16 --steps 1 2>&1) && fail "--optimizer-state-dtype fp16 was accepted"
grep -q "optimizer-state-dtype" <<<"$out" || fail "bad --optimizer-state-dtype message: $out"
out=$("$train" --steps 1 --offload-optimizer "disk:$dir/missing" 2>&1) && fail "a missing offload directory was accepted"
grep -q "directory $dir/missing does not exist" <<<"$out" || fail "missing directory message: $out"
echo "ok   offload directory and host checks"

# --memory-limit makes a CPU rank a GPU of that size (Note [Memory limit]):
# a model whose whole state (fp32 master, gradients, m and v) exceeds the
# limit is refused, before its first step, with the limit named under the
# default settings, and trains
# within it under the cheapest setting --plan --fit lists, with the peak the
# plan gives it and the losses of the same setting without a limit.
limit=32MiB
big=(--preset small --n-embd 256 --n-layer 4 --ranks 2 --threads 1 --batch-size 4 --seq-len 32 --cpu-streams none --steps 3)
"$train" "${big[@]}" --plan > "$dir/big_plan.out" 2>&1 || fail "big --plan: $(cat "$dir/big_plan.out")"
"$train" "${big[@]}" --memory-limit $limit --plan --fit $limit > "$dir/big_fit.out" 2>&1 ||
  fail "--fit $limit: $(cat "$dir/big_fit.out")"
# The run's own plan refuses it before the first step (it failed at it).
"$train" "${big[@]}" --memory-limit $limit > "$dir/oom.out" 2>&1 && fail "the default settings trained within $limit"
grep -q "this run does not fit in --memory-limit 32.0 MiB: its plan reserves 52.0 MiB on rank 0 (the same flags with --plan --fit" "$dir/oom.out" &&
  ! grep -q "^step" "$dir/oom.out" || fail "out of memory under --memory-limit: $(cat "$dir/oom.out")"
grep -qE '\.(cpp|h):[0-9]' "$dir/oom.out" && fail "the out-of-memory error shows zrt's source: $(cat "$dir/oom.out")"
read -r -a fitting < <(grep -m1 -E "^ +[0-9.]+ +[0-9.]+ +--strategy" "$dir/big_fit.out" | sed 's/^ *[0-9.]* *[0-9.]* *//; s|disk:DIR|disk:'"$dir/scratch"'|')
[ ${#fitting[@]} -gt 0 ] || fail "--fit $limit lists nothing: $(cat "$dir/big_fit.out")"
"$train" "${big[@]}" "${fitting[@]}" --plan > "$dir/fit_plan.out" 2>&1 || fail "plan of ${fitting[*]}"
"$train" "${big[@]}" "${fitting[@]}" --memory-limit $limit --metrics "$dir/limited.jsonl" > "$dir/limited.out" 2>&1 ||
  fail "${fitting[*]} under --memory-limit $limit: $(cat "$dir/limited.out")"
"$train" "${big[@]}" "${fitting[@]}" --metrics "$dir/unlimited.jsonl" > "$dir/unlimited.out" 2>&1 ||
  fail "${fitting[*]}: $(cat "$dir/unlimited.out")"
"$python" - "$dir" "$limit" "${fitting[*]}" <<'PY' || fail "--memory-limit"
import json, sys
d, limit, setting = sys.argv[1], int(sys.argv[2].removesuffix("MiB")) * 2**20, sys.argv[3]
def row(name):
    return [l.split() for l in open(f"{d}/{name}") if l.startswith("0-1 ")][0]
whole = 2 * float(row("big_plan.out")[4]) * 2**20 * 16 / 12  # master+m,v of 2 ranks, plus gradients
assert whole > limit, f"the whole state ({whole:.0f} B) fits the limit: not a test of it"
limited = [json.loads(l) for l in open(f"{d}/limited.jsonl")]
unlimited = [json.loads(l) for l in open(f"{d}/unlimited.jsonl")]
assert [r["loss"] for r in limited] == [r["loss"] for r in unlimited], (limited, unlimited)
measured = max(r["mem_peak"] for r in limited)
planned = float(row("fit_plan.out")[1]) * 2**20
assert measured <= limit, (measured, limit)
assert abs(planned - measured) <= 0.05 * measured, (planned, measured)
print(f"ok   --memory-limit {limit >> 20} MiB, whole state {whole / 2**20:.1f} MiB: {setting} trains, "
      f"peak {measured / 2**20:.1f} MiB measured, {planned / 2**20:.1f} MiB planned")
PY

# --fit-host: each rank's host memory is planned too (Note [Host memory in
# the plan]). With --dtype bf16 under --memory-limit 32MiB only
# --offload-optimizer host fits (disk keeps the fp32 master on the device);
# a host budget of 30 MiB holds its bf16 optimizer state but not its fp32
# state, so every setting listed, and the cheapest first, is spelled with
# --optimizer-state-dtype bf16 (Note [Settings that fit]), and that setting
# trains within the limit.
bf=(--preset small --n-embd 256 --n-layer 4 --ranks 2 --threads 1 --batch-size 4 --seq-len 32 --cpu-streams none --dtype bf16 --steps 3)
"$train" "${bf[@]}" --memory-limit $limit --plan --fit $limit > "$dir/bf_fp32.out" 2>&1 || fail "--fit $limit, bf16: $(cat "$dir/bf_fp32.out")"
grep -q -- "--optimizer-state-dtype bf16" "$dir/bf_fp32.out" && fail "bf16 state listed where fp32 state fits: $(cat "$dir/bf_fp32.out")"
grep -qE -- "^ +[0-9.]+ +[1-9][0-9.]* +--strategy .*--offload-optimizer host$" "$dir/bf_fp32.out" ||
  fail "no fp32-state host setting with its host memory: $(cat "$dir/bf_fp32.out")"
"$train" "${bf[@]}" --memory-limit $limit --plan --fit $limit --fit-host 30MiB > "$dir/bf_fit.out" 2>&1 ||
  fail "--fit $limit --fit-host 30MiB: $(cat "$dir/bf_fit.out")"
listed=$(grep -cE "^ +[0-9.]+ +[0-9.]+ +--strategy" "$dir/bf_fit.out")
[ "$listed" -gt 0 ] && [ "$listed" -eq "$(grep -cE -- "--optimizer-state-dtype bf16$" "$dir/bf_fit.out")" ] ||
  fail "--fit-host 30MiB lists other than bf16 state: $(cat "$dir/bf_fit.out")"
read -r -a fitting < <(grep -m1 -E "^ +[0-9.]+ +[0-9.]+ +--strategy" "$dir/bf_fit.out" | sed 's/^ *[0-9.]* *[0-9.]* *//')
[[ "${fitting[*]}" == *"--activation-checkpointing none --offload-optimizer host --optimizer-state-dtype bf16" ]] ||
  fail "the cheapest setting under --fit-host 30MiB: ${fitting[*]}"
"$train" "${bf[@]}" "${fitting[@]}" --memory-limit $limit --metrics "$dir/bf_limited.jsonl" > "$dir/bf_limited.out" 2>&1 ||
  fail "${fitting[*]} under --memory-limit $limit: $(cat "$dir/bf_limited.out")"
"$python" - "$dir" "$limit" <<'PY' || fail "bf16 state under --memory-limit"
import json, math, sys
d, limit = sys.argv[1], int(sys.argv[2].removesuffix("MiB")) * 2**20
rows = [json.loads(l) for l in open(f"{d}/bf_limited.jsonl")]
assert len(rows) == 3 and all(math.isfinite(r["loss"]) and r["mem_peak"] <= limit for r in rows), rows
PY
echo "ok   --fit $limit --fit-host 30MiB: only bf16 optimizer state fits; ${fitting[*]} trains within the limit"

# Note [One data set per process]: four local ranks share one copy of a
# 16 MB text file's tokens (64 MB), where each had loaded its own.
"$python" - "$train" "$dir" <<'PY' || fail "one data set per process"
import os, random, resource, subprocess, sys
train, d = sys.argv[1], sys.argv[2]
rng = random.Random()
with open(f"{d}/data.txt", "wb") as f:
    f.write(bytes(rng.randrange(32, 127) for _ in range(1 << 16)) * 256)  # 16 MiB
def max_rss(ranks):  # the largest child's so far: one rank runs first, four after
    subprocess.run([train, "--data", f"{d}/data.txt", "--steps", "1", "--ranks", str(ranks), "--threads", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
one = max_rss(1)
four = max_rss(4)
tokens = (16 << 20) * 4
assert four < one + tokens // 2, f"4 ranks {four >> 20} MiB against 1 rank {one >> 20} MiB: more than one copy of the data"
print(f"ok   one data set per process: max RSS {one >> 20} MiB with 1 rank, {four >> 20} MiB with 4")
PY

# Note [Memory limit]: under --memory-limit on the cpu the default streams
# are none, so the settings --fit lists train under the limit with the
# default flags (with the comm streams, the second and third of them
# ran out of memory; and the plan's 2 dry steps missed a segment reserved at
# the fifth).
small=(--preset small --batch-size 4 --seq-len 64 --ranks 2 --threads 1)
"$train" "${small[@]}" --plan --fit 12MiB --memory-limit 12MiB > "$dir/fit12.out" 2>&1 || fail "--fit 12MiB: $(cat "$dir/fit12.out")"
grep -E "^ +[0-9.]+ +[0-9.]+ +--strategy" "$dir/fit12.out" | sed 's/^ *[0-9.]* *[0-9.]* *//; s|disk:DIR|disk:'"$dir"'|' > "$dir/fit12.txt"
[ "$(wc -l < "$dir/fit12.txt")" -ge 4 ] || fail "--fit 12MiB lists too few settings: $(cat "$dir/fit12.out")"
while read -r -a setting; do
  "$train" "${small[@]}" "${setting[@]}" --memory-limit 12MiB --steps 8 > "$dir/fit12.run" 2>&1 ||
    fail "${setting[*]} under --memory-limit 12MiB: $(tail -n1 "$dir/fit12.run")"
done < <(sed -n '1,4p;$p' "$dir/fit12.txt")
echo "ok   settings --fit 12MiB lists train under --memory-limit 12MiB with the default streams"
