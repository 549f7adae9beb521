#!/usr/bin/env bash
# zrt-bench train --json: one object with the documented fields and sane values
# (positive times, min <= median <= max, tokens/s = batch x seq / median step,
# GFLOP/s = FLOPs per step / median step, the measured or given peak, memory,
# a first loss near ln 256, forward, backward, optimizer and communication
# time per step on the host clock, the text's phases line), on one rank and
# on two local ranks; --prefetch
# 0,1,2 gives one object per depth, in order, with the same losses (prefetch
# changes when, not what) and communication figures; --activation-checkpointing
# none,blocks,every:2 likewise, each mode's step peak below none's; a bad value
# fails. --device: cpu is the default and gives the same figures; cuda in a
# build without CUDA, or a CUDA build on a machine without a GPU, is a bad
# command line (exit 2) saying which, and with a GPU a run on it;
# --peak-tflops T is --peak-gflops 1000·T, and the two together are refused.
# Bytes on the link: none on one rank, the same on every step and variant on
# two; --link-gbps none,1 with --link-us 20000 (Note [Link model]) gives the
# same losses and bytes, the held run's steps at least one 20 ms hold long
# (every step waits for its loss's all-reduce); bad link values are refused.
# tools/bench/torch_gpt.py
# prints its skip message and exits 0 without PyTorch 2.x: under PYTHON when
# its torch is older (Debian's 1.13), and with site-packages off (-S: no torch);
# --device cuda with a PyTorch 2.x that has no CUDA (a stand-in torch module
# here) exits 77 saying so, for a single run and for --compare.
# --offload-optimizer disk:DIR with --gather-after-update on,off gives the
# same losses and leaves DIR empty; a missing DIR and an unknown place are refused.
# --save-data onto the --init-from file, and --save-init and --save-data on
# one file, are refused before anything is written.
# usage: test_zrt_bench_train.sh ZRT-BENCH PYTHON TORCH_GPT_PY
set -u
bench=$1 python=$2 torch_gpt=$3
declare -A gather
source "$(dirname "$0")/user_messages.sh"
fail() { echo "FAIL: $*"; exit 1; }

