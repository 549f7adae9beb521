// Whether an output would land on an input.
//
// Note [No output onto an input]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every tool checks each output it will write against each input it reads,
// before any work: a result written over the file it was computed from (an
// export over a rank file of the checkpoint it reads, a --save into the
// checkpoint being resumed) succeeds and destroys the input. Names are
// compared after resolving symbolic links and `..` (an output through the
// link it writes through, Note [Outputs write through links, never over
// devices]), and two existing names are also compared as files (hard links).
// An input may be a directory (a checkpoint step): an output inside it is on
// the input. The tools also keep outputs out of every other checkpoint step
// (optim::check_output_outside_checkpoint_steps): writing there destroys a
// step too.
#pragma once

#include <span>
#include <string>

namespace zrt {

struct NamedPath {
  std::string what;  // the flag or role, for the message: "--save", "the resumed checkpoint"
  std::string path;
};

// `path` made absolute, through symbolic links and `..` (as far as it exists).
std::string resolved_path(const std::string& path);

// True when `inner` names `outer` or something inside it (both resolved).
bool path_is_within(const std::string& inner, const std::string& outer);

// Throws InvalidArgument naming both when output file `out` is one of
// `inputs` or lies inside one of them.
void check_output_clear_of_inputs(const NamedPath& out, std::span<const NamedPath> inputs);

}  // namespace zrt
