#include "zrt/optim/checkpoint/checkpoint_agreement.h"

#include <span>

#include "zrt/runtime/error.h"

namespace zrt::optim {

std::vector<std::string> exchange_texts(Communicator& comm, const std::string& mine) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(mine.data()), mine.size());
  std::vector<std::string> all;
  for (const auto& b : comm.all_gather_bytes(bytes))
    all.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
  return all;
}

void agree(Communicator& comm, const std::string& error, const std::string& what) {
  const std::vector<std::string> errors = exchange_texts(comm, error);
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      ZRT_THROW(CheckpointError, what, " failed on rank ", r, ": ", errors[r]);
}

}  // namespace zrt::optim
