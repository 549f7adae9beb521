// CLI11 validators whose messages name the rule in the user's words: CLI11's
// own ranges print their bounds as doubles ("Value 0 not in range 0.000000 to
// 1797...").
#pragma once

#include <CLI/CLI.hpp>
#include <limits>

namespace zrt::tools {

// A whole number from `lo` to `hi`: "--flag: must be a whole number from 0 to
// 2 (got 5)", or "... at least 1 (got 0)" without an upper bound.
CLI::Validator whole_number(long long lo, long long hi = std::numeric_limits<long long>::max());

}  // namespace zrt::tools
