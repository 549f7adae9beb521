#include "tools/common/cli_rules.h"

#include <string>

namespace zrt::tools {

CLI::Validator whole_number(long long lo, long long hi) {
  const std::string rule = "must be a whole number " +
                           (hi == std::numeric_limits<long long>::max()
                                ? "of at least " + std::to_string(lo)
                                : "from " + std::to_string(lo) + " to " + std::to_string(hi));
  return CLI::Validator(
      [lo, hi, rule](std::string& v) {
        std::size_t used = 0;
        long long x = 0;
        try {
          x = std::stoll(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        const bool ok = used == v.size() && !v.empty() && x >= lo && x <= hi;
        return ok ? std::string() : rule + " (got " + v + ")";
      },
      hi == std::numeric_limits<long long>::max()
          ? "INT>=" + std::to_string(lo)
          : "INT in " + std::to_string(lo) + ".." + std::to_string(hi));
}

}  // namespace zrt::tools
