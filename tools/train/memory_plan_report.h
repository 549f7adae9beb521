// zrt-train --plan and --plan --fit BYTES: the memory plan of the run the
// flags describe (Note [Memory plan] in model_zoo/trainer/memory_plan.h),
// printed instead of training.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "tools/train/train_options.h"

namespace zrt::train {

// "24GiB", "80 GB", "512MiB", "2.5e10" or "1000000" (bytes): binary units
// with an i, decimal ones without. InvalidArgument names a bad value.
std::size_t parse_byte_count(const std::string& text);

// Prints the plan of the flags' run for the world of --ranks (or of the
// launch) to `out`; with --fit, the settings that fit in that many bytes.
// Returns whether something fits (always true without --fit).
bool print_memory_plan(const TrainOptions& o, std::FILE* out);

// Plans the run (as --plan does) when it has a --memory-limit or runs on
// the cpu. With --memory-limit: throws ResourceError, naming both figures
// and --plan --fit, when its largest rank reserves more than the limit.
// The plan is what a run holds on the cpu with --cpu-streams none (queued
// CPU-stream work only adds to it) and was within 0.1% of a CUDA run's
// measured peak (libraries' workspaces come on top), so a run that fits is
// not refused; one that does not fails in a second, not at its first step.
// On the cpu: warns when the ranks of this machine need more, at their
// peaks, than its available memory (the system would kill the run rather
// than refuse an allocation). Worlds above kMaxPlannedRanks are not
// checked.
void check_plan_fits_memory(const TrainOptions& o);

}  // namespace zrt::train
