// What zrt-train does with the flight recorder when a collective fails
// (Note [Flight recorder]): every rank writes its ring, and rank 0 reads
// them all and says where each rank is.
#pragma once

#include <mutex>

#include "tools/train/train_options.h"
#include "zrt/runtime/comm/communicator.h"

namespace zrt::train {

// Where the rank files go: ZRT_FLIGHT_RECORDER_DIR, else the directory of
// --trace, else (local ranks, one process) a directory of this process
// under the system's temporary directory; "" when none applies (ranks of a
// launcher without a shared directory named), and each rank then prints
// only where it is itself.
std::string flight_record_dir(const TrainOptions& o);

// Removes this rank's record of an earlier run from flight_record_dir, so
// that a report never reads it as this run's. Call at the start of a run.
void forget_flight_record(const TrainOptions& o, int rank) noexcept;

// After `world` failed on this rank: writes this rank's ring and, on rank 0,
// prints the report of every rank's (waiting a few seconds for the others)
// to stderr. `job_ends_after`: this rank ends the whole job next (mpirun,
// Note [Ending after a timeout]); the other ranks then wait for rank 0's
// report first, and report in its place when it does not come (Note
// [Flight report before the job ends]). Never throws: the failure being
// reported comes first.
void report_flight(const Communicator& world, const TrainOptions& o, std::mutex& io,
                   bool job_ends_after) noexcept;

// Removes this process's own rank-file directory (local ranks with no other
// directory named) once every rank of the process has ended: a rank that
// reports after rank 0's wait would otherwise leave it behind.
void remove_process_flight_dir(const TrainOptions& o) noexcept;

}  // namespace zrt::train
