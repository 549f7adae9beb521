#!/usr/bin/env bash
# zrt-train when the system refuses a resource:
# - threads: under a thread limit below --ranks, the run ends with an error
#   naming the rank count and exit code 1 (no abort), promptly (the ranks
#   already started are stopped, not left waiting for the collective
#   timeout);
# - memory: a CPU run whose plan needs more than a memory control group's
#   limit is warned of before it starts; under an address-space limit a run
#   trains or names the limit, never spins;
# - disk space: --save and --checkpoint-dir on a filesystem with less free
#   space than they need are refused before training, naming the path and
#   the bytes needed and available, and nothing is written; a full one is
#   said to be full; a path on a
#   filesystem that stores no files (/proc) is refused as such;
# - a metrics line that cannot be written ends the run with its step kept
#   in a checkpoint.
# The thread limit is RLIMIT_NPROC (`ulimit -u`), which binds only non-root
# users: as root the run is made as `nobody` (setpriv). Small filesystems are
# tmpfs mounts in a private mount namespace (unshare -m), which needs root.
# A part whose limit cannot be set is skipped; exit 77 when nothing ran.
# usage: test_zrt_train_resources.sh PATH/TO/zrt-train
set -u
train=$(realpath "$1")
failures=0 ran=0
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
. "$(dirname "$0")/user_messages.sh"

# --- threads -----------------------------------------------------------------
# run_limited EXTRA ARGS...: zrt-train ARGS with room for EXTRA more threads
# than the user has now.
if [ "$(id -u)" = 0 ]; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups); else as_user=(); fi
run_limited() {
  local extra=$1; shift
  # shellcheck disable=SC2016
  "${as_user[@]}" bash -c 'used=0
    for f in /proc/[0-9]*/status; do  # the threads this user runs now, which the limit counts too
      uid= threads=
      { while read -r key value _; do
          case $key in Uid:) uid=$value ;; Threads:) threads=$value ;; esac
        done < "$f"; } 2> /dev/null
      [ "$uid" = "$(id -u)" ] && used=$((used + threads))
    done
    ulimit -u $((used + $1)) && shift && exec timeout 60 "$@"' _ "$extra" "$train" "$@" 2>&1
}
if ! "${as_user[@]}" test -x "$train"; then
  echo "skip threads: ${as_user[*]:-this user} cannot run $train"
else
  ran=1
  start=$SECONDS
  out=$(ZRT_CPU_THREADS=1 run_limited 6 --ranks 64 --batch-size 64 --seq-len 8 --steps 2); rc=$?
  took=$((SECONDS - start))
  if [ $rc -ne 1 ]; then
    fail "threads: exit code $rc, not 1 (124: hung; 134: aborted): $out"
  elif ! grep -qE "starting 64 local ranks: the system refused the thread of rank [1-9][0-9]* \(" <<<"$out"; then
    fail "threads: the message does not name the rank count and a started rank: $out"
  elif [ $took -gt 20 ]; then
    fail "threads: took $took s: the started ranks waited for the collective timeout"
  elif shows_source threads "$out"; then failures=$((failures + 1))
  else
    echo "ok   threads: $(grep -m1 error <<<"$out") (${took} s)"
  fi
  # The same limit leaves room for a run that fits in it.
  out=$(ZRT_CPU_THREADS=1 run_limited 6 --ranks 2 --steps 2); rc=$?
  [ $rc -eq 0 ] && echo "ok   threads: --ranks 2 runs under the same limit" || fail "threads: --ranks 2 under the limit: exit $rc: $out"
fi

# --- memory ------------------------------------------------------------------
# A CPU run whose memory plan needs more than the memory it may use (here a
# control group's limit) is warned of before it starts: the system kills
# such a run rather than refuse it an allocation. One that fits is not.
# The control group is a memory cgroup (v1 or v2) made here, which needs root.
mem_cg=
for parent in /sys/fs/cgroup/memory /sys/fs/cgroup; do
  [ -w "$parent" ] || continue
  cg=$parent/zrt-test-$$
  mkdir "$cg" 2> /dev/null || continue
  if echo 200M > "$cg/memory.limit_in_bytes" 2> /dev/null || echo 200M > "$cg/memory.max" 2> /dev/null; then
    mem_cg=$cg; break
  fi
  rmdir "$cg"
done
if [ -z "$mem_cg" ]; then
  echo "skip memory: cannot make a memory control group here"