check_json() {  # check_json RANKS JSON
  "$python" - "$1" "$2" <<'PY'
import json, math, sys
ranks, r = int(sys.argv[1]), json.loads(sys.argv[2])
fields = ["model", "preset", "n_layer", "n_head", "n_embd", "vocab_size", "params", "device", "device_name", "ranks",
          "threads", "strategy",
          "dtype", "reduce_dtype", "gather_after_update", "link", "link_gbps", "link_us", "sent_bytes_per_step",
          "received_bytes_per_step", "sent_bytes_per_step_max_rank", "sent_bytes_per_step_by_kind",
          "collectives_per_step", "batch_size", "seq_len", "prefetch", "activation_checkpointing", "cpu_streams", "warmup", "steps", "rounds", "step_ms", "step_ms_min", "step_ms_max",
          "step_vs_first", "tokens_per_s", "gflop_per_step", "gflops", "peak_gflops", "peak_source", "frac_peak",
          "comm_ms_per_step", "comm_overlapped", "forward_ms", "backward_ms", "optimizer_ms",
          "comm_phase_ms", "phase_clock", "loss_first",
          "loss_last", "step_peak_MiB", "alloc_peak_MiB", "rss_peak_MiB", "rss_base_MiB"]
missing = [f for f in fields if f not in r]
assert not missing, f"missing fields {missing} in {r}"
assert (r["model"], r["preset"], r["ranks"], r["steps"], r["warmup"]) == ("gpt", "tiny", ranks, 2, 1), r
assert (r["device"], r["device_name"]) == ("cpu", "cpu"), r
assert (r["n_layer"], r["n_head"], r["n_embd"], r["vocab_size"], r["params"]) == (2, 2, 32, 256, 35712), r
assert 0 < r["step_ms_min"] <= r["step_ms"] <= r["step_ms_max"], r
step_s = r["step_ms"] / 1e3
assert math.isclose(r["tokens_per_s"], r["batch_size"] * r["seq_len"] / step_s, rel_tol=1e-6), r
assert math.isclose(r["gflops"], r["gflop_per_step"] / step_s, rel_tol=1e-6), r
# 6N + 12·L·C·T per token (Note [Model FLOPs]): N leaves out wpe (64 x 32).
n = 35712 - 64 * 32
assert math.isclose(r["gflop_per_step"], (6 * n + 12 * 2 * 32 * 64) * 8 * 64 / 1e9, rel_tol=1e-9), r
given = ranks == 2  # --peak-gflops 100
assert (r["peak_gflops"] == 100 and r["peak_source"] == "given") if given else r["peak_source"] != "given", r
assert r["peak_gflops"] > 0 and math.isclose(r["frac_peak"], r["gflops"] / r["peak_gflops"], rel_tol=1e-6), r
assert 0 < r["frac_peak"] < 2, r
assert r["threads"] >= 1 and r["alloc_peak_MiB"] > 0 and r["rss_peak_MiB"] >= r["rss_base_MiB"] > 0, r
assert abs(r["loss_first"] - math.log(256)) < 0.5 and math.isfinite(r["loss_last"]), r
# Two ranks gather and reduce; one rank's only collective is the loss's sum.
assert r["comm_ms_per_step"] > 0 if ranks > 1 else r["comm_ms_per_step"] >= 0, r
# Note [Bytes on the link]: one rank puts nothing on a link; two gather and
# reduce-scatter every unit each step (the tiny GPT in fp32: 35712 parameters,
# each rank sending half of every gathered or reduced buffer).
assert r["link"] == "none" and r["reduce_dtype"] == "fp32", r
by_kind = r["sent_bytes_per_step_by_kind"]
assert sorted(by_kind) == ["all_gather", "all_reduce", "all_to_all", "broadcast", "reduce_scatter"], r
assert math.isclose(sum(by_kind.values()), r["sent_bytes_per_step"], rel_tol=1e-12), r
if ranks == 1:
    assert r["sent_bytes_per_step"] == 0 == r["received_bytes_per_step"], r
else:
    assert by_kind["reduce_scatter"] == 35712 * 4 / 2, r
    assert by_kind["all_gather"] >= 2 * 35712 * 4 / 2, r  # forward and backward gathers
    assert r["sent_bytes_per_step"] == r["received_bytes_per_step"] == r["sent_bytes_per_step_max_rank"], r
assert r["collectives_per_step"] >= 1, r
assert 0 <= r["comm_overlapped"] <= 1, r
# Note [Step phase times]: each phase took time; on one rank with compute on
# the rank's thread the three compute phases are disjoint parts of a step.
assert r["phase_clock"] == "host clock", r
assert r["forward_ms"] > 0 and r["backward_ms"] > 0 and r["optimizer_ms"] > 0, r
assert r["comm_phase_ms"] > 0 if ranks > 1 else r["comm_phase_ms"] >= 0, r
if ranks == 1:
    assert r["forward_ms"] + r["backward_ms"] + r["optimizer_ms"] <= r["step_ms_max"], r
print(f"ok   {ranks} rank(s): {r['step_ms']:.1f} ms/step, {r['tokens_per_s']:.0f} tokens/s, "
      f"{r['gflops']:.2f} of {r['peak_gflops']:.1f} GFLOP/s")
PY
}

# One rank measures the peak (on the default device, cpu, named on one run);
# two local ranks take it from --peak-gflops, or --peak-tflops.
for ranks in 1 2; do
  peak=(--device cpu)
  [ "$ranks" = 2 ] && peak=(--peak-tflops 0.1)
  out=$("$bench" train --model gpt --preset tiny --steps 2 --warmup 1 --ranks "$ranks" --threads 1 "${peak[@]}" --json) ||
    fail "zrt-bench train --ranks $ranks exited non-zero"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "--json printed more than one line: $out"
  check_json "$ranks" "$out" || fail "--ranks $ranks: $out"
done

out=$("$bench" train --preset tiny --steps 2 --warmup 1 --ranks 2 --threads 1 --peak-gflops 100) ||
  fail "zrt-bench train (text) exited non-zero"
phases="phases    forward "*" ms, backward "*" ms, optimizer "*" ms, communication "*"(host clock)"
[[ $out == *$phases* ]] ||
  fail "the text has no phases line: $out"
echo "ok   the text's phases line"

out=$("$bench" train --preset tiny --steps 2 --warmup 1 --ranks 2 --threads 1 --peak-gflops 100 --prefetch 2,0,1 \
      --cpu-streams all --rounds 2 --json) || fail "--prefetch 2,0,1 exited non-zero"
