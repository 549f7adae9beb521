#include "tools/common/report_error.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>

#include "zrt/runtime/error.h"

namespace zrt::tools {

bool debug_enabled() {
  const char* env = std::getenv("ZRT_DEBUG");
  return env != nullptr && std::string_view(env) == "1";
}

std::string error_text(const std::exception& e) {
  // An allocation the system refused outside zrt's allocators (which name
  // their bytes): a host allocation of the C++ library.
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr &&
      dynamic_cast<const std::bad_array_new_length*>(&e) == nullptr)  // that: a bad size
    return "out of host memory: the system refused an allocation (std::bad_alloc); free memory, "
           "raise the process's limit (ulimit -v), run fewer ranks in this process or a "
           "smaller model";
  const auto* fs_error = dynamic_cast<const std::filesystem::filesystem_error*>(&e);
  if (!fs_error) return e.what();
  const std::string what = e.what(), reason = fs_error->code().message();
  constexpr std::string_view prefix = "filesystem error: ";
  std::string op = what.starts_with(prefix) ? what.substr(prefix.size()) : what;
  if (const auto at = op.find(": " + reason); at != std::string::npos) op.resize(at);
  const std::string path = fs_error->path1().string(), to = fs_error->path2().string();
  return (path.empty() ? "" : path + ": ") + op + (to.empty() ? "" : " to " + to) + " (" + reason +
         ")";
}

void report_error(std::string_view program, const std::exception& e, std::string_view kind,
                  std::FILE* out) {
  std::string text = std::string(program) + ": " + std::string(kind) + ": " + error_text(e) + "\n";
  // A message without its location (a user error, a call out of order)
  // gets it under ZRT_DEBUG=1.
  const auto* error = dynamic_cast<const Error*>(&e);
  if (error && debug_enabled() && !error->where().empty() &&
      std::string_view(error->what()).find(error->where()) == std::string_view::npos)
    text += std::string(program) + ": debug: " + error->where() + "\n";
  std::fputs(text.c_str(), out);  // one write: ranks of one process do not interleave
}

}  // namespace zrt::tools