else
  ran=1
  in_cgroup() { bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec timeout 60 "$@"' _ "$mem_cg" "$train" "$@" 2>&1; }
  out=$(in_cgroup --steps 1 --batch-size 512 --seq-len 128)  # plans 352 MiB; killed or not
  if grep -qE "warning: this run's memory plan needs 35[0-9].[0-9] MiB on this machine \(1 rank\(s\) at their peaks\), more than the 200.0 MiB available: the system may kill it; the same flags with --plan show" <<<"$out" &&
    [ "$(grep -n "memory plan needs" <<<"$out" | cut -d: -f1)" = 1 ]; then
    echo "ok   a plan above the memory limit is warned of first: $(grep -m1 "memory plan" <<<"$out")"
  else
    fail "memory: no warning before the run: $out"
  fi
  out=$(in_cgroup --steps 1); rc=$?
  [ $rc -eq 0 ] && ! grep -q "memory plan needs" <<<"$out" && echo "ok   a run that fits the memory limit trains without the warning" ||
    fail "memory: a fitting run: exit $rc: $out"
  # Local ranks share one data set (48 MiB of tokens here): counted once, it fits.
  text=$(mktemp)
  head -c 9000000 /dev/urandom | base64 -w 100 | head -c 12000000 > "$text"
  out=$(in_cgroup --steps 1 --ranks 4 --data "$text"); rc=$?
  [ $rc -eq 0 ] && ! grep -q "memory plan needs" <<<"$out" && echo "ok   four local ranks count their one data set once" ||
    fail "memory: four ranks with one data set: exit $rc: $out"
  rm -f "$text"
  rmdir "$mem_cg"
fi

# --- address space -----------------------------------------------------------
# Under an address-space limit (ulimit -v; Note [Address-space limit]) a run
# trains or ends with an error naming the limit, never spins: OpenBLAS's
# 128 MiB buffer per calling thread, once retried forever when it did not fit
# (Note [OpenBLAS loaded on first use]). The limits are set above what the
# program's own libraries map (by bisection on --help, with no OpenBLAS
# workers): where no buffer fits, where some do, and batches that do not fit.
# Sanitizers reserve terabytes of shadow memory: skipped under them.
if nm -D "$train" 2>/dev/null | grep -qE "__(asan|tsan)_init"; then
  echo "skip address space: $train is built with a sanitizer"
else
  ran=1
  lo=0 hi=$((8 << 20))  # KiB
  while [ $((hi - lo)) -gt 4096 ]; do
    mid=$(((lo + hi) / 2))
    if (ulimit -v $mid && OPENBLAS_NUM_THREADS=1 timeout -s KILL 10 "$train" --help > /dev/null 2>&1); then hi=$mid; else lo=$mid; fi
  done
  for extra_mib in 160 400 900; do
    out=$(ulimit -v $((hi + extra_mib * 1024)) && MALLOC_ARENA_MAX=2 timeout -s KILL 60 "$train" --threads 2 --steps 2 --batch-size 4 --seq-len 32 2>&1); rc=$?
    if [ $rc -eq 0 ] && grep -q "step     2/2" <<<"$out"; then
      echo "ok   address space: trains at $extra_mib MiB above the program's own"
    elif [ $rc -eq 1 ] && grep -q "(ulimit -v)" <<<"$out" && ! shows_source "address space" "$out"; then
      echo "ok   address space: at $extra_mib MiB above the program's own: $(grep -m1 error <<<"$out")"
    else
      fail "address space at $extra_mib MiB above the program's own: exit code $rc (137: it spun): $(tail -n3 <<<"$out")"
    fi
  done
  # OpenBLAS asked for: refused, naming the limit, where no buffer fits;
  # trains with two callers' buffers mapped where they do.
  out=$(ulimit -v $((hi + 160 * 1024)) && ZRT_CPU_GEMM=openblas timeout -s KILL 60 "$train" --threads 2 --steps 2 2>&1); rc=$?
  [ $rc -eq 2 ] && grep -q "ZRT_CPU_GEMM=openblas: OpenBLAS needs 128 MiB of address space for each thread that multiplies.*(ulimit -v)" <<<"$out" &&
    echo "ok   address space: ZRT_CPU_GEMM=openblas where no buffer fits: exit 2, the limit named" ||
    fail "address space: ZRT_CPU_GEMM=openblas at 160 MiB: exit code $rc: $(tail -n2 <<<"$out")"
  out=$(ulimit -v $((hi + 900 * 1024)) && ZRT_CPU_GEMM=openblas MALLOC_ARENA_MAX=2 timeout -s KILL 60 "$train" --threads 2 --ranks 2 --steps 2 --batch-size 8 --seq-len 32 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "step     2/2" <<<"$out" &&
    echo "ok   address space: ZRT_CPU_GEMM=openblas trains two ranks of two threads at 900 MiB above the program's own" ||
    fail "address space: ZRT_CPU_GEMM=openblas at 900 MiB: exit code $rc: $(tail -n2 <<<"$out")"
  # A batch whose logits alone do not fit is refused before the run; one
  # whose activations do not fit ends in an out-of-memory error. Both name
  # the limit, and the error says to raise it.
  out=$(ulimit -v $((hi + 400 * 1024)) && MALLOC_ARENA_MAX=2 timeout -s KILL 60 "$train" --threads 2 --steps 1 --batch-size 4096 --seq-len 256 2>&1); rc=$?
  if [ $rc -eq 1 ] && grep -q "is available (what the address-space limit of [0-9]* MiB (ulimit -v), [0-9]* MiB of it used leaves). Use a higher ulimit -v" <<<"$out" &&
    ! shows_source "address space" "$out"; then
    echo "ok   address space: a batch beyond the limit is refused first: $(grep -m1 -o "but .* leaves)" <<<"$out")"
  else
    fail "address space: a batch beyond the limit: exit code $rc: $(tail -n3 <<<"$out")"
  fi
  out=$(ulimit -v $((hi + 400 * 1024)) && MALLOC_ARENA_MAX=2 timeout -s KILL 60 "$train" --threads 2 --steps 1 --batch-size 512 --seq-len 256 2>&1); rc=$?
  if [ $rc -eq 1 ] && grep -q "error: .*(ulimit -v)" <<<"$out" && ! shows_source "address space" "$out" &&
    { ! grep -q "out of memory" <<<"$out" || grep -q "hint: raise the limit it names" <<<"$out"; }; then
    echo "ok   address space: activations beyond the limit: $(grep -m1 -o "this process is under.*\|but .* leaves)" <<<"$out")"
  else
    fail "address space: activations beyond the limit: exit code $rc: $(tail -n3 <<<"$out")"
  fi
