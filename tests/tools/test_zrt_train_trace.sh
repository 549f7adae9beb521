#!/usr/bin/env bash
# zrt-train --trace: one valid Chrome trace per rank with the step's events
# (forward/backward per unit, all-gathers and reduce-scatters with bytes where
# there is more than one rank, the optimizer step, memory counters); one rank
# writes the path as given; --gather-dtype int8 gathers and --reduce-dtype
# int8 reduces >= 3.5x fewer bytes than fp32, --reduce-dtype int4 >= 7x.
# usage: test_zrt_train_trace.sh ZRT-TRAIN PYTHON
set -u
train=$1 python=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$train" --steps 3 --ranks 2 --micro-batches 2 --trace "$dir/t.json" > /dev/null || { echo "FAIL: 2-rank run"; exit 1; }
"$train" --steps 2 --trace "$dir/one.json" > /dev/null || { echo "FAIL: 1-rank run"; exit 1; }
"$python" - "$dir/t.rank-0.json" "$dir/t.rank-1.json" "$dir/one.json" <<'PY' || exit 1
import json, sys
for rank, path in enumerate(sys.argv[1:]):
    events = json.load(open(path))  # a whole JSON array or this raises (Note [Streamed trace])
    rank = rank % 2
    names = [e["name"] for e in events if e["ph"] == "X"]
    # One fp32 rank neither gathers nor reduce-scatters (Note [Unsharded
    # parameter of a world of one]); two ranks do both.
    collectives = ["all_gather world", "reduce_scatter world"]
    for want in ["forward embed_head", "backward h.0", "optimizer step"] + (collectives if "rank" in path else []):
        assert any(n == want for n in names), f"{path}: no '{want}' event in {sorted(set(names))}"
    # The rank's thread says what it does: computing, waiting, issuing (Note [Trace timeline]).
    cats = {e["name"]: e["cat"] for e in events if e["ph"] == "X" and e["tid"] == 0}
    for name, cat in [("forward h.0", "compute"), ("forward gather h.0", "wait"), ("backward gather h.0", "wait"),
                      ("reduce h.0", "issue"), ("optimizer step", "compute"), ("loss all-reduce", "issue")]:
        assert cats.get(name) == cat, f"{path}: '{name}' is {cats.get(name)}, not {cat}"
    if "rank" not in path:
        assert not any(n in collectives for n in names), f"{path}: a collective on one rank: {sorted(set(names))}"
    assert all(e["pid"] == rank for e in events if "pid" in e), f"{path}: events of another rank"
    gathers = [e for e in events if e["name"].startswith("all_gather")]
    assert all(e["args"]["bytes"] > 0 and e["dur"] >= 0 for e in gathers), f"{path}: a gather without bytes"
    counters = [e for e in events if e["ph"] == "C" and e["name"] == "memory"]
    assert len(counters) >= 2 and all(e["args"]["reserved"] >= e["args"]["allocated"] > 0 for e in counters), path
    print(f"ok   {path}: {len(events)} events")
PY

# The trace is streamed (Note [Streamed trace]): a run killed with SIGKILL
# leaves its finished steps, one event a line, lacking only the closing "]";
# a run refused before training writes none.
"$train" --steps 100000 --metrics "$dir/k.jsonl" --trace "$dir/k.json" > /dev/null &
pid=$!
for _ in $(seq 600); do
  [ "$(wc -l < "$dir/k.jsonl" 2> /dev/null || echo 0)" -ge 3 ] && break
  sleep 0.1
