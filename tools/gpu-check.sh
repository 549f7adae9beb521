#!/usr/bin/env bash
# Runs zrt on a GPU machine in one go, from a bundle tools/gpu-bundle.sh made
# elsewhere, stage by stage in the order ZRT_GPU_CHECK_STAGES lists them
# (Note [A device call's budget]); by default:
# - suites: every gpu suite directly (not through ctest, whose paths are the
#   building machine's), side by side;
# - bench, each step alone on the GPU: zrt-bench train --device cuda on
#   GPT-2 124M shapes in bf16 beside the same GPT in PyTorch on the same GPU
#   (the bundle's scripts/torch_gpt.py --compare under python3 from PATH:
#   tokens/s, step time, MFU against the datasheet peak, peak memory,
#   zrt/PyTorch ratios; its JSON goes to bench-train-cuda.json; skipped, exit
#   77, when that python3 has no PyTorch 2.x with CUDA); where the step's time
#   goes: ncu's device time of every kernel over 2 steps of zrt-train on
#   GPT-2 124M in bf16, summed per kernel name by scripts/gpu_report.py into
#   zrt-124m-bf16-per-kernel.txt (ms per step, launches, share, most first;
#   skipped without ncu); zrt-bench attention (each attention path on GPT-2
#   124M's layer); zrt-bench train with each attention path, and on 2 local
#   ranks sharing the GPU; zrt-bench ops and optim;
# - train, side by side: zrt-train --device cuda (tiny GPT on 1 and 2 local
#   ranks, GPT-2 124M in bf16);
# - sanitize, side by side: the kernel and memory suites under
#   compute-sanitizer memcheck, racecheck and synccheck, the communicators
#   and one engine case under memcheck. Errors are counted by
#   scripts/gpu_report.py: API errors that NCCL or cuBLAS make inside
#   themselves (NCCL probing its kernels) are reported as library-internal
#   and do not fail the step; any other error does (Note [Whose sanitizer
#   error] in tools/gpu_report.py); each one's output is in sanitizer/.
# Each step has a time limit, cut to what is left of the budget; a failing
# step does not stop the others. Writes SUMMARY.md (one line per step:
# result, seconds, the sanitizer's or the kernel table's summary line, else
# the last line that explains a failure; rewritten after every step, so a
# call killed at its limit still has it) and gpu-check.log (every step's
# output) to the summary folder, and prints the summary last.
#
# usage: tools/gpu-check.sh [BUNDLE [SUMMARY-DIR]]
#   BUNDLE       default gpu-bundle/ in the repository
#   SUMMARY-DIR  default $OUT when set (the device tool's), else out/gpu-check
#   ZRT_GPU_CHECK_STAGES  the stages to run, in order: of suites,bench,train,
#                         sanitize (the default) and scale (large models: GPT
#                         1.5B's start, then a 6.7B GPT's plan and three steps
#                         of the cheapest setting that fits the GPU), e.g.
#                         suites,bench,scale,train,sanitize
#   ZRT_GPU_CHECK_BUDGET  seconds for the whole run (default 540, inside a
#                         device call's 600); steps that find under 10 s
#                         left are skipped and say so
# A device call returns at most 8 files, and sanitizer/ alone holds 14: run
#   ZRT_GPU_CHECK_BUDGET=500 tools/gpu-check.sh gpu-bundle /tmp/gpu-check;
#   tar -C /tmp -czf "$OUT/gpu-check.tar.gz" gpu-check
# with a call limit (timeout_s) of 560 or more.
# Exits 77 on a machine without a GPU, saying so; 2 on a bad argument; 1
# when a step failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:-$root/gpu-bundle}
summary_dir=${2:-${OUT:-$root/out/gpu-check}}
stages=${ZRT_GPU_CHECK_STAGES:-suites,bench,train,sanitize}
for stage in ${stages//,/ }; do
  case $stage in
    suites | bench | train | sanitize | scale) ;;
    *)
      echo "gpu-check: ZRT_GPU_CHECK_STAGES names '$stage', which is not a stage (suites, bench, train, sanitize, scale)" >&2
      exit 2
      ;;
  esac
done
budget=${ZRT_GPU_CHECK_BUDGET:-540}
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-check: ZRT_GPU_CHECK_BUDGET=$budget is not a whole number of seconds" >&2; exit 2; }

if ! gpus=$(nvidia-smi -L 2> /dev/null) || [ -z "$gpus" ]; then
  echo "gpu-check: no GPU on this machine (nvidia-smi -L lists none): nothing to check"
  exit 77