"$python" - "$out" <<'PY' || fail "--prefetch 2,0,1: $out"
import json, sys
rows = [json.loads(line) for line in sys.argv[1].splitlines()]
assert [r["prefetch"] for r in rows] == [2, 0, 1], rows
assert all(r["cpu_streams"] == "all" and r["rounds"] == 2 and r["comm_ms_per_step"] > 0 for r in rows), rows
assert len({(r["loss_first"], r["loss_last"]) for r in rows}) == 1, [(r["loss_first"], r["loss_last"]) for r in rows]
assert rows[0]["step_vs_first"] == 1 and all(r["step_vs_first"] > 0 for r in rows), rows
print("ok   --prefetch 2,0,1: " + ", ".join(f"{r['prefetch']}: {r['step_ms']:.1f} ms, {100 * r['comm_overlapped']:.0f}% overlapped" for r in rows))
PY
out=$("$bench" train --preset tiny --n-layer 4 --steps 2 --warmup 1 --threads 1 --peak-gflops 100 --batch-size 16 \
      --activation-checkpointing none,blocks,every:2 --json) || fail "--activation-checkpointing exited non-zero"
"$python" - "$out" <<'PY' || fail "--activation-checkpointing none,blocks,every:2: $out"
import json, sys
rows = [json.loads(line) for line in sys.argv[1].splitlines()]
assert [r["activation_checkpointing"] for r in rows] == ["none", "blocks", "every:2"], rows
assert len({(r["loss_first"], r["loss_last"]) for r in rows}) == 1, [(r["loss_first"], r["loss_last"]) for r in rows]
none, blocks, every2 = (r["step_peak_MiB"] for r in rows)
assert 0 < blocks < every2 < none, (none, blocks, every2)
print("ok   --activation-checkpointing: " + ", ".join(f"{r['activation_checkpointing']}: step peak {r['step_peak_MiB']:.2f} MiB" for r in rows))
PY
# --gather-dtype int8 reaches the engine: its all-gathers move >= 3.5x fewer bytes than fp32's.
for g in compute int8; do
  gather[$g]=$("$bench" train --preset small --batch-size 4 --seq-len 16 --steps 1 --warmup 0 --ranks 2 \
    --threads 1 --gather-dtype $g --json) || fail "--gather-dtype $g exited non-zero"
done
"$python" - "${gather[compute]}" "${gather[int8]}" <<'PY' || fail "--gather-dtype int8: ${gather[int8]}"
import json, sys
f32, int8 = (json.loads(a) for a in sys.argv[1:])
assert (f32["gather_dtype"], int8["gather_dtype"]) == ("compute", "int8"), (f32, int8)
g = [r["sent_bytes_per_step_by_kind"]["all_gather"] for r in (f32, int8)]
assert g[1] > 0 and g[0] >= 3.5 * g[1], g
print(f"ok   --gather-dtype int8: {g[1]:.0f} B gathered per step and rank, {g[0] / g[1]:.2f}x fewer than fp32")
PY
out=$("$bench" train --preset tiny --steps 2 --warmup 1 --ranks 2 --threads 1 --peak-gflops 100 \
      --link-gbps none,1 --link-us 20000 --gather-after-update on,off --json) || fail "--link-gbps none,1 exited non-zero"
"$python" - "$out" <<'PY' || fail "--link-gbps none,1: $out"
import json, sys
rows = [json.loads(line) for line in sys.argv[1].splitlines()]
held = ("1 Gb/s + 20000 us", 1, 20000)
assert [(r["link"], r["link_gbps"], r["link_us"], r["gather_after_update"]) for r in rows] == [
    ("none", 0, 0, True), ("none", 0, 0, False), (*held, True), (*held, False)], rows
assert len({(r["loss_first"], r["loss_last"]) for r in rows}) == 1, [(r["loss_first"], r["loss_last"]) for r in rows]
assert len({json.dumps(r["sent_bytes_per_step_by_kind"]) for r in rows}) == 1, rows
assert rows[2]["step_ms_min"] >= 20 and rows[3]["step_ms_min"] >= 20, rows
steps = ", ".join(f"{r['step_ms']:.1f}" for r in rows)
print(f"ok   --link-gbps none,1 --link-us 20000 --gather-after-update on,off: {steps} ms/step, "
      f"{rows[0]['sent_bytes_per_step']:.0f} B sent per step and rank")
PY
scratch=$(mktemp -d)
out=$("$bench" train --preset tiny --steps 2 --warmup 1 --ranks 2 --threads 1 --peak-gflops 100 \
      --offload-optimizer "disk:$scratch" --gather-after-update on,off --json) ||
  fail "--offload-optimizer disk: exited non-zero"
