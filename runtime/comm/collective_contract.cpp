// See collective_contract.h and Note [Collective contract] in communicator.h.
#include "zrt/runtime/comm/collective_contract.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include "zrt/runtime/comm/flight_recorder.h"

namespace zrt {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_gather:
      return "all_gather";
    case CollectiveOp::reduce_scatter:
      return "reduce_scatter";
    case CollectiveOp::all_to_all:
      return "all_to_all";
    case CollectiveOp::all_reduce:
      return "all_reduce";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::barrier:
      return "barrier";
    case CollectiveOp::all_gather_bytes:
      return "all_gather_bytes";
    case CollectiveOp::split:
      return "split";
  }
  return "an unknown collective";
}

namespace {

bool moves_tensors(CollectiveOp op) {
  return op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter ||
         op == CollectiveOp::all_to_all || op == CollectiveOp::all_reduce ||
         op == CollectiveOp::broadcast;
}

bool reduces(CollectiveOp op) {
  return op == CollectiveOp::all_reduce || op == CollectiveOp::reduce_scatter;
}

// The caller's label as a string: at most kCallerChars, NUL or not.
std::string caller_of(const CollectiveContract& c) {
  return std::string(c.caller, strnlen(c.caller, CollectiveContract::kCallerChars));
}

}  // namespace

bool contracts_agree(const CollectiveContract& a, const CollectiveContract& b) {
  if (a.op != b.op || a.seq != b.seq) return false;
  if (!moves_tensors(a.op)) return true;  // all_gather_bytes: each rank's own length
  if (a.dtype != b.dtype || a.numel != b.numel) return false;
  if (a.subject_id != 0 && b.subject_id != 0 && a.subject_id != b.subject_id) return false;
  if (reduces(a.op) && a.reduce != b.reduce) return false;
  return a.op != CollectiveOp::broadcast || a.root == b.root;
}

std::string describe_contract(const CollectiveContract& c) {
  std::ostringstream os;
  os << collective_op_name(c.op);
  if (reduces(c.op)) os << " (" << reduce_op_name(c.reduce) << ")";
  if (c.op == CollectiveOp::broadcast) os << " from rank " << c.root;
  if (moves_tensors(c.op))
    os << " of " << c.numel << " " << dtype_name(c.dtype) << " values ("
       << c.numel * static_cast<std::int64_t>(dtype_size(c.dtype)) << " bytes)";
  if (c.subject_id != 0)
    os << " of '" << std::string(c.subject, strnlen(c.subject, sizeof c.subject)) << "'";
  const std::string caller = caller_of(c);
  if (!caller.empty()) os << " in " << caller;
  return os.str();
}

std::string contract_mismatch(const std::string& group,
                              std::span<const CollectiveContract> by_rank) {
  bool agree = true;
  for (const CollectiveContract& c : by_rank) agree = agree && contracts_agree(by_rank[0], c);
  if (agree) return {};
  // Ranks that issued the same thing are one line, in the order of their
  // first rank; a rank on another sequence number says so.
  struct Side {
    std::string what;
    std::vector<int> ranks;
  };
  std::vector<Side> sides;
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    std::string what = describe_contract(by_rank[r]);
    if (by_rank[r].seq != by_rank[0].seq)
      what += " (its collective #" + std::to_string(by_rank[r].seq) + ")";
    auto same =
        std::find_if(sides.begin(), sides.end(), [&](const Side& s) { return s.what == what; });
    if (same == sides.end()) same = sides.insert(sides.end(), Side{std::move(what), {}});
    same->ranks.push_back(static_cast<int>(r));
  }
  constexpr std::size_t kShown = 4;  // a long list helps no one
  std::ostringstream os;
  os << "collective #" << by_rank[0].seq << " of group '" << group
     << "' does not match across ranks: ";
  for (std::size_t i = 0; i < sides.size() && i < kShown; ++i)
    os << (i ? "; " : "") << (sides[i].ranks.size() == 1 ? "rank " : "ranks ")
       << rank_ranges(sides[i].ranks) << " issued " << sides[i].what;
  if (sides.size() > kShown) os << "; and " << sides.size() - kShown << " other collectives";
  os << "; every rank must call the same collectives in the same order";
  return os.str();
}

}  // namespace zrt
