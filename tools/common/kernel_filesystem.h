// Outputs refused on the kernel's own filesystems (/proc, /sys and their
// like): they store no files, so a write there fails late (after a run, for
// a trace or the weights) with the OS's words, and a directory made under a
// cgroup hierarchy is a new control group, not a folder.
#pragma once

#include <filesystem>
#include <string_view>

namespace zrt::tools {

// `path` made absolute, or the nearest of its parents that exists: where
// the rest of it would be made.
std::filesystem::path nearest_existing(const std::filesystem::path& path);

// Throws InvalidArgument "WHAT: PATH is on a virtual filesystem that stores
// no files ..." when `path`, or the nearest of its parents that exists (where
// it would be made), is on one. Known by the filesystem's type: a capacity
// of 0 is also a ramfs's, or a FUSE filesystem's that does not say, which do
// hold files. A path that cannot be examined passes: the write will tell.
void refuse_kernel_filesystem(std::string_view what, const std::filesystem::path& path);

}  // namespace zrt::tools