fi

# --- disk space --------------------------------------------------------------
# A virtual filesystem stores no files: said so as the flags are read (a
# usage error, exit code 2), not as a lack of space.
out=$("$train" --steps 1 --save /proc/zrt-w.safetensors 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q -- "--save /proc/zrt-w.safetensors: /proc is on a virtual filesystem that stores no files" <<<"$out" &&
  ! shows_source "--save under /proc" "$out"; then
  echo "ok   --save under /proc: $(grep -m1 error <<<"$out")"
  ran=1
else
  fail "--save under /proc: exit code $rc: $out"
fi
# ... and a trace there, before the run rather than after it.
out=$(timeout 60 "$train" --steps 200 --ranks 2 --trace /sys/zrt-t.json 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q -- "--trace (rank 0's) /sys/zrt-t.rank-0.json: /sys is on a virtual filesystem" <<<"$out" &&
  ! grep -q "^step" <<<"$out"; then
  echo "ok   --trace under /sys: $(grep -m1 error <<<"$out")"
else
  fail "--trace under /sys: exit code $rc: $out"
fi
# A metrics line that cannot be written (/dev/full: no space) ends the run
# after the step it reports, and that step is kept: its checkpoint is
# written, and the run continues from it with --resume.
if [ -w /dev/full ]; then
  ran=1
  mdir=$(mktemp -d)
  out=$(timeout 60 "$train" --steps 3 --checkpoint-dir "$mdir/ck" --metrics /dev/full 2>&1); rc=$?
  if [ $rc -ne 1 ]; then
    fail "--metrics /dev/full: exit code $rc, not 1: $out"
  elif ! grep -qE -- "writing the metrics file /dev/full failed: No space left on device; the run stopped after step 1 of 3 and wrote its checkpoint into $mdir/ck: continue with --resume" <<<"$out"; then
    fail "--metrics /dev/full: the message does not say the step was kept: $out"
  elif [ ! -d "$mdir/ck/step-000001" ]; then
    fail "--metrics /dev/full: no checkpoint of step 1 in $mdir/ck: $(ls "$mdir/ck")"
  elif ! out2=$(timeout 60 "$train" --steps 3 --checkpoint-dir "$mdir/ck" --resume 2>&1) ||
    ! grep -q "step     3/3" <<<"$out2"; then
    fail "--metrics /dev/full: the resumed run did not finish: $out2"
  elif shows_source "--metrics /dev/full" "$out"; then failures=$((failures + 1))
  else
    echo "ok   --metrics /dev/full: $(grep -m1 error <<<"$out")"
  fi
  out=$(timeout 60 "$train" --steps 3 --metrics /dev/full 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "the run stopped after step 1 of 3 (without --checkpoint-dir nothing of it is kept)" <<<"$out" &&
    echo "ok   --metrics /dev/full without --checkpoint-dir says nothing is kept" ||
    fail "--metrics /dev/full without --checkpoint-dir: exit code $rc: $out"
  rm -rf "$mdir"
fi
space_cases() {  # inside a private mount namespace: the mounts end with it
  for kib in 64 256 512; do
    mkdir "$dir/fs$kib" && mount -t tmpfs -o "size=${kib}k" tmpfs "$dir/fs$kib" || return 2
  done
  # refused NAME PATTERN ARGS...: exit code 1, a message matching PATTERN, no file written.
  refused() {
    local name=$1 pattern=$2; shift 2
    local out rc
    out=$("$train" --steps 2 "$@" 2>&1); rc=$?
    if [ $rc -ne 1 ]; then fail "$name: exit code $rc, not 1: $out"; return; fi
    if ! grep -qE -- "$pattern" <<<"$out"; then fail "$name: message does not match /$pattern/: $out"; return; fi
    if [ -n "$(find "$dir"/fs* -type f)" ] || [ -n "$(find "$dir"/fs* -name 'step-*')" ]; then
      fail "$name: wrote $(find "$dir"/fs* -mindepth 1)"; return
    fi
    shows_source "$name" "$out" && { failures=$((failures + 1)); return; }
    echo "ok   $name: $(grep -m1 error <<<"$out")"
  }
  refused "--save on a 64 KiB filesystem" \
    "not enough free disk space: --save $dir/fs64/w.safetensors needs [0-9]+ bytes, but the filesystem of $dir/fs64 has 65536 bytes available" \
    --save "$dir/fs64/w.safetensors"
  refused "--checkpoint-dir on a 256 KiB filesystem" \
    "--checkpoint-dir $dir/fs256/ck needs [0-9]+ bytes, but the filesystem of $dir/fs256/ck has 262144 bytes available" \
    --checkpoint-dir "$dir/fs256/ck"
  rmdir "$dir/fs256/ck"  # check_checkpoint_dir creates it, empty
  # The moments' scratch file shares the disk with the other outputs.
  refused "--offload-optimizer disk on a 256 KiB filesystem" \
    "--offload-optimizer $dir/fs256 needs [0-9]+ bytes, but the filesystem of $dir/fs256 has 262144 bytes available" \
    --offload-optimizer "disk:$dir/fs256"
  refused "--save and --checkpoint-dir that fit apart but not together" \
    "--save $dir/fs512/w.safetensors \([0-9]+ bytes\) and --checkpoint-dir $dir/fs512/ck \([0-9]+ bytes\) together need [0-9]+ bytes" \
    --save "$dir/fs512/w.safetensors" --checkpoint-dir "$dir/fs512/ck"
  rmdir "$dir/fs512/ck"
  # A full filesystem is said to be full, not unwritable.
  mkdir "$dir/full" && mount -t tmpfs -o size=64k tmpfs "$dir/full" || return 2
  head -c 1M /dev/zero > "$dir/full/filler" 2> /dev/null
  local full
  full=$("$train" --steps 2 --checkpoint-dir "$dir/full/ck" 2>&1)
  if grep -q -- "not enough free disk space: --checkpoint-dir $dir/full/ck: its filesystem has no room for a file" <<<"$full"; then
    echo "ok   --checkpoint-dir on a full filesystem: $(grep -m1 error <<<"$full")"
  else
    fail "--checkpoint-dir on a full filesystem: $full"
  fi
  # Where it fits, it runs, and the estimate is close to what is written.
  local out needed written
  out=$("$train" --steps 1 --save "$dir/fs256/w.safetensors" 2>&1) || fail "--save on 256 KiB: $out"
  needed=$("$train" --steps 1 --save "$dir/fs64/w.safetensors" 2>&1 | sed -nE 's/.* needs ([0-9]+) bytes.*/\1/p')
  written=$(stat -c %s "$dir/fs256/w.safetensors" 2>/dev/null || echo 0)
  if [ "${needed:-0}" -lt "$written" ] || [ "${needed:-0}" -gt $((written + written / 20)) ]; then
    fail "--save estimate: needs ${needed:-?} bytes, wrote $written"
  else
    echo "ok   --save estimate: needs $needed bytes, wrote $written"
  fi
}
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  export -f space_cases fail shows_source
  export train dir
  out=$(unshare -m bash -c 'failures=0; space_cases; rc=$?; echo "failures=$failures"; exit $rc' 2>&1); rc=$?
  echo "$out" | grep -v '^failures='
  if [ $rc -eq 2 ]; then
    echo "skip disk space: cannot mount a tmpfs"
  else
    ran=1
    failures=$((failures + $(sed -n 's/^failures=//p' <<<"$out")))
  fi
else
  echo "skip disk space: needs root for private tmpfs mounts"
fi

[ $ran -eq 1 ] || exit 77
echo "$failures failed"
[ $failures -eq 0 ]