fi
[ -x "$bundle/bin/zrt-train" ] || { echo "gpu-check: no bundle at $bundle: make one with tools/gpu-bundle.sh" >&2; exit 2; }
bundle=$(cd "$bundle" && pwd)
mkdir -p "$summary_dir"
summary=$summary_dir/SUMMARY.md
log=$summary_dir/gpu-check.log
: > "$log"

# Libraries: the bundle's, then the machine's CUDA toolkit, then its
# PyTorch's CUDA wheels (cuBLAS, NCCL and the CUDA runtime are not carried).
lib_path=$bundle/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && lib_path+=:$d
done
wheels=$(python3 - 2> /dev/null << 'PY'
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
dirs = []
for base in nvidia.__path__:
    dirs += sorted(d for d in glob.glob(os.path.join(base, "*", "lib")) if os.path.isdir(d))
print(":".join(dirs))
PY
)
[ -n "$wheels" ] && lib_path+=:$wheels
export LD_LIBRARY_PATH=$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# Note [A device call's budget]
# A lent GPU comes for a few minutes, and a call killed at its limit returns
# only what it wrote. So every step's limit is cut to what is left of
# ZRT_GPU_CHECK_BUDGET (seconds from the start), a step with under 10 s left
# is skipped and says so, the stages run in the order the call lists them
# (by default as a device call needs them: correctness in seconds, then the
# speed figures, then the longer checks), checks run side by side and
# timings alone, and SUMMARY.md is rewritten after every step.
deadline=$((SECONDS + budget))
failed=0 skipped=0
rows=()
work=$(mktemp -d)  # each step's output and row until collected
trap 'rm -rf "$work"' EXIT
next_id=0

driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2> /dev/null | head -1)
manifest=$(tr '\n' ';' < "$bundle/MANIFEST" 2> /dev/null)
write_summary() {
  {
    echo "# zrt gpu-check"
    echo
    echo "- GPU: ${gpus//$'\n'/; }"
    echo "- driver: $driver"
    echo "- bundle: $manifest"
    echo "- stages: $stages; budget ${budget} s, ${SECONDS} s spent"
    [ "$skipped" -gt 0 ] && echo "- $skipped step(s) skipped: no time left of the budget"
    echo
    echo "| step | result | s | summary, or the last error line |"
    echo "| --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
  } > "$summary.tmp" && mv "$summary.tmp" "$summary"
}
add_row() {
  rows+=("$1")
  write_summary
}

