// CLI11 validators whose messages name the rule in the user's words: CLI11's
// own ranges print their bounds as doubles ("Value 0 not in range 0.000000 to
// 1797...").
#pragma once

#include <CLI/CLI.hpp>
#include <limits>
#include <string>
#include <string_view>

namespace zrt::tools {

// A whole number from `lo` to `hi`: "--flag: must be a whole number from 0 to
// 2 (got 5)", or "... at least 1 (got 0)" without an upper bound.
CLI::Validator whole_number(long long lo, long long hi = std::numeric_limits<long long>::max());

// Digits after an optional sign, past leading white space as strtoll reads
// them: "12", "-3", " +0" (no base prefix, no point).
bool is_whole_number(std::string_view s);

// CLI11's message for a bad command line, in the user's words: "unknown flag
// --x", "--steps is given more than once", "--n-layer: 1.5 is not a whole
// number", "--out needs a value"; an unknown flag before a missing required
// argument. A message of another kind comes back as is.
std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e);

// Throws InvalidArgument naming the first flag of `app` that argv misuses in
// a way CLI11 would take silently: a flag given twice (CLI11 joins a list
// flag's repeats, `--hidden 64 --hidden 32` would be 64,32, and names no
// flag otherwise); a flag of `app` or its subcommands given as the value of
// one that needs a value (`--checkpoint-dir --steps` made a directory named
// --steps); a number with a base prefix or a whole number with a leading
// zero (CLI11 read `--steps 010` as 8 and `--steps 0x10` as 16).
void check_command_line(const CLI::App& app, int argc, const char* const* argv);

}  // namespace zrt::tools
