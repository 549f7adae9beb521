// Settings every rank of a group must share, compared across the ranks: one
// line per setting on which some rank differs, worded alike on every rank.
//
// Note [Ranks agree on their settings]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Ranks built with different settings (one with a hybrid strategy, one with
// full; one with bf16 AdamW state, one with f32) issue different
// collectives, or the same ones over different data, and then either fail
// later with a message about collectives the caller never named or train a
// model that is the same on no rank. So a component that needs its ranks to
// agree gathers each rank's settings once, as it starts (one small
// all_gather_bytes), and every rank ends in the same error naming each
// setting that differs and each rank's value of it, in the form the tools
// print for flags ("strategy: rank 0 has full; rank 1 has hybrid"). Settings
// that may differ by rank (a device index, a rank's own scratch directory, a
// memory limit) are not listed.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zrt {

class Communicator;

// (name, value) in a fixed order; names are unique.
using Settings = std::vector<std::pair<std::string, std::string>>;

// "name: rank 0 has A; rank 2 has B" for each of rank 0's settings on which
// some rank differs from rank 0 (a rank that lacks it "has nothing"), then
// each setting rank 0 lacks, in order. Empty when all agree.
std::vector<std::string> differing_settings(const std::vector<Settings>& per_rank);

// Collective over `comm`: every rank's settings gathered, then compared as
// above; the same lines on every rank.
std::vector<std::string> differing_settings(Communicator& comm, const Settings& mine);

}  // namespace zrt
