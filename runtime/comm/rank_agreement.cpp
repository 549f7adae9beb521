#include "zrt/runtime/comm/rank_agreement.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/error.h"

namespace zrt {

namespace {

// name, value, name, value, ...: each string as its length (8 bytes) and its bytes.
std::vector<std::byte> encode(const Settings& s) {
  std::vector<std::byte> out;
  auto put = [&](const std::string& text) {
    const std::uint64_t n = text.size();
    const auto* p = reinterpret_cast<const std::byte*>(&n);
    out.insert(out.end(), p, p + sizeof n);
    const auto* t = reinterpret_cast<const std::byte*>(text.data());
    out.insert(out.end(), t, t + text.size());
  };
  for (const auto& [name, value] : s) {
    put(name);
    put(value);
  }
  return out;
}

Settings decode(const std::vector<std::byte>& bytes, int rank) {
  Settings s;
  std::size_t at = 0;
  auto get = [&] {
    std::uint64_t n = 0;
    ZRT_CHECK_STATE(bytes.size() - at >= sizeof n, "rank ", rank, "'s settings end early");
    std::memcpy(&n, bytes.data() + at, sizeof n);
    at += sizeof n;
    ZRT_CHECK_STATE(bytes.size() - at >= n, "rank ", rank, "'s settings end early");
    std::string text(reinterpret_cast<const char*>(bytes.data() + at), n);
    at += n;
    return text;
  };
  while (at < bytes.size()) {
    std::string name = get();
    s.emplace_back(std::move(name), get());
  }
  return s;
}

}  // namespace

std::vector<std::string> differing_settings(const std::vector<Settings>& per_rank) {
  std::vector<std::string> lines;
  if (per_rank.empty()) return lines;
  // Each rank's values by name, and every name once, in the order it first
  // appears (rank 0's first): linear in the settings, a flat parameter has
  // one per parameter.
  std::vector<std::unordered_map<std::string_view, std::string_view>> values(per_rank.size());
  std::vector<std::string_view> names;
  std::unordered_set<std::string_view> listed;
  for (std::size_t r = 0; r < per_rank.size(); ++r)
    for (const auto& [name, value] : per_rank[r]) {
      values[r].emplace(name, value);
      if (listed.insert(name).second) names.push_back(name);
    }
  for (const std::string_view name : names) {
    auto value_of = [&](std::size_t r) -> std::optional<std::string_view> {
      const auto it = values[r].find(name);
      return it == values[r].end() ? std::nullopt : std::optional(it->second);
    };
    const auto first = value_of(0);
    std::string differ;
    for (std::size_t r = 1; r < per_rank.size(); ++r)
      if (const auto v = value_of(r); v != first)
        differ += detail::concat("; rank ", r, " has ", v ? *v : "nothing");
    if (!differ.empty())
      lines.push_back(detail::concat(name, ": rank 0 has ", first ? *first : "nothing", differ));
  }
  return lines;
}

std::vector<std::string> differing_settings(Communicator& comm, const Settings& mine) {
  const std::vector<std::byte> bytes = encode(mine);
  const auto all = comm.all_gather_bytes(bytes);
  // Agreement, the common case, needs no decoding.
  if (std::all_of(all.begin(), all.end(), [&](const auto& b) { return b == all.front(); }))
    return {};
  std::vector<Settings> per_rank;
  for (std::size_t r = 0; r < all.size(); ++r)
    per_rank.push_back(decode(all[r], static_cast<int>(r)));
  return differing_settings(per_rank);
}

std::string indented_lines(const std::vector<std::string>& lines, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < most; ++i) out += "\n  " + lines[i];
  if (lines.size() > most) out += detail::concat("\n  (and ", lines.size() - most, " more)");
  return out;
}

}  // namespace zrt
