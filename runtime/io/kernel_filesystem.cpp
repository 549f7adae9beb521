#include "zrt/runtime/io/kernel_filesystem.h"

#include <linux/magic.h>
#include <sys/vfs.h>

#include <string>
#include <system_error>

#include "zrt/runtime/error.h"

namespace zrt {

const char* kernel_filesystem_name(unsigned long type) {
  switch (type) {
    case PROC_SUPER_MAGIC:
      return "proc";
    case SYSFS_MAGIC:
      return "sysfs";
    case CGROUP_SUPER_MAGIC:
      return "cgroup";
    case CGROUP2_SUPER_MAGIC:
      return "cgroup2";
    case DEBUGFS_MAGIC:
      return "debugfs";
    case TRACEFS_MAGIC:
      return "tracefs";
    case SECURITYFS_MAGIC:
      return "securityfs";
    default:
      return nullptr;
  }
}

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
  if (::statfs(existing.c_str(), &info) != 0) return;  // the write itself will tell
  ZRT_CHECK_ARG(kernel_filesystem_name(static_cast<unsigned long>(info.f_type)) == nullptr, what,
                ": ", path.string(),
                " is on a virtual filesystem that stores no files (as /proc and /sys are); "
                "give a path on a disk");
}

}  // namespace zrt
