// What a run is, as zrt-train compares it: with the other ranks of the run
// at start, and with the run that saved the checkpoint it resumes.
#pragma once

#include <string>
#include <vector>

#include "tools/train/train_options.h"

namespace zrt::train {

// The flags that define a run (model, data, schedule, optimiser, seed) as a
// JSON object, stored in checkpoints.
std::string run_flags_json(const TrainOptions& o);
// What every rank of one run must agree on, as a JSON object keyed by flag:
// every flag's value, except the paths, which a host may spell its own way;
// for those, whether each is given, and for the inputs (--data, --init-from,
// the index of the checkpoint --resume reads) their size and a hash of their
// first MiB. A new flag is compared without a line here.
std::string rank_agreement_json(const TrainOptions& o);
// Given every rank's rank_agreement_json (index = rank), throws
// InvalidArgument naming each flag the ranks disagree on and which ranks
// differ from rank 0; the same verdict on every rank.
void check_ranks_agree(const std::vector<std::string>& per_rank);
// Names of the run-defining flags whose values differ from a checkpoint's;
// with `values`, each also as "--flag SAVED -> NOW" for people.
std::vector<std::string> differing_run_flags(const std::string& saved_json, const TrainOptions& o,
                                             std::vector<std::string>* values = nullptr);
// When the warmup the schedule runs differs from the one the checkpoint's
// run used (its --warmup default cut to another --steps): what that
// changes, and the flag that keeps it; empty otherwise.
std::string warmup_change_note(const std::string& saved_json, const TrainOptions& o);

}  // namespace zrt::train
