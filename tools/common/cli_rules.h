// CLI11 validators whose messages name the rule in the user's words: CLI11's
// own ranges print their bounds as doubles ("Value 0 not in range 0.000000 to
// 1797...").
#pragma once

#include <CLI/CLI.hpp>
#include <limits>
#include <string>

namespace zrt::tools {

// A whole number from `lo` to `hi`: "--flag: must be a whole number from 0 to
// 2 (got 5)", or "... at least 1 (got 0)" without an upper bound.
CLI::Validator whole_number(long long lo, long long hi = std::numeric_limits<long long>::max());

// CLI11's message for a bad command line, in the user's words: "unknown flag
// --x", "--steps is given more than once", "--n-layer: 1.5 is not a whole
// number", "--out needs a value". A message of another kind comes back as is.
std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e);

// Throws InvalidArgument naming the first flag of `app` (not of its
// subcommands) that argv gives twice: CLI11 joins a list flag's repeats
// (`--hidden 64 --hidden 32` would be 64,32) and names no flag otherwise.
void check_flags_given_once(const CLI::App& app, int argc, const char* const* argv);

}  // namespace zrt::tools