"$python" - "$out" "$scratch" <<'PY' || fail "--offload-optimizer disk: $out"
import json, sys
rows = [json.loads(line) for line in sys.argv[1].splitlines()]
assert [(r["offload_optimizer"], r["gather_after_update"]) for r in rows] == [
    (f"disk:{sys.argv[2]}", True), (f"disk:{sys.argv[2]}", False)], rows
assert len({(r["loss_first"], r["loss_last"]) for r in rows}) == 1, rows
print("ok   --offload-optimizer disk:DIR --gather-after-update on,off: the same losses")
PY
[ -z "$(ls -A "$scratch")" ] || fail "--offload-optimizer disk left files in $scratch"
rmdir "$scratch"
out=$("$bench" train --preset tiny --steps 1 --offload-optimizer "disk:$scratch" 2>&1) &&
  fail "--offload-optimizer disk: into a missing directory was accepted"
case $out in
  *"--offload-optimizer"*"does not exist"*) ;;
  *) fail "--offload-optimizer disk: into a missing directory: $out" ;;
esac
shows_source "--offload-optimizer disk: into a missing directory" "$out" && exit 1
"$bench" train --preset tiny --steps 1 --offload-optimizer tape > /dev/null 2>&1 &&
  fail "--offload-optimizer tape was accepted"
for bad in "0" "fast" "1," "-5"; do
  "$bench" train --preset tiny --steps 1 --link-gbps "$bad" > /dev/null 2>&1 && fail "--link-gbps $bad was accepted"
done
"$bench" train --preset tiny --steps 1 --link-gbps 100 --link-us -1 > /dev/null 2>&1 && fail "--link-us -1 was accepted"
"$bench" train --preset tiny --steps 1 --reduce-dtype f8 > /dev/null 2>&1 && fail "--reduce-dtype f8 was accepted"
"$bench" train --preset tiny --steps 1 --gather-dtype int4 > /dev/null 2>&1 && fail "--gather-dtype int4 was accepted"
"$bench" train --preset tiny --steps 1 --gather-after-update yes > /dev/null 2>&1 && fail "--gather-after-update yes was accepted"
"$bench" train --preset tiny --steps 1 --activation-checkpointing blocks,every:0 > /dev/null 2>&1 &&
  fail "--activation-checkpointing blocks,every:0 was accepted"
"$bench" train --preset tiny --steps 1 --prefetch 0,3 > /dev/null 2>&1 && fail "--prefetch 0,3 was accepted"
"$bench" train --preset tiny --steps 1 --prefetch 1, > /dev/null 2>&1 && fail "--prefetch 1, was accepted"
"$bench" train --preset tiny --steps 1 --cpu-streams some > /dev/null 2>&1 && fail "--cpu-streams some was accepted"
"$bench" train --preset tiny --steps 0 --json > /dev/null 2>&1 && fail "--steps 0 was accepted"
"$bench" train --model mlp --n-head 2 --steps 1 > /dev/null 2>&1 && fail "a gpt flag was accepted for mlp"
for t in 7 64; do  # 64: the default, given
  "$bench" train --model mlp --seq-len $t --steps 1 2>&1 | grep -q -- "--seq-len is a gpt flag" || fail "--seq-len $t was not refused for mlp"
done
"$bench" train --preset tiny --steps 1 --device tpu > /dev/null 2>&1 && fail "--device tpu was accepted"
"$bench" train --preset tiny --steps 1 --peak-gflops 100 --peak-tflops 0.1 > /dev/null 2>&1 &&
  fail "--peak-gflops with --peak-tflops was accepted"
"$bench" train --preset tiny --steps 1 --peak-tflops -1 > /dev/null 2>&1 && fail "--peak-tflops -1 was accepted"
echo "ok   bad values refused"

# Outputs never land on an input (Note [No output onto an input]): refused
# before anything is written, the input unchanged.
work=$(mktemp -d)
"$bench" train --preset tiny --steps 1 --warmup 0 --save-init "$work/w.safetensors" > /dev/null ||
  fail "--save-init failed"
sum=$(cksum < "$work/w.safetensors")
out=$("$bench" train --preset tiny --steps 1 --warmup 0 --init-from "$work/w.safetensors" \
  --save-data "$work/w.safetensors" 2>&1) && fail "--save-data onto --init-from was accepted"
