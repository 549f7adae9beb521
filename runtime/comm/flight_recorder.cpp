#include "zrt/runtime/comm/flight_recorder.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>

#include "zrt/runtime/error.h"
#include "zrt/runtime/name_digest.h"

namespace zrt {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string record_path(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / ("flight-rank-" + std::to_string(rank) + ".json")).string();
}

}  // namespace

std::string rank_ranges(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    os << (i ? ", " : "") << ranks[i];
    if (j > i) os << "-" << ranks[j];
    i = j + 1;
  }
  return os.str();
}

std::size_t default_flight_recorder_entries() {
  const char* env = std::getenv("ZRT_FLIGHT_RECORDER_ENTRIES");
  if (env == nullptr || *env == '\0') return 256;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(env, &end, 10);
  ZRT_CHECK_ARG(errno == 0 && end != env && *end == '\0' && n >= 1 && n <= 1000000,
                "ZRT_FLIGHT_RECORDER_ENTRIES='", env, "' is not a whole number from 1 to 1000000");
  return static_cast<std::size_t>(n);
}

FlightRecorder::FlightRecorder(int rank, std::size_t capacity)
    : rank_(rank), capacity_(capacity > 0 ? capacity : default_flight_recorder_entries()) {}

std::uint64_t FlightRecorder::issued(const char* op, const std::string& group, std::uint64_t seq,
                                     std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  if (ring_.size() == capacity_) {
    ring_.pop_front();
    ++first_id_;
  }
  FlightEntry e;
  e.seq = seq;
  e.op = op;
  e.group = group;
  e.bytes = bytes;
  e.state = "issued";
  e.issued_s = now_s();
  e.caller = caller_;
  ring_.push_back(std::move(e));
  return first_id_ + ring_.size() - 1;
}

FlightEntry* FlightRecorder::find(std::uint64_t id) {
  if (id < first_id_ || id >= first_id_ + ring_.size()) return nullptr;  // already overwritten
  return &ring_[id - first_id_];
}

void FlightRecorder::started(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->state = "running";
    e->started_s = now_s();
  }
}

void FlightRecorder::ended(std::uint64_t id, bool ok) {
  std::lock_guard lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->state = ok ? "done" : "failed";
    e->ended_s = now_s();
  }
  ++ended_;
}

FlightRecorder::Caller::Caller(FlightRecorder& recorder, std::string label) : recorder_(recorder) {
  std::lock_guard lock(recorder_.mutex_);
  previous_ = std::exchange(recorder_.caller_, std::move(label));
}

FlightRecorder::Caller::~Caller() {
  std::lock_guard lock(recorder_.mutex_);
  recorder_.caller_ = std::move(previous_);
}

FlightRecorder::Subject::Subject(FlightRecorder& recorder, std::string name) : recorder_(recorder) {
  std::lock_guard lock(recorder_.mutex_);
  previous_ = std::exchange(recorder_.subject_, std::move(name));
}

FlightRecorder::Subject::~Subject() {
  std::lock_guard lock(recorder_.mutex_);
  recorder_.subject_ = std::move(previous_);
}

void FlightRecorder::copy_subject(std::uint64_t& id, std::span<char> name) const {
  std::lock_guard lock(mutex_);
  id = 0;
  if (subject_.empty()) return;
  id = name_digest(subject_);  // never 0 in practice
  if (id == 0) id = 1;
  const std::size_t n = std::min(subject_.size(), name.size() - 1);
  std::copy_n(subject_.data(), n, name.data());
  name[n] = '\0';
}

std::string FlightRecorder::caller() const {
  std::lock_guard lock(mutex_);
  return caller_;
}

void FlightRecorder::copy_caller(std::span<char> out) const {
  if (out.empty()) return;
  std::lock_guard lock(mutex_);
  const std::size_t n = std::min(caller_.size(), out.size() - 1);
  std::copy_n(caller_.data(), n, out.data());
  out[n] = '\0';
}

std::uint64_t FlightRecorder::ended_count() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::lock_guard lock(mutex_);
  return {ring_.begin(), ring_.end()};
}

std::string FlightRecorder::json() const {
  nlohmann::json entries = nlohmann::json::array();
  for (const FlightEntry& e : this->entries())
    entries.push_back({{"seq", e.seq},
                       {"op", e.op},
                       {"group", e.group},
                       {"bytes", e.bytes},
                       {"state", e.state},
                       {"issued_s", e.issued_s},
                       {"started_s", e.started_s},
                       {"ended_s", e.ended_s},
                       {"caller", e.caller}});
  return nlohmann::json{{"rank", rank_}, {"entries", entries}}.dump(1);
}