done
kill -KILL $pid
wait $pid 2> /dev/null
"$python" - "$dir/k.json" "$(wc -l < "$dir/k.jsonl")" <<'PY' || exit 1
import json, sys
text = open(sys.argv[1]).read()
assert text.startswith("[") and not text.rstrip().endswith("]"), text[-200:]
lines = text.splitlines()
events = json.loads("\n".join(lines[:-1]) + "]")  # the last line may be cut
steps = sum(e["name"] == "optimizer step" for e in events)
assert steps >= min(3, int(sys.argv[2])), f"{steps} optimizer steps in the trace of a killed run"
print(f"ok   a run killed with SIGKILL left a trace of {steps} steps")
PY
out=$("$train" --steps 2 --batch-size 7 --ranks 2 --trace "$dir/refused.json" 2>&1) && { echo "FAIL: --batch-size 7 on 2 ranks ran"; exit 1; }
[ ! -e "$dir/refused.rank-0.json" ] && [ ! -e "$dir/refused.rank-1.json" ] ||
  { echo "FAIL: a run refused before training wrote a trace: $(ls "$dir")"; exit 1; }
echo "ok   a run refused before training writes no trace"

# --gather-dtype int8: the parameter all-gathers of the same steps move >= 3.5x
# fewer bytes than in fp32 and >= 1.75x fewer than in bf16, as the traced
# collectives count them (Note [Quantized parameter gather]). GPT `small`:
# the default model's 32-wide vectors would be mostly the padding that starts
# each parameter on the block grid (Note [Quantization blocks within one parameter]).
small=(--preset small --batch-size 4 --seq-len 32)
for run in "fp32 compute" "fp32 int8" "bf16 compute" "bf16 int8"; do
  set -- $run
  "$train" "${small[@]}" --steps 2 --ranks 4 --dtype "$1" --gather-dtype "$2" --trace "$dir/g-$1-$2.json" > /dev/null ||
    { echo "FAIL: 4-rank run --dtype $1 --gather-dtype $2"; exit 1; }
done
"$python" - "$dir" <<'PY' || exit 1
import json, sys
def gathered(name):
    events = json.load(open(f"{sys.argv[1]}/g-{name}.rank-0.json"))
    return sum(e["args"]["bytes"] for e in events if e["name"].startswith("all_gather"))
b = {n: gathered(n) for n in ["fp32-compute", "fp32-int8", "bf16-compute", "bf16-int8"]}
assert b["fp32-int8"] == b["bf16-int8"], b  # int8 whatever the compute dtype
assert b["fp32-compute"] >= 3.5 * b["fp32-int8"], b
assert b["bf16-compute"] >= 1.75 * b["bf16-int8"], b
print(f"ok   all-gather bytes of rank 0: fp32 {b['fp32-compute']:.0f}, bf16 {b['bf16-compute']:.0f}, "
      f"int8 {b['fp32-int8']:.0f} ({b['fp32-compute'] / b['fp32-int8']:.2f}x fewer than fp32)")
PY

# --reduce-dtype int8 (int4): the gradients' all-to-all moves >= 3.5x (7x)
# fewer bytes than the fp32 reduce-scatter (Note [Quantized gradient reduce-scatter]).
for q in int8 int4; do
  "$train" "${small[@]}" --steps 2 --ranks 4 --reduce-dtype $q --trace "$dir/r-$q.json" > /dev/null ||
    { echo "FAIL: 4-rank run --reduce-dtype $q"; exit 1; }
done
"$python" - "$dir" <<'PY'
import json, sys
def moved(name, op):
    events = json.load(open(f"{sys.argv[1]}/{name}.rank-0.json"))
    return sum(e["args"]["bytes"] for e in events if e["name"].startswith(op))
f32, int8, int4 = (moved("g-fp32-compute", "reduce_scatter"), moved("r-int8", "all_to_all"),
                   moved("r-int4", "all_to_all"))
assert moved("r-int8", "reduce_scatter") == 0 and int8 > 0, (f32, int8)
assert moved("r-int4", "reduce_scatter") == 0 and int4 > 0, (f32, int4)
assert f32 >= 3.5 * int8 and f32 >= 7 * int4, (f32, int8, int4)
print(f"ok   gradient bytes of rank 0: fp32 reduce-scatter {f32:.0f}, int8 all-to-all {int8:.0f} "
      f"({f32 / int8:.2f}x fewer), int4 {int4:.0f} ({f32 / int4:.2f}x fewer)")
PY
