// What zrt-train does to its checkpoint directory and metrics file so that a
// run never loses another run's work or its own: one run per directory (a
// lock naming its holder), steps of an abandoned trajectory set aside, and a
// resumed metrics file that holds each step once.
//
// Note [Resuming never loses work]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// - A --checkpoint-dir that holds steps is continued, never restarted: without
//   --resume, or with --resume but no `latest` naming one of its steps, the
//   run refuses to start (it would overwrite them at the same step numbers).
//   So does --resume PATH outside it when DIR's steps are another run's
//   (another model or seed): the rollback below and --keep-last would take
//   them for this run's. A copy of the run, or the job requeued, goes on.
// - One run at a time: the lead rank holds an flock on DIR/.zrt-run.lock for
//   the whole run, and writes its pid, host and start time into it; a second
//   run fails at once naming them. The kernel drops the lock when the holder
//   dies, so a killed run leaves nothing stale. On a filesystem without
//   locks the run goes on unguarded, with a warning.
// - Resuming step S when DIR holds newer steps (a rollback) moves those into
//   DIR/abandoned-from-S-<unix time>/: they stay on disk, but `latest`,
//   pruning (--keep-last) and the new run's saves of the same step numbers no
//   longer see them.
//   A resume refused (--steps below its step) or with nothing to train sets
//   nothing aside.
// - Only the names a run writes are its own: step-NNNNNN as step_dir_name
//   spells it (a copy named step-4 is the user's, never pruned or moved)
//   and .zrt-run.lock holding a lock's note. A user's file of either name
//   (weights copied as step-000001) makes the run refuse to start.
// - The metrics file of a resumed run keeps the lines of steps before S and
//   appends from S on, so every step appears once, in order, as the run that
//   produced the final weights computed it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zrt::train {

// Refuses (InvalidArgument) to start a run that would overwrite the steps
// DIR holds, or set aside or prune another run's when --resume names a
// checkpoint outside DIR (`resume_from`; empty: none) (Note [Resuming never
// loses work]).
void check_continues_checkpoint_dir(const std::string& dir, bool resume,
                                    const std::string& resume_from);

// Moves DIR's complete steps after `step` into DIR/abandoned-from-<step>-<time>/
// and points `latest` at `step` when DIR holds it (else at the newest step
// left, or removes it). With `including_step`, DIR's own `step` goes too:
// the run resumed a step of that number from elsewhere (an abandoned-from
// directory, another copy), so DIR's is of another trajectory, and the
// steps the run saves next must not sit beside it. Returns the steps moved.
std::vector<std::int64_t> set_aside_newer_steps(const std::string& dir, std::int64_t step,
                                                bool including_step = false);

// Drops the lines of a JSON-lines metrics file whose "step" is >= `step`,
// and a torn last line (no newline, not JSON),
// (atomically: a temporary file renamed over it). A file that does not exist
// or is not a regular file is left alone.
void truncate_metrics_at(const std::string& path, std::int64_t step);

}  // namespace zrt::train
