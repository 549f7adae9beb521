#!/usr/bin/env bash
# A rank killed (SIGKILL) in the middle of an `mpirun -np 4` run ends every
# rank with a non-zero exit within ZRT_COMM_TIMEOUT_S + 5 seconds: nothing
# hangs. A rank stopped (SIGSTOP) in an `mpirun -np 2` run, which mpirun does
# not notice, leaves the other to time out: it prints an error naming the
# stopped rank and the collective, and ends the job (MPI_Abort, never
# finalising through the stopped peer; Note [Ending after a timeout]) within
# ZRT_COMM_TIMEOUT_S + 15 seconds. A rank stopped in an `mpirun -np 3` run is
# named by the flight recorder's report before the job ends.
# usage: test_rank_killed.sh ZRT-TRAIN MPIEXEC
set -u
train=$1 mpiexec=$2
dir=$(mktemp -d)
victim= victims=
# mpirun's ranks too: a launcher killed with -9 leaves them running.
trap 'rm -rf "$dir"; kill -9 $victims $(jobs -p) 2> /dev/null' EXIT

# run_case SIGNAL RANKS TIMEOUT_S LIMIT_S [FLAGS...]: starts the run, sends SIGNAL to
# its last rank, and waits at most LIMIT_S for mpirun to exit non-zero with
# no rank left; leaves the output in $dir/out.txt, the seconds in $took and
# the signalled rank in $victim_rank.
run_case() {
  local signal=$1 ranks=$2 timeout_s=$3 limit=$4
  ZRT_COMM_TIMEOUT_S=$timeout_s "$mpiexec" --oversubscribe --allow-run-as-root -np "$ranks" \
    "$train" --steps 1000000 --log-every 1000000 "${@:5}" > "$dir/out.txt" 2>&1 &
  local launcher=$!
  # Wait until the ranks train (the first step's line: a rank stopped in
  # MPI_Init, before zrt's timeouts exist, would hang its peers there), then
  # signal one of them.
  for _ in $(seq 300); do
    victims=$(pgrep -f -- "$train --steps 1000000" | grep -v "^$launcher\$" || true)
    [ "$(wc -w <<<"$victims")" -ge "$ranks" ] && grep -q '^step' "$dir/out.txt" && break
    sleep 0.1
  done
  sleep 0.5
  victim=$(awk '{print $NF}' <<<"$(echo $victims)")
  [ -n "$victim" ] || { echo "FAIL: no rank process found"; exit 1; }
  victim_rank=$(tr '\0' '\n' < "/proc/$victim/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  kill -"$signal" "$victim"
  local start
  start=$(date +%s)
  while kill -0 "$launcher" 2> /dev/null; do
    if [ $(( $(date +%s) - start )) -gt "$limit" ]; then
      echo "FAIL: SIG$signal: still running ${limit}s after the signal"
      tr '\r' '\n' < "$dir/out.txt" | grep -v '^step' | tail -20
      exit 1
    fi
    sleep 0.2
  done
  wait "$launcher"; local rc=$?
  took=$(( $(date +%s) - start ))
  local left
  left=$(pgrep -f -- "$train --steps 1000000" | wc -l)
  [ "$rc" -ne 0 ] || { echo "FAIL: SIG$signal: mpirun exited 0"; exit 1; }
  [ "$left" -eq 0 ] || { echo "FAIL: SIG$signal: $left rank(s) still running"; exit 1; }
  echo "ok   rank $victim got SIG$signal: mpirun exited $rc after ${took}s, no rank left"
}

run_case KILL 4 10 15

# SIGSTOP: one rank of 2 stops; the other names it and the collective it waited in.
run_case STOP 2 5 20
error=$(grep "^zrt-train: error: " "$dir/out.txt")
[ -n "$error" ] || { echo "FAIL: SIGSTOP: no 'zrt-train: error' line"; tr '\r' '\n' < "$dir/out.txt" | grep -v '^step' | tail -20; exit 1; }
grep -q "waiting for rank ${victim_rank:-1}," <<<"$error" || { echo "FAIL: SIGSTOP: the error names no stopped rank: $error"; exit 1; }
grep -qE "#[0-9]+ on group world" <<<"$error" || { echo "FAIL: SIGSTOP: the error names no collective: $error"; exit 1; }
# One report of the failure, in its own words: no stream's prefix, no echo
# of it from destructors on the way out.
if grep -qE "error ignored in|CPU stream" "$dir/out.txt"; then
  echo "FAIL: SIGSTOP: the failure is reported again or wrapped:"; grep -E "error ignored in|CPU stream" "$dir/out.txt"; exit 1
fi
echo "ok   the survivor of a stopped rank: $error"

# SIGSTOP of rank 2 of 3: MPI cannot say which rank a collective waits for in
# a group of three; the flight recorder's report names it, printed before the
# job ends (Note [Flight report before the job ends]).
export ZRT_FLIGHT_RECORDER_DIR=$dir/flight
mkdir -p "$ZRT_FLIGHT_RECORDER_DIR"
run_case STOP 3 5 30 --batch-size 6
unset ZRT_FLIGHT_RECORDER_DIR
report=$(grep "^zrt-train: flight recorder" "$dir/out.txt")
grep -q "rank ${victim_rank:-2} left no record" <<<"$report" ||
  { echo "FAIL: SIGSTOP of 1 rank in 3: no report names rank ${victim_rank:-2}: ${report:-(no report)}"; tr '\r' '\n' < "$dir/out.txt" | grep -v '^step' | tail -20; exit 1; }
echo "ok   a stopped rank of 3 is named by the flight recorder: $report"
# The failed ranks mpirun then ends (SIGTERM) promise no step they will not
# finish; only the stopped one, woken by mpirun's SIGCONT and SIGTERM, may.
stops=$(grep -c "stop requested" "$dir/out.txt")
[ "$stops" -le 1 ] || { echo "FAIL: $stops ranks ending with the job said 'stop requested'"; exit 1; }
echo "ok   the failed ranks ended with the job say nothing of a stop ($stops line from the stopped one)"
