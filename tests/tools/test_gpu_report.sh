#!/usr/bin/env bash
# tools/gpu_report.py on saved outputs of the GPU tools, without a GPU.
# sanitizer: NCCL's kernel probes (test_comm_gpu under memcheck on the first
# GPU run) read as library-internal and the run as clean; a log that mixes
# them with zrt's own errors (an API call of zrt's, a kernel's bad read, a
# caller not named) counts those as zrt's and fails, in both frame formats;
# errors the summary counts but no record shows are zrt's; no summary is
# exit 2. kernels: ncu's per-kernel summary (launch configurations of one
# name merged, units and thousands separators read) and its CSV per launch
# give the documented table; a time under no heading, a summary with no
# invocation count and a log without times are refused. --run: the command's
# output goes to the log and its failure is the exit code.
# usage: test_gpu_report.sh PYTHON SOURCE-DIR
set -u
python=$1 src=$2
report=$src/tools/gpu_report.py
data=$src/tests/tools/gpu_report
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

expect() {  # expect RC SUBSTRING ARGS...: gpu_report.py ARGS exits RC and prints SUBSTRING
  local want_rc=$1 want=$2 out rc
  shift 2
  out=$("$python" "$report" "$@" 2>&1)
  rc=$?
  [ "$rc" = "$want_rc" ] || fail "gpu_report.py $*: exit $rc, not $want_rc: $out"
  [[ $out == *"$want"* ]] || fail "gpu_report.py $*: no '$want' in: $out"
  echo "ok   $* -> $rc"
  last=$out
}

probes="cudaErrorNoKernelImageForDevice from cudaFuncGetAttributes in libnccl.so.2"
expect 0 "compute-sanitizer: 0 error(s) in zrt, 16 library-internal (API errors inside \
libraries zrt only calls: 16 $probes)" sanitizer "$data/sanitizer-nccl-probes.txt"
expect 1 "compute-sanitizer: 3 error(s) in zrt, 3 library-internal (API errors inside \
libraries zrt only calls: 2 $probes; 1 cudaErrorInvalidValue from cudaFuncSetAttribute in \
libcublasLt.so.13)" sanitizer "$data/sanitizer-mixed.txt"
expect 0 "compute-sanitizer: 0 error(s) in zrt, 0 library-internal" \
  sanitizer "$data/sanitizer-clean.txt"
expect 2 "no ERROR SUMMARY" sanitizer "$data/sanitizer-truncated.txt"
sed 's/ERROR SUMMARY: 16 errors/ERROR SUMMARY: 17 errors/' "$data/sanitizer-nccl-probes.txt" \
  > "$dir/unread.txt"
expect 1 "1 error(s) in zrt, 16 library-internal" sanitizer "$dir/unread.txt"

table=$dir/table.txt
expect 0 "total kernel time 133.8 ms (2 steps), 66.9 ms per step, 4 kernels" \
  kernels --steps 2 --title "zrt-train, 2 steps" --out "$table" "$data/ncu-per-kernel.txt"
want_rows=(
  " 88.8%     59.400 ms/step  n=   24  avg     4950.0 us  void zrt::<unnamed>::attention_backw"
  " 10.0%      6.664 ms/step  n=    2  avg     6664.4 us  void cutlass::Kernel2<"
  "  1.1%      0.769 ms/step  n=   76  avg       20.2 us  void zrt::for_each_pack_kernel<4, zrt::"
  "  0.1%      0.047 ms/step  n=   26  avg        3.6 us  zrt::<unnamed>::norm_final_kernel("
)
[ "$(head -1 "$table")" = "zrt-train, 2 steps" ] || fail "--out: no title line: $(head -1 "$table")"
for i in "${!want_rows[@]}"; do
  row=$(sed -n "$((i + 3))p" "$table")
  [[ $row == "${want_rows[$i]}"* ]] || fail "row $((i + 1)): '$row', not '${want_rows[$i]}...'"
done
[ "$(wc -l < "$table")" = 6 ] || fail "--out holds $(wc -l < "$table") lines, not 6"
echo "ok   the table's rows, in order"
expect 0 " 99.9%      3.000 ms/step  n=    2  avg     3000.0 us  void zrt::<unnamed>::atten" \
  kernels --steps 2 "$data/ncu-launches.csv"
[[ $last == *"  0.1%      0.002 ms/step  n=    2  avg        2.0 us  void zrt::for_each_pack"* ]] ||
  fail "CSV: the fill kernel's row is missing: $last"
grep -v "Invocations\|norm_final" "$data/ncu-per-kernel.txt" > "$dir/headless.txt"
expect 1 "a kernel time under no kernel's heading" kernels --steps 2 "$dir/headless.txt"
sed 's/, Invocations [0-9]*//' "$data/ncu-per-kernel.txt" > "$dir/uncounted.txt"
expect 1 "without its number of invocations" kernels --steps 2 "$dir/uncounted.txt"
expect 2 "no gpu__time_duration.sum per kernel" kernels --steps 2 "$data/sanitizer-clean.txt"
expect 2 "--steps must be positive" kernels --steps 0 "$data/ncu-per-kernel.txt"

expect 0 "0 error(s) in zrt, 16 library-internal" \
  sanitizer "$dir/run.log" -- cat "$data/sanitizer-nccl-probes.txt"
cmp -s "$dir/run.log" "$data/sanitizer-nccl-probes.txt" || fail "--run: the log is not the output"
[[ $last == *"========= ERROR SUMMARY: 16 errors"* ]] || fail "--run: the output was not shown"
expect 3 "bash exited with 3" \
  sanitizer "$dir/run.log" -- bash -c "cat '$data/sanitizer-clean.txt'; exit 3"
expect 3 "total kernel time" \
  kernels --steps 2 "$dir/run.log" -- bash -c "cat '$data/ncu-per-kernel.txt'; exit 3"
echo "all gpu_report checks passed"
