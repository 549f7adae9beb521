#include "tools/common/kernel_filesystem.h"

#include <linux/magic.h>
#include <sys/vfs.h>

#include <string>
#include <system_error>

#include "zrt/runtime/error.h"

namespace zrt::tools {

std::filesystem::path nearest_existing(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path existing = fs::absolute(path, ec).lexically_normal();
  while (!fs::exists(existing, ec) && existing.has_relative_path())
    existing = existing.parent_path();
  return existing;
}

void refuse_kernel_filesystem(std::string_view what, const std::filesystem::path& path) {
  const std::filesystem::path existing = nearest_existing(path);
  struct statfs info {};
  if (::statfs(existing.c_str(), &info) != 0) return;
  const auto type = static_cast<unsigned long>(info.f_type);
  for (unsigned long kernel_own :
       {PROC_SUPER_MAGIC, SYSFS_MAGIC, CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, DEBUGFS_MAGIC,
        TRACEFS_MAGIC, SECURITYFS_MAGIC})
    ZRT_CHECK_ARG(type != kernel_own, what, ": ", path.string(),
                  " is on a virtual filesystem that stores no files (as /proc and /sys are); "
                  "give a path on a disk");
}

}  // namespace zrt::tools
