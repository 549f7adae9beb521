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
// setting that differs (the first eight, where more do: a unit's
// parameters passed in another order differ in each) and each rank's value
// of it, in the form the tools print for flags ("strategy: rank 0 has full;
// rank 1 has hybrid"). The exchange comes before the component's own checks
// of those settings: a rank whose setting is both other and invalid would
// otherwise fail alone while the rest wait in the exchange. Settings that
// may differ by rank (a device index, a rank's own scratch directory, a
// memory limit) are not listed.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

class Communicator;

// (name, value) in a fixed order; names are unique.
using Settings = std::vector<std::pair<std::string, std::string>>;

// "name: rank 0 has A; rank 2 has B" for each setting on which some rank
// differs from rank 0 (a rank that lacks it "has nothing"), rank 0's in its
// order, then those it lacks as they first appear. Empty when all agree.
std::vector<std::string> differing_settings(const std::vector<Settings>& per_rank);

// Collective over `comm`: every rank's settings gathered, then compared as
// above; the same lines on every rank.
std::vector<std::string> differing_settings(Communicator& comm, const Settings& mine);

// The lines for a message, each on an indented line of its own: the first
// `most`, then how many more.
std::string indented_lines(const std::vector<std::string>& lines, std::size_t most = 8);

}  // namespace zrt
