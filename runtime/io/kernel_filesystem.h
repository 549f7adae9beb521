// The kernel's own filesystems (/proc, /sys and their like) store no files:
// a write there fails late (after a run, for a trace or the weights) with
// the OS's words, a directory made under a cgroup hierarchy is a new control
// group, not a folder, and a file read there reports a size that is not its
// contents (0 for /proc/cpuinfo, 4096 for a sysfs attribute).
#pragma once

#include <filesystem>
#include <string_view>

namespace zrt {

// The kernel filesystem's name ("proc", "sysfs", "cgroup") of a statfs
// f_type, or nullptr for a filesystem that stores files.
const char* kernel_filesystem_name(unsigned long type);

// `path` made absolute, or the nearest of its parents that exists: where
// the rest of it would be made.
std::filesystem::path nearest_existing(const std::filesystem::path& path);

// Throws InvalidArgument "WHAT: PATH is on a virtual filesystem that stores
// no files ..." when `path`, or the nearest of its parents that exists (where
// it would be made), is on one. Known by the filesystem's type: a capacity
// of 0 is also a ramfs's, or a FUSE filesystem's that does not say, which do
// hold files. A path that cannot be examined passes: the write will tell.
void refuse_kernel_filesystem(std::string_view what, const std::filesystem::path& path);

}  // namespace zrt
