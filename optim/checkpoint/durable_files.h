// The file-system side of checkpoints: durable writes, the step directories
// of a checkpoint root, `latest`, pruning and stale temporaries.
//
// Note [Atomic checkpoint steps]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A checkpoint root DIR holds one directory per saved step, `step-000120/`,
// and a file `latest` naming the newest complete one. A step is written into
// `step-000120.tmp/` (every file fsync'ed, then the directory), renamed to
// `step-000120/` (then DIR fsync'ed), and only then is `latest` replaced by
// renaming `latest.tmp` over it (its first line names the step, its second
// holds the xxHash64 of that step's index.json: Note [Checkpoint format]).
// A kill at any moment therefore leaves `latest` naming a complete step (the
// old one or the new one) with that step's checksum; a step directory
// without `.tmp` is complete by construction, and `index.json` with its
// checksum file `index.json.xxh64`, written last inside it, is what a loader
// trusts once they agree. Leftover `*.tmp` entries
// are ours and are removed by the next save. Pruning (`keep_last`) runs only
// after `latest` names the new step, never removes the step it names, and
// renames a step out of the way before deleting it, so a kill mid-delete
// leaves a `.tmp` entry, not a half step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zrt/runtime/io/path_overlap.h"

namespace zrt::optim {

// fsync of a file or a directory; CheckpointError naming the path.
void fsync_path(const std::string& path);
// Writes `bytes` to `path` through `path.tmp`: fsync, rename, fsync of the
// parent directory. A failure leaves no temporary and `path` untouched.
void write_file_durably(const std::string& path, std::string_view bytes);

// "step-000120" (at least six digits) and back; nullopt for any other name.
std::string step_dir_name(std::int64_t step);
std::optional<std::int64_t> parse_step_dir_name(std::string_view name);

// The complete steps under a checkpoint root, ascending (no `.tmp`).
std::vector<std::int64_t> complete_steps(const std::string& root);
// Those of them that hold an index.json (an emptied step-N does not).
std::vector<std::int64_t> indexed_steps(const std::string& root);
// The step directory a path means: a step directory itself (it holds
// index.json), a root whose `latest` names one, or that `latest` file
// itself. CheckpointError otherwise,
// naming what is missing or malformed. When resolved through `latest` and it
// records the step's index checksum (its second line), that goes to
// *latest_index_xxh64 (else nullopt).
std::string resolve_checkpoint(const std::string& path,
                               std::optional<std::string>* latest_index_xxh64 = nullptr);
// `path`, or the directory of `path` when it names a regular file `latest`
// (a checkpoint root's `latest` means that root).
std::string checkpoint_root_of(const std::string& path);
// Throws InvalidArgument when output `out` (through links, dangling ones
// too, and `..`) lies
// inside a checkpoint step directory (step-N holding index.json): writing it
// would destroy that step, whichever step the run reads; or is a checkpoint
// root's own `latest` or .zrt-* file (a run's lock).
void check_output_outside_checkpoint_steps(const NamedPath& out);
// The same for a directory written into (--checkpoint-dir): it must be
// neither a checkpoint step itself nor inside one.
void check_directory_outside_checkpoint_steps(const NamedPath& dir);
// Points `latest` at step (atomically, Note [Atomic checkpoint steps]),
// carrying the step's index checksum when its index.json.xxh64 has one.
void publish_latest(const std::string& root, std::int64_t step);
// Removes all but the newest `keep_last` complete steps (0: keep all); the
// step `latest` names is always kept.
void prune_steps(const std::string& root, int keep_last);
// Removes a complete step without ever leaving a half-deleted step-N: it is
// renamed to step-N.retired.tmp first, then deleted.
void retire_step(const std::string& root, std::int64_t step);
// Whether `name` is a `*.tmp` entry of our naming (step-N.tmp,
// step-N.retired.tmp, latest.tmp): what an interrupted write leaves.
bool is_checkpoint_temporary(const std::string& name);
// Removes the entries is_checkpoint_temporary names under root.
void remove_stale_temporaries(const std::string& root);

}  // namespace zrt::optim
