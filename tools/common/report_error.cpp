#include "tools/common/report_error.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "zrt/runtime/error.h"

namespace zrt::tools {

bool debug_enabled() {
  const char* env = std::getenv("ZRT_DEBUG");
  return env != nullptr && std::string_view(env) == "1";
}

void report_error(std::string_view program, const std::exception& e, std::string_view kind,
                  std::FILE* out) {
  std::string text = std::string(program) + ": " + std::string(kind) + ": " + e.what() + "\n";
  const auto* user = dynamic_cast<const UserError*>(&e);
  if (user && debug_enabled() && !user->where().empty())
    text += std::string(program) + ": debug: " + user->where() + "\n";
  std::fputs(text.c_str(), out);  // one write: ranks of one process do not interleave
}

}  // namespace zrt::tools
