#!/usr/bin/env bash
# Sanitizer runs of the CPU code (-DZRT_CUDA=OFF), each stage in its own
# build directory; any report fails the run. CI (.ci/run) runs `all`.
#
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/
#         (ZRT_ASAN_BUILD_DIR): the unit and mpi suites (soak excluded).
#         Leaks are checked in one process and in the MPI backend's suite;
#         what OpenMPI keeps allocated at exit is suppressed by library in
#         tools/sanitizers/lsan.supp.
#   tsan  ThreadSanitizer into build-tsan/ (ZRT_TSAN_BUILD_DIR), without MPI:
#         the suites that run ranks as threads (local backend; five long
#         sweeps left out) and zrt-train --ranks 4 (once with CPU streams,
#         activation checkpointing and AdamW state on disk).
#
# Only the programs the suites run are built (no gpu suites).
# usage: tools/sanitize.sh [asan|tsan|all]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case $what in asan | tsan | all) ;; *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;; esac
./tools/setup.sh test --deps-only
jobs=$(nproc)
supp=$PWD/tools/sanitizers
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The suites' scratch files (TMPDIR) on a tmpfs when one has room and TMPDIR
# is not set: checkpoints are fsynced file by file, and on a disk those waits
# were most of test_checkpoint_index's time (17.8 s against 3.4 s on
# /dev/shm), time no sanitizer needs. The README's test command (CI's first
# stage) keeps the disk, so fsync's real waits stay tested.
scratch_on_tmpfs() {
  local shm=/dev/shm
  [ -z "${TMPDIR:-}" ] && [ -d "$shm" ] && [ -w "$shm" ] || return 0
  [ "$(stat -f -c %T "$shm")" = tmpfs ] || return 0
  [ "$(df -P -k "$shm" | awk 'NR == 2 { print $4 }')" -ge $((4 * 1024 * 1024)) ] || return 0
  TMPDIR=$(mktemp -d "$shm/zrt-sanitize.XXXXXX") || return 0
  export TMPDIR
  trap 'rm -rf "$TMPDIR"' EXIT
  echo "tools/sanitize.sh: scratch files in $TMPDIR"
}
scratch_on_tmpfs

# configure_and_build DIR SANITIZERS OPT [CMAKE_ARGS...] -- TARGETS...
# OPT: the optimisation level of all but the kernels' CPU twins, which keep
# -O1 (ZRT_KERNEL_OPT); -g1: line tables for the reports. Unity builds: each
# target's sources compiled a batch at a time, their headers parsed once per
# batch (the ASan build took 470 s instead of 620, TSan's 196 instead of
# about 290, on two cores); the README's build, CI's first stage, compiles
# file by file, so each source still proves it includes what it uses. Two
# files of one target must not define one name in an anonymous namespace.
configure_and_build() {
  local dir=$1 sanitizers=$2 opt=$3 args=()
  shift 3
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  cmake -S . -B "$dir" -G Ninja -DZRT_CUDA=OFF -DZRT_SANITIZE="$sanitizers" -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_CXX_FLAGS="$opt -g1" -DCMAKE_UNITY_BUILD=ON "${args[@]}" > /dev/null
  cmake --build "$dir" -j "$jobs" --target "$@"
}

