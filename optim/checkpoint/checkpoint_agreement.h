// The exchanges by which every rank of a save or a load learns of any rank's
// failure (Note [Ranks agree on checkpoints] in module_checkpoint.h).
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "zrt/runtime/comm/communicator.h"

namespace zrt::optim {

// Each rank's text of one phase ("" for ok, else its error or its data), by rank.
std::vector<std::string> exchange_texts(Communicator& comm, const std::string& mine);

// Throws the same CheckpointError on every rank, naming `what` and the
// first rank whose `error` is not empty; returns when none failed.
void agree(Communicator& comm, const std::string& error, const std::string& what);

// What f throws, as a text ("" when it returns).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what()[0] ? e.what() : "unknown error";
  }
  return {};
}

}  // namespace zrt::optim
