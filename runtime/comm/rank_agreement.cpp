#include "zrt/runtime/comm/rank_agreement.h"

#include <cstddef>
#include <cstring>
#include <span>

#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/error.h"

namespace zrt {

namespace {

const std::string* find(const Settings& s, const std::string& name) {
  for (const auto& [n, v] : s)
    if (n == name) return &v;
  return nullptr;
}

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
  auto line_for = [&](const std::string& name) {
    std::string differ;
    const std::string* first = find(per_rank[0], name);
    for (std::size_t r = 1; r < per_rank.size(); ++r) {
      const std::string* v = find(per_rank[r], name);
      if (v == first || (v && first && *v == *first)) continue;
      differ += detail::concat("; rank ", r, " has ", v ? *v : "nothing");
    }
    if (!differ.empty())
      lines.push_back(detail::concat(name, ": rank 0 has ", first ? *first : "nothing", differ));
  };
  for (const auto& setting : per_rank[0]) line_for(setting.first);
  // Names only other ranks have, once each, in the order they first appear.
  Settings seen;
  for (std::size_t r = 1; r < per_rank.size(); ++r)
    for (const auto& setting : per_rank[r])
      if (!find(per_rank[0], setting.first) && !find(seen, setting.first)) {
        seen.push_back(setting);
        line_for(setting.first);
      }
  return lines;
}

std::vector<std::string> differing_settings(Communicator& comm, const Settings& mine) {
  const std::vector<std::byte> bytes = encode(mine);
  const auto all = comm.all_gather_bytes(bytes);
  std::vector<Settings> per_rank;
  for (std::size_t r = 0; r < all.size(); ++r)
    per_rank.push_back(decode(all[r], static_cast<int>(r)));
  return differing_settings(per_rank);
}

}  // namespace zrt