case $out in *"--save-data"*"is the --init-from file"*) ;; *) fail "--save-data onto --init-from: $out" ;; esac
[ "$(cksum < "$work/w.safetensors")" = "$sum" ] || fail "--save-data overwrote the --init-from file"
out=$("$bench" train --preset tiny --steps 1 --warmup 0 --save-init "$work/s.st" \
  --save-data "$work/./s.st" 2>&1) && fail "--save-init and --save-data on one file was accepted"
case $out in *"name the same file"*) ;; *) fail "one file for two outputs: $out" ;; esac
[ ! -e "$work/s.st" ] || fail "a refused run wrote $work/s.st"
rm -rf "$work"
echo "ok   outputs onto inputs refused"

out=$("$bench" train --preset tiny --steps 1 --warmup 0 --device cuda --json 2>&1)
rc=$?
case $rc in
  2) case $out in
       *"error: --device cuda"*"no CUDA support"*) echo "ok   --device cuda without CUDA: exit 2, '$out'" ;;
       *"no CUDA device is usable"*) echo "ok   --device cuda in a CUDA build without a GPU: exit 2, '$out'" ;;
       *) fail "--device cuda exited 2 without naming the missing CUDA build or GPU: $out" ;;
     esac ;;
  0) "$python" - "$out" <<'PY' || fail "--device cuda: $out"
import json, math, sys
r = json.loads(sys.argv[1])
assert r["device"] == "cuda" and r["device_name"] and r["step_ms"] > 0 and r["alloc_peak_MiB"] > 0, r
assert r["phase_clock"] == "cuda events" and r["forward_ms"] > 0 and r["backward_ms"] > 0, r
compute = r["forward_ms"] + r["backward_ms"] + r["optimizer_ms"]
assert r["optimizer_ms"] > 0 and compute < r["step_ms_max"], r
assert r["frac_peak"] is None or 0 < r["frac_peak"] < 1, r
assert abs(r["loss_first"] - math.log(256)) < 0.5, r
print(f"ok   --device cuda on {r['device_name']}: {r['step_ms']:.1f} ms/step ({r['peak_source']})")
PY
     ;;
  *) fail "--device cuda: exit $rc: $out" ;;
esac

expect_skip() {  # expect_skip WHAT MESSAGE PYTHON-ARGS...
  local what=$1 message=$2
  shift 2
  out=$("$@" "$torch_gpt" --compare 2>&1) || fail "torch_gpt.py $what: exit code $?: $out"
  case $out in
    *"torch_gpt.py: skipped: $message"*) echo "ok   torch_gpt.py $what: $out" ;;
    *) fail "torch_gpt.py $what: no skip message: $out" ;;
  esac
}
expect_skip "without torch" "PyTorch 2.x is not installed" "$python" -S
major=$("$python" -c 'import torch; print(torch.__version__.split(".")[0])' 2>/dev/null)
if [ -n "$major" ] && [ "$major" -lt 2 ]; then
  expect_skip "with torch $major.x" "needs PyTorch 2.x" "$python"
else
  echo "note: $python has no torch older than 2; the old-torch skip is not checked"
fi

# torch_gpt.py --device cuda with a PyTorch 2.x built without CUDA: a stand-in
# torch package (the version and CUDA queries only) in front of the real one.
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/torch"
cat > "$fake/torch/__init__.py" <<'PY'
"""Stand-in for a CPU-only PyTorch 2.x: version and CUDA queries only."""
import types
__version__ = "2.11.0+cpu"
version = types.SimpleNamespace(cuda=None)
cuda = types.SimpleNamespace(is_available=lambda: False)
PY
for mode in single compare; do
  args=(--device cuda --init none --data none --n-head 2 --batch-size 8 --seq-len 64)
  [ "$mode" = compare ] && args=(--compare --device cuda --dtype bf16 --zrt-bench "$bench")
  out=$(PYTHONPATH=$fake "$python" "$torch_gpt" "${args[@]}" 2>&1)
  rc=$?
  [ "$rc" = 77 ] || fail "torch_gpt.py --device cuda ($mode) without CUDA: exit $rc, not 77: $out"
  case $out in
    *"torch_gpt.py: skipped: --device cuda"*"built without CUDA"*) echo "ok   torch_gpt.py --device cuda ($mode) without CUDA: exit 77, '$out'" ;;
    *) fail "torch_gpt.py --device cuda ($mode) without CUDA: no message saying so: $out" ;;
  esac
done
PYTHONPATH=$fake "$python" "$torch_gpt" --device cpu --dtype fp16 > /dev/null 2>&1 && fail "torch_gpt.py --dtype fp16 was accepted"
echo "ok   torch_gpt.py --dtype fp16 refused"