# run_step ID NAME LIMIT COMMAND...: runs one step with its limit cut to the
# budget; its output goes to $work/ID.out, its summary row to $work/ID.row,
# and a fail mark to $work/ID.failed.
run_step() {
  local id=$1 name=$2 limit=$3
  shift 3
  local t0=$SECONDS rc result why="" note out=$work/$id.out left=$((deadline - SECONDS))
  echo "=== $name: $*" > "$work/$id.head"
  if [ "$left" -lt 10 ]; then
    : > "$out"
    : > "$work/$id.skipped"
    echo "| $name | skipped | 0 | no time left of the ${budget} s budget |" > "$work/$id.row.tmp"
    mv "$work/$id.row.tmp" "$work/$id.row"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout --kill-after=10 "$limit" "$@" > "$out" 2>&1
  rc=$?
  case $rc in
    0) result=pass ;;
    77) result=skipped ;;
    124 | 137) result="FAIL (over ${limit} s)" ;;
    *) result="FAIL (exit $rc)" ;;
  esac
  if [ "$rc" != 0 ]; then
    [ "$rc" != 77 ] && : > "$work/$id.failed"
    why=$(grep -E "error|Error|ERROR|FAIL|failure|what\(\)" "$out" | tail -1 | cut -c1-160)
    [ -z "$why" ] && why=$(tail -1 "$out" | cut -c1-160)
  fi
  # gpu_report.py's summary line says more than any other, pass or fail.
  note=$(grep -E "^(compute-sanitizer: |total kernel time )" "$out" | tail -1)
  note=${note:0:200}
  [ -n "$note" ] && why=$note
  echo "| $name | $result | $((SECONDS - t0)) | ${why//|/\\|} |" > "$work/$id.row.tmp"
  mv "$work/$id.row.tmp" "$work/$id.row"  # whole, for collect
}
# collect: the rows and output of the steps finished since the last call,
# in the order they started.
declare -A collected_ids
collect() {
  local id new=0
  for ((id = 0; id < next_id; id++)); do
    [ -n "${collected_ids[$id]:-}" ] || [ ! -e "$work/$id.row" ] && continue
    new=1
    {
      echo
      cat "$work/$id.head" "$work/$id.out"
    } >> "$log"
    [ -e "$work/$id.failed" ] && failed=1
    [ -e "$work/$id.skipped" ] && skipped=$((skipped + 1))
    rows+=("$(cat "$work/$id.row")")
    collected_ids[$id]=1
  done
  [ "$new" = 1 ] && write_summary
  return 0
}
# step NAME LIMIT COMMAND...: one step, alone on the GPU (timings).
step() {
  run_step "$next_id" "$@"
  next_id=$((next_id + 1))
  collect
}
# side_step NAME LIMIT COMMAND...: a step that runs beside the next ones
# until side_steps_done (checks, not timings).
side_pids=()
side_step() {
  run_step "$next_id" "$@" &
  side_pids+=($!)
  next_id=$((next_id + 1))
}
# Each side step's row reaches SUMMARY.md as it finishes, so one that hangs
# to its limit holds back no other's.
side_steps_done() {
  local pid running=1
  while [ "$running" = 1 ]; do
    running=0
    for pid in "${side_pids[@]}"; do kill -0 "$pid" 2> /dev/null && running=1; done
    collect
    [ "$running" = 1 ] && sleep 1
  done
  [ ${#side_pids[@]} -gt 0 ] && wait "${side_pids[@]}"
  side_pids=()
  collect
}

bin=$bundle/bin
report=$bundle/scripts/gpu_report.py
suites=(test_tensor_gpu test_caching_allocator_gpu test_comm_gpu test_op_registry_gpu test_nn_kernels_gpu test_engine_gpu)
stage_suites() {
  for s in "${suites[@]}"; do side_step "$s" 300 "$bin/$s" --report_level=short; done
  side_steps_done
}
stage_bench() {
  # GPT-2 124M shapes, 8 x 1024 tokens a step, one zrt run then one PyTorch
  # run on its weights and tokens, each 2 warm-up and 5 timed steps: the
  # figure this stage is for, so first.
  step "zrt-bench train gpt2-124m bf16 vs PyTorch, cuda" 420 python3 "$bundle/scripts/torch_gpt.py" --compare \
    --zrt-bench "$bin/zrt-bench" --device cuda --dtype bf16 --preset gpt2-124m --batch-size 8 --seq-len 1024 \
    --warmup 2 --steps 5 --rounds 1 --json-out "$summary_dir/bench-train-cuda.json"
  # Where the step's time goes: every kernel's device time over 2 steps.
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  train_124m=(--device cuda --preset gpt2-124m --dtype bf16 --batch-size 8 --seq-len 1024 --steps 2)
  if [ -x "$ncu" ]; then
    title="zrt-train ${train_124m[*]}, ${gpus%%$'\n'*}; ncu gpu__time_duration.sum per kernel name"
    step "ncu per-kernel device time, zrt-train gpt2-124m bf16, 2 steps" 300 \
      python3 "$report" kernels --steps 2 --out "$summary_dir/zrt-124m-bf16-per-kernel.txt" \
      --title "$title" "$summary_dir/ncu-124m-bf16.log" -- \
      "$ncu" --metrics gpu__time_duration.sum --print-summary per-kernel \
      "$bin/zrt-train" "${train_124m[@]}"
  else
    add_row "| ncu per-kernel device time | skipped | 0 | no ncu on PATH or in $(dirname "$ncu") |"
  fi
  # Each attention path on GPT-2 124M's layer at batch 8 (Note [Attention
  # paths]), and the whole step on each fast path's attention.
  step "zrt-bench attention gpt2-124m layer bf16, cuda" 120 "$bin/zrt-bench" attention --device cuda
  for path in flash gemm tiled; do
    step "zrt-bench train gpt2-124m bf16, attention $path, cuda" 120 env ZRT_ATTENTION_PATH=$path \
      "$bin/zrt-bench" train --device cuda --preset gpt2-124m --dtype bf16 --batch-size 8 --seq-len 1024 \
      --warmup 2 --steps 5
  done
  # Two local ranks sharing the GPU, each with the one-rank run's batch: its
  # tokens/s against the first step's zrt figure.
  step "zrt-bench train gpt2-124m bf16, 2 local ranks on one GPU, cuda" 180 "$bin/zrt-bench" train \
    --device cuda --ranks 2 --preset gpt2-124m --dtype bf16 --batch-size 8 --seq-len 1024 --warmup 2 --steps 5
  step "zrt-bench ops, cuda" 120 "$bin/zrt-bench" ops --device cuda
  step "zrt-bench optim, cuda" 120 "$bin/zrt-bench" optim --device cuda --params 67108864
}
stage_train() {
  side_step "zrt-train tiny, cuda" 120 "$bin/zrt-train" --device cuda --steps 20 --log-every 5
  side_step "zrt-train tiny, cuda, 2 local ranks" 120 "$bin/zrt-train" --device cuda --ranks 2 --steps 20 --log-every 5
  side_step "zrt-train gpt2-124m bf16, cuda" 300 "$bin/zrt-train" --device cuda --preset gpt2-124m --dtype bf16 \
    --batch-size 8 --seq-len 1024 --steps 10 --log-every 1
  side_steps_done
}
# sanitized TOOL SUITE [ARGS...]: SUITE under compute-sanitizer TOOL, beside
# the others, its output kept in sanitizer/TOOL-SUITE.log and its errors
# counted there.
sanitized() {
  local tool=$1 suite=$2
  shift 2
  side_step "$suite under compute-sanitizer $tool" 300 python3 "$report" sanitizer \
    "$summary_dir/sanitizer/$tool-$suite.log" -- \
    compute-sanitizer --tool "$tool" "$bin/$suite" --report_level=short "$@"
}
stage_sanitize() {
  mkdir -p "$summary_dir/sanitizer"
  # Every kernel runs under each tool through the kernel and memory suites;
  # memcheck also takes the communicators (NCCL's kernels are not ours to
  # race-check) and one engine case (the whole sweep would take an hour).
  for tool in memcheck racecheck synccheck; do
    for s in test_tensor_gpu test_caching_allocator_gpu test_op_registry_gpu test_nn_kernels_gpu; do
      sanitized "$tool" "$s"
    done
  done
  sanitized memcheck test_comm_gpu
  sanitized memcheck test_engine_gpu \
    --run_test=engine_gpu/prefetch_depth_changes_no_number_on_the_device
  side_steps_done
}

stage_scale() {
  # Max RSS of the command, the host side of the plan's device figures.
  with_rss=(python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:])
print("max RSS %.0f MiB" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
sys.exit(rc)')
  # GPT-2 XL's shape: start to the end of the first step (Note [Sharded initialisation]).
  step "zrt-train gpt 1.5B bf16, start to first step, cuda" 300 "${with_rss[@]}" "$bin/zrt-train" \
    --device cuda --preset gpt2-124m --n-layer 48 --n-embd 1600 --n-head 25 --dtype bf16 \
    --batch-size 1 --seq-len 1024 --steps 1 --log-every 1
  # A 6.7B GPT (32 x 4096, 32 heads, vocab 50304, 2048 positions) on one GPU:
  # its plan and the settings that fit the GPU, then three steps of the
  # cheapest of them, their mem_peak in the metrics against the plan's peak.
  gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2> /dev/null | head -1)
  fit_mib=$((${gpu_mib:-0} * 9 / 10))  # room for what the plan leaves out (cuBLAS, NCCL, CUDA)
  # The one rank's host memory (offloaded state): 8/10 of the machine's, room for the rest.
  host_mib=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 8 / 10 / 1024))
  big=(--device cuda --preset gpt2-124m --n-layer 32 --n-embd 4096 --n-head 32 --vocab-size 50304
    --seq-len 2048 --batch-size 1 --dtype bf16)
  plan_out=$summary_dir/gpt-6.7b-plan.txt
  step "zrt-train gpt 6.7B plan, --fit ${fit_mib}MiB --fit-host ${host_mib}MiB" 120 \
    bash -c '"${@:2}" | tee "$1"' _ "$plan_out" \
    "$bin/zrt-train" "${big[@]}" --plan --fit "${fit_mib}MiB" --fit-host "${host_mib}MiB"
  mkdir -p /tmp/zrt-scratch
  # Each listed setting: its reserved peak, its host memory (MiB), the flags.
  read -r -a fitting < <(grep -m1 -E '^ +[0-9.]+ +[0-9.]+ +--strategy' "$plan_out" 2> /dev/null |
    sed 's/^ *[0-9.]* *[0-9.]* *//; s|disk:DIR|disk:/tmp/zrt-scratch|')
  if [ ${#fitting[@]} -gt 0 ]; then
    step "zrt-train gpt 6.7B bf16, ${fitting[*]}, 3 steps, cuda" 420 "${with_rss[@]}" "$bin/zrt-train" \
      "${big[@]}" "${fitting[@]}" --steps 3 --log-every 1 --metrics "$summary_dir/gpt-6.7b-metrics.jsonl"
  else
    add_row "| zrt-train gpt 6.7B bf16 | skipped | 0 | no setting fits ${fit_mib} MiB |"
  fi
}

for stage in ${stages//,/ }; do "stage_$stage"; done
write_summary
cat "$summary"
exit $failed
