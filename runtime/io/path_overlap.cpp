#include "zrt/runtime/io/path_overlap.h"

#include <filesystem>

#include "zrt/runtime/error.h"
#include "zrt/runtime/io/output_path.h"

namespace zrt {

namespace fs = std::filesystem;

std::string resolved_path(const std::string& path) {
  std::error_code ec;
  const fs::path r = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::absolute(path).lexically_normal().string() : r.string();
}

bool path_is_within(const std::string& inner, const std::string& outer) {
  std::error_code ec;
  if (fs::exists(inner, ec) && fs::exists(outer, ec) && fs::equivalent(inner, outer, ec))
    return true;
  const fs::path in = resolved_path(inner), out = resolved_path(outer);
  auto i = in.begin();
  for (auto o = out.begin(); o != out.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == in.end() || *i != *o) return false;
  }
  return true;
}

void check_output_clear_of_inputs(const NamedPath& out, std::span<const NamedPath> inputs) {
  const std::string target = output_file_target(out.path, out.what).string();
  for (const NamedPath& in : inputs) {
    if (in.path.empty()) continue;
    if (!path_is_within(target, in.path)) continue;
    std::error_code ec;
    // One file under two names (a hard link), the same name, or a path inside.
    const char* relation = resolved_path(target) == resolved_path(in.path) ? ""
                           : std::filesystem::equivalent(target, in.path, ec)
                               ? "(a hard link to it) "
                               : "inside ";
    ZRT_THROW(InvalidArgument, out.what, " ", out.path,
              (target == out.path ? std::string() : " (-> " + target + ")"), " is ", relation,
              in.what, " ", in.path, ": writing it would destroy what is read");
  }
}

}  // namespace zrt
