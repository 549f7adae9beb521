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
#include <fstream>
#include <functional>
#include <string>

namespace zrt {

// The regular file `path` names, through any chain of symbolic links (which
// may dangle: the file is then created at the link's target). Throws
// InvalidArgument, naming `what` ("--save", "export --out", ...), when the
// target exists and is not a regular file, or the links loop.
std::filesystem::path output_file_target(const std::string& path, const std::string& what);

// The checks a whole-file output passes before any work, so that a run
// does not fail at its end for a path it could have refused at its start:
// InvalidArgument naming `what` and `path` when its directory is missing,
// is not a directory, is a kernel filesystem or is not writable, or when
// the path is a directory (or a stream, through output_file_target).
// Returns output_file_target's file.
std::filesystem::path check_output_file(const std::string& path, const std::string& what);

// Note [Partial files]
// ~~~~~~~~~~~~~~~~~~~~
// A whole-file output is written to a temporary beside its target, then
// renamed onto it. The temporary is ".NAME.zrt-partial-N" (N random; a
// NAME too long for that is cut, with a digest of it added):
// hidden, never mistaken for a result, and created with O_EXCL, so it is
// never a file that already exists: a fixed name such as NAME.tmp could be
// an input (a --data file called m.tmp next to --metrics m would be
// renamed onto m and lost). A write killed before its rename leaves one
// behind; the next write of NAME removes every such leftover first.
//
// Creates the temporary for `target` (a regular file's path, as
// output_file_target gives), empty, and returns its path. Throws
// CheckpointError naming `what` when the directory refuses it.
std::string create_partial_file(const std::filesystem::path& target, const std::string& what);

// Writes `text` as the whole of the file `path` names (`what`, e.g.
// "--trace", names it in errors): a regular file through a partial file
// renamed into place, so a failed write (disk full, a file-size limit)
// leaves no empty or cut file; a stream (/dev/stdout, a FIFO) directly.
// CheckpointError naming the path and the system's reason.
void write_whole_file(const std::string& path, const std::string& text, const std::string& what);

// Note [Durable outputs]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A rename is atomic for readers but not against a crash: until the file's
// data and the directory's entry reach the disk, a power loss can leave an
// empty or cut file under the new name, over the good one it replaced. A
// whole-file output (--save, an export, a rewritten --metrics) is therefore
// fsync'ed before its rename and its directory after it, as checkpoints are
// (optim/checkpoint/durable_files.h).
//
// fsync of the file `path`: 0, or the errno of the failure.
int fsync_file(const std::string& path);
// fsync of the directory holding `target`, which makes a rename into it
// durable. CheckpointError naming `what` and `target` when it fails; a
// filesystem that cannot sync a directory passes.
void sync_directory_of(const std::filesystem::path& target, const std::string& what);

// Whether `path`, through links and `..`, names an existing stream (a
// character device such as /dev/null or /dev/stdout, a FIFO, a socket):
// decided by what the file is, not by how its name is spelled
// (/dev/../home/x is a regular file).
bool names_a_stream(const std::string& path);

// Opens `out` onto `path` with `mode`. Opening a FIFO to write waits for a
// process to open it to read, which would look like a hang: when none has,
// `waiting_for_reader` is called first (to say so), then it waits, asking
// `give_up` every 100 ms (a stop signal): false, nothing opened, when it
// gave up. A FIFO with a reader is held open meanwhile, so that reader
// never sees the stream end between the check and the open.
bool open_output_stream(std::ofstream& out, const std::string& path, std::ios::openmode mode,
                        const std::function<void()>& waiting_for_reader,
                        const std::function<bool()>& give_up = {});

// "a directory", "a FIFO", "a character device", "missing", ... for messages.
const char* file_type_name(std::filesystem::file_type type);

}  // namespace zrt