asan() {
  local build=${ZRT_ASAN_BUILD_DIR:-build-asan}
  # -Og: half the compile time of -O1 under ASan and UBSan, and the suites
  # run as fast (their time is in the kernels).
  configure_and_build "$build" address,undefined -Og -- zrt-test-programs
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LSAN_OPTIONS=suppressions=$supp/lsan.supp
  # test_install_consumer builds a program against the installed package,
  # which would need the sanitizer flags too.
  # Unit tests that start mpirun themselves are labelled `launcher`.
  # Label `sources`: checks of the sources and scripts that run no zrt code.
  # zrt-bench's suites time the library calls the suites make (it is not
  # built). test_zrt_train_memory's dozen zrt-train runs (87 s of the run)
  # weigh the peaks they measure against the plan: the engine, plan, --fit
  # sweep and offload code that test_memory_plan,
  # test_activation_checkpointing and test_optimizer_offload run in-process;
  # of zrt-train's own code it alone runs the printing of the plan and of
  # the settings that fit. Two engine sweeps are left out: early
  # gathers with AdamW's moments on disk (its disk buffers are
  # test_optimizer_offload's, its gathers the in-memory sweep's; a tenth of
  # the stage) and the three
  # quantized collectives' (their buffers are test_flat_param_handle's
  # quantized_* cases', every strategy in int8 and int4).
  local sweeps='!engine_equivalence/gathering_after_the_update_with_moments_on_disk_changes_no_number'
  sweeps+=':!engine_equivalence/int8_parameter_gather_trains_close_and_repeats'
  sweeps+=':!engine_equivalence/int8_gradient_reduction_trains_close_and_repeats'
  sweeps+=':!engine_equivalence/int4_gradient_reduction_trains_close_and_repeats'
  ASAN_OPTIONS=detect_leaks=1 BOOST_TEST_RUN_FILTERS=$sweeps \
    ctest --test-dir "$build" --output-on-failure -j "$jobs" -L unit -LE "launcher|sources" \
    -E "^(test_install_consumer|test_engine_equivalence_async|test_zrt_bench_(train|suites)|test_zrt_train_memory)\$"
  # The equivalences with the compute on a CPU stream of its own (it keeps
  # both cores busy alone) without the early gathers too, whose buffers the
  # run above checked and whose waits are the other cases'.
  local early='!engine_equivalence/gathering_after_the_update_changes_no_number'
  early+=':!engine_equivalence/gathering_after_the_update_on_four_ranks_changes_no_number'
  ASAN_OPTIONS=detect_leaks=1 BOOST_TEST_RUN_FILTERS="$sweeps:$early" \
    ctest --test-dir "$build" --output-on-failure -R "^test_engine_equivalence_async\$"
  # The mpi suites (named *_npN) and the tests that start mpirun themselves.
  # Leaks are checked in the MPI backend's own suite, test_comm_mpi, with
  # allocation stacks unwound fully (slow): the fast unwinder stops inside
  # OpenMPI's plugins, where lsan.supp cannot name them. The other suites run
  # code that the unit suites already check for leaks in one process.
  ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 ctest --test-dir "$build" --output-on-failure -j "$jobs" \
    -R "^test_comm_mpi_np"
  # In one run, so the launcher tests' waits overlap the mpi suites' work.
  # test_ranks_agree compares zrt-train's numbers across launchers: the mpi
  # suites run its code. test_engine_mpi_np* train every strategy over MPI
  # as test_engine_equivalence does over the local backend (checked above),
  # with the collectives over MPI that test_comm_mpi, test_flat_param_handle_mpi
  # and test_zero_adamw_mpi check (they were a third of this run's time).
  # test_zrt_checkpoint's random kills: 5 of each kind (one resumes), not 10.
  ASAN_OPTIONS=detect_leaks=0 CKPT_KILL_TRIALS=5 ctest --test-dir "$build" --output-on-failure -j "$jobs" \
    -L "mpi|launcher" -LE soak -E "^(test_comm_mpi_np[0-9]+|test_ranks_agree|test_engine_mpi_np[0-9]+)\$"
}

