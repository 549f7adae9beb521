#include "zrt/runtime/io/kernel_filesystem.h"

#include <linux/magic.h>
#include <sys/vfs.h>

#include <string>
#include <system_error>

#include "zrt/runtime/error.h"

namespace zrt {

const char* kernel_filesystem_name(unsigned long type) {
  // Not in every <linux/magic.h>.
  constexpr unsigned long kConfigfsMagic = 0x62656570, kMqueueMagic = 0x19800202;
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
    case SELINUX_MAGIC:
      return "selinuxfs";
    case SMACK_MAGIC:
      return "smackfs";
    case kConfigfsMagic:
      return "configfs";  // a directory made there is a config item
    case EFIVARFS_MAGIC:
      return "efivarfs";  // a file made there is an EFI variable
    case BPF_FS_MAGIC:
      return "bpf";
    case PSTOREFS_MAGIC:
      return "pstore";
    case BINFMTFS_MAGIC:
      return "binfmt_misc";
    case NSFS_MAGIC:
      return "nsfs";
    case kMqueueMagic:
      return "mqueue";
    default:
      return nullptr;
  }
}

std::filesystem::path nearest_existing(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  // Links resolved before `..`, as the kernel walks a path: `link/..` is
  // the parent of the link's target, not the directory holding the link.
  std::error_code ec;
  fs::path existing = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) existing = fs::absolute(path, ec);
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