std::string FlightRecorder::write(const std::string& dir) const {
  const std::string path = record_path(dir, rank_);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json() << "\n";
    if (!out.flush()) ZRT_THROW(ResourceError, "flight recorder: cannot write ", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // whole files only: the report may be reading
  if (ec)
    ZRT_THROW(ResourceError, "flight recorder: cannot rename ", tmp, " to ", path, ": ",
              ec.message());
  return path;
}

std::string flight_report(const std::vector<std::vector<FlightEntry>>& by_rank,
                          const std::vector<bool>& present) {
  // Where each rank with a record is: its first unfinished collective, or
  // (none) the last it finished.
  struct Place {
    std::string where;
    double issued_s = 0;
  };
  std::map<std::string, std::vector<int>> ranks_at;
  std::map<int, Place> place;
  std::vector<int> missing;
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    const int rank = static_cast<int>(r);
    if (!present[r]) {
      missing.push_back(rank);
      continue;
    }
    const auto& ring = by_rank[r];
    auto stuck = std::find_if(ring.begin(), ring.end(),
                              [](const FlightEntry& e) { return e.state != "done"; });
    Place p;
    if (stuck != ring.end()) {
      p.where = "in " + stuck->op + " #" + std::to_string(stuck->seq) + " on " + stuck->group +
                (stuck->caller.empty() ? "" : " (" + stuck->caller + ")");
      p.issued_s = stuck->issued_s;
    } else if (!ring.empty()) {
      const FlightEntry& last = ring.back();
      p.where = "past " + last.op + " #" + std::to_string(last.seq) + " on " + last.group +
                (last.caller.empty() ? "" : " (" + last.caller + ")") + " (nothing unfinished)";
    } else {
      p.where = "before any collective";
    }
    ranks_at[p.where].push_back(rank);
    place[rank] = p;
  }
  std::vector<std::pair<std::string, std::vector<int>>> groups(ranks_at.begin(), ranks_at.end());
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  std::ostringstream os;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& [where, ranks] = groups[i];
    os << (i ? "; " : "") << (ranks.size() == 1 ? "rank " : "ranks ") << rank_ranges(ranks)
       << (ranks.size() == 1 ? " is " : " are ") << where;
  }
  if (groups.size() == 1 && groups[0].second.size() > 1 && missing.empty()) {
    // One place for all: the rank that got there last held the others up.
    const auto& ranks = groups[0].second;
    const int last = *std::max_element(ranks.begin(), ranks.end(), [&](int a, int b) {
      return place[a].issued_s < place[b].issued_s;
    });
    const int first = *std::min_element(ranks.begin(), ranks.end(), [&](int a, int b) {
      return place[a].issued_s < place[b].issued_s;
    });
    const double gap = place[last].issued_s - place[first].issued_s;
    char late[32];
    std::snprintf(late, sizeof late, "%.3f", gap);
    if (gap >= 1e-3)
      os << "; rank " << last << " got there last, " << late << " s after rank " << first;
  }
  if (!missing.empty())
    os << (groups.empty() ? "" : "; ") << (missing.size() == 1 ? "rank " : "ranks ")
       << rank_ranges(missing) << " left no record (stopped or stuck before it wrote one, or gone)";
  return os.str();
}

std::string flight_report(const std::string& dir, int world_size, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::vector<std::vector<FlightEntry>> by_rank(static_cast<std::size_t>(world_size));
  std::vector<bool> present(static_cast<std::size_t>(world_size), false);
  for (;;) {
    for (int r = 0; r < world_size; ++r) {
      if (present[static_cast<std::size_t>(r)]) continue;
      std::ifstream in(record_path(dir, r));
      if (!in) continue;
      try {
        const nlohmann::json j = nlohmann::json::parse(in);
        for (const auto& e : j.at("entries"))
          by_rank[static_cast<std::size_t>(r)].push_back(
              {e.at("seq").get<std::uint64_t>(), e.at("op").get<std::string>(),
               e.at("group").get<std::string>(), e.at("bytes").get<std::uint64_t>(),
               e.at("state").get<std::string>(), e.at("issued_s").get<double>(),
               e.at("started_s").get<double>(), e.at("ended_s").get<double>(),
               e.value("caller", std::string())});
        present[static_cast<std::size_t>(r)] = true;
      } catch (const nlohmann::json::exception&) {
        by_rank[static_cast<std::size_t>(r)].clear();  // not a record: counts as missing
      }
    }
    if (std::all_of(present.begin(), present.end(), [](bool p) { return p; }) ||
        std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return flight_report(by_rank, present);
}

}  // namespace zrt