tsan() {
  local build=${ZRT_TSAN_BUILD_DIR:-build-tsan}
  local suites=(test_comm_local test_comm_tcp_rendezvous test_caching_allocator_users test_flat_param_handle
                test_zero_adamw test_engine_equivalence test_checkpoint test_activation_checkpointing
                test_optimizer_offload test_consistency_check test_flight_recorder test_comm_watchdog test_memory_plan
                test_background_checkpoint test_tied_across_units test_head_unit test_zero_module)
  # -O1: at -Og, with every load and store kept, TSan ran the suites up to
  # 60% slower.
  configure_and_build "$build" thread -O1 -DZRT_MPI=OFF -- "${suites[@]}" zrt-train
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  # Sweeps that repeat, at TSan's tens-fold slowdown, thread interplay the
  # rest covers:
  # - the gpt equivalence sweep (mlp's sweeps the same strategies, world
  #   sizes and micro-batches; checkpoint cases and zrt-train run gpt on 2-4
  #   ranks);
  # - the 4-rank resume sweep (reshard_on_load saves and resumes across rank
  #   counts and strategies), and the resumes of bf16 AdamW state and of
  #   f16's loss scaler (what they save is in another dtype; their saves,
  #   loads and disk moments are the other resume cases');
  # - the three quantized-collective sweeps (every strategy in two dtypes,
  #   three runs each: the collectives' threads are the unquantized ones';
  #   zrt-train runs them once below);
  # - the early gathers on 1-3 ranks (the 4-rank case, which runs, sweeps
  #   every strategy and variant with the most threads and checks that the
  #   engine gathers early) and with the moments on disk (zrt-train runs
  #   them below with --cpu-streams all);
  # - the memory plan's checks against many real steps (the allocator's
  #   threads are test_caching_allocator_users', and zrt-train --plan
  #   --ranks 4 below plans on four threads).
  local sweeps='!engine_equivalence/gpt_matches_one_rank:!checkpoint/resume_is_bit_exact'
  sweeps+=':!checkpoint/bf16_optimizer_state_resumes_into_either_state_dtype'
  sweeps+=':!checkpoint/resume_keeps_the_loss_scaler'
  sweeps+=':!engine_equivalence/int8_parameter_gather_trains_close_and_repeats'
  sweeps+=':!engine_equivalence/int8_gradient_reduction_trains_close_and_repeats'
  sweeps+=':!engine_equivalence/int4_gradient_reduction_trains_close_and_repeats'
  sweeps+=':!engine_equivalence/gathering_after_the_update_changes_no_number'
  sweeps+=':!engine_equivalence/gathering_after_the_update_with_moments_on_disk_changes_no_number'
  sweeps+=':!memory_plan/the_reserved_peak_covers_the_steps_after_the_plan'
  sweeps+=':!memory_plan/steady_steps_make_no_raw_allocation'
  sweeps+=':!memory_plan/plans_every_step_of_every_rank_within_five_percent'
  export BOOST_TEST_RUN_FILTERS=$sweeps
  local regex
  regex="^($(IFS='|'; echo "${suites[*]}"))\$"
  ctest --test-dir "$build" --output-on-failure -j "$jobs" -R "$regex"
  # Every strategy at prefetch 0, 1 and 2 on 4 local ranks, in each CPU
  # stream mode (Note [Streams of a CPU module]; comm, the default, ran above):
  # the gathers, reductions and compute of a rank on their own threads.
  local streams
  for streams in none all; do
    echo "every strategy at prefetch 0, 1, 2 with ZRT_CPU_STREAMS=$streams under ThreadSanitizer"
    ZRT_CPU_STREAMS=$streams env -u BOOST_TEST_RUN_FILTERS "$build/tests/model_zoo/engine/test_engine_equivalence" \
      --run_test=engine_equivalence/prefetch_depth_changes_no_number
  done
  echo "zrt-train --ranks 4 under ThreadSanitizer"
  "$build/tools/train/zrt-train" --ranks 4 --steps 3 --batch-size 8 --micro-batches 2 --log-every 1
  # ... with int8 gathers and int4 reductions, prefetching.
  "$build/tools/train/zrt-train" --ranks 4 --steps 3 --batch-size 8 --log-every 1 --dtype bf16 \
    --gather-dtype int8 --reduce-dtype int4 --prefetch 2 --strategy hybrid --zero3-size 2
  # ... with the compute asynchronous too, recomputed blocks, AdamW's
  # moments streamed from disk by I/O threads, a consistency check, and
  # checkpoints written in the background while the steps go on.
  local scratch
  scratch=$(mktemp -d)
  mkdir "$scratch/moments"
  "$build/tools/train/zrt-train" --ranks 4 --steps 3 --batch-size 8 --micro-batches 2 --log-every 1 \
    --cpu-streams all --prefetch 2 --strategy hybrid --zero3-size 2 --activation-checkpointing every:2 \
    --offload-optimizer "disk:$scratch/moments" --check-consistency 1 \
    --checkpoint-dir "$scratch/ck" --checkpoint-every 1 --checkpoint-async
  rm -rf "$scratch"
  # The memory plan: 4 ranks of dry steps as threads (Note [Dry runs]).
  "$build/tools/train/zrt-train" --plan --ranks 4 --batch-size 8 --micro-batches 2 --strategy hybrid --zero3-size 2
}

stage() {
  local start=$SECONDS
  "$1"
  echo "tools/sanitize.sh: $1 stage took $((SECONDS - start)) s"
}
case $what in
  all) stage asan; stage tsan ;;
  *) stage "$what" ;;
esac
