#!/usr/bin/env bash
# A rank killed (SIGKILL) in the middle of an `mpirun -np 4` run ends every
# rank with a non-zero exit within ZRT_COMM_TIMEOUT_S + 5 seconds: nothing
# hangs. usage: test_rank_killed.sh ZRT-TRAIN MPIEXEC
set -u
train=$1 mpiexec=$2
timeout_s=10
dir=$(mktemp -d)
trap 'rm -rf "$dir"; kill -9 $(jobs -p) 2> /dev/null' EXIT
ZRT_COMM_TIMEOUT_S=$timeout_s "$mpiexec" --oversubscribe --allow-run-as-root -np 4 \
  "$train" --steps 1000000 --log-every 1000000 > "$dir/out.txt" 2>&1 &
launcher=$!
# Wait until the ranks train, then kill one of them.
for _ in $(seq 100); do
  victims=$(pgrep -f -- "$train --steps 1000000" | grep -v "^$launcher\$" || true)
  [ "$(wc -w <<<"$victims")" -ge 4 ] && break
  sleep 0.1
done
sleep 1
victim=$(awk '{print $NF}' <<<"$(echo $victims)")
[ -n "$victim" ] || { echo "FAIL: no rank process found"; exit 1; }
kill -9 "$victim"
start=$(date +%s)
limit=$((timeout_s + 5))
while kill -0 "$launcher" 2> /dev/null; do
  if [ $(( $(date +%s) - start )) -gt $limit ]; then echo "FAIL: still running ${limit}s after the kill"; exit 1; fi
  sleep 0.2
done
wait "$launcher"; rc=$?
left=$(pgrep -f -- "$train --steps 1000000" | wc -l)
[ "$rc" -ne 0 ] || { echo "FAIL: mpirun exited 0"; exit 1; }
[ "$left" -eq 0 ] || { echo "FAIL: $left rank(s) still running"; exit 1; }
echo "ok   rank $victim killed: mpirun exited $rc after $(( $(date +%s) - start ))s, no rank left"
