// Where a whole-file output really goes.
//
// Note [Outputs write through links, never over devices]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// zrt writes a result file (a --save, an export, a checkpoint's files) to a
// temporary file beside it and renames it into place, so a reader never sees
// half a file. A rename replaces whatever the name pointed at: a symbolic
// link would become a regular file, and /dev/null (run as root) would stop
// being a device. So the writer first resolves the name: a symbolic link is
// followed to its target (the temporary file goes beside the target and the
// link stays a link), and a target that exists but is not a regular file (a
// device, FIFO, socket or directory) is refused with InvalidArgument naming
// what it is. zrt writes no result to a stream: `--save /dev/stdout` is an
// error, not a copy to the terminal.
#pragma once

#include <filesystem>
#include <string>

namespace zrt {

// The regular file `path` names, through any chain of symbolic links (which
// may dangle: the file is then created at the link's target). Throws
// InvalidArgument, naming `what` ("--save", "export --out", ...), when the
// target exists and is not a regular file, or the links loop.
std::filesystem::path output_file_target(const std::string& path, const std::string& what);

// "a directory", "a FIFO", "a character device", "missing", ... for messages.
const char* file_type_name(std::filesystem::file_type type);

}  // namespace zrt
