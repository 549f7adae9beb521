#include "zrt/runtime/trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "zrt/runtime/error.h"

namespace zrt {

Tracer::Tracer(int rank) : rank_(rank), t0_(std::chrono::steady_clock::now()) {}

double Tracer::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
}

Tracer::Scope::Scope(Tracer* tracer, std::string name, const char* category, int track,
                     std::map<std::string, double> args)
    : tracer_(tracer),
      name_(std::move(name)),
      category_(category),
      track_(track),
      args_(std::move(args)),
      start_us_(tracer ? tracer->now_us() : 0) {}

Tracer::Scope::Scope(Scope&& o) noexcept
    : tracer_(o.tracer_),
      name_(std::move(o.name_)),
      category_(o.category_),
      track_(o.track_),
      args_(std::move(o.args_)),
      start_us_(o.start_us_) {
  o.tracer_ = nullptr;
}

Tracer::Scope::~Scope() {
  if (!tracer_) return;
  try {
    tracer_->add({'X', std::move(name_), category_, track_, start_us_,
                  tracer_->now_us() - start_us_, std::move(args_)});
  } catch (const std::exception& e) {
    report_in_destructor("Tracer::Scope", e);
  }
}

void Tracer::counter(const std::string& name, const std::map<std::string, double>& values) {
  add({'C', name, "memory", kComputeTrack, now_us(), 0, values});
}

void Tracer::complete(std::string name, const char* category, int track, double start_us,
                      double end_us, std::map<std::string, double> args) {
  ZRT_CHECK_ARG(end_us >= start_us, "Tracer: event '", name, "' ends at ", end_us,
                " us, before its start ", start_us);
  add({'X', std::move(name), category, track, start_us, end_us - start_us, std::move(args)});
}

void Tracer::add(Event e) {
  std::lock_guard lock(mu_);
  events_.push_back(std::move(e));
}

std::size_t Tracer::num_events() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

namespace {

// The union of intervals [start, end), sorted and disjoint.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& [a, b] : v) {
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.emplace_back(a, b);
  }
  return out;
}

}  // namespace

Tracer::Overlap Tracer::overlap(const std::string& category, const std::string& with_category,
                                double since_us) const {
  std::vector<std::pair<double, double>> mine, with;
  {
    std::lock_guard lock(mu_);
    for (const Event& e : events_) {
      if (e.phase != 'X' || e.ts_us < since_us) continue;
      if (category == e.category) mine.emplace_back(e.ts_us, e.ts_us + e.dur_us);
      if (with_category == e.category) with.emplace_back(e.ts_us, e.ts_us + e.dur_us);
    }
  }
  mine = merged(std::move(mine));
  with = merged(std::move(with));
  Overlap o;
  std::size_t j = 0;
  for (const auto& [a, b] : mine) {
    o.busy_us += b - a;
    while (j < with.size() && with[j].second <= a) ++j;  // both sorted: skip what ends before
    for (std::size_t k = j; k < with.size() && with[k].first < b; ++k)
      o.overlapped_us += std::min(b, with[k].second) - std::max(a, with[k].first);
  }
  return o;
}

std::vector<std::string> Tracer::metadata_lines() const {
  const char* tracks[] = {"compute", "communication"};
  std::vector<std::string> lines;
  for (int t : {kComputeTrack, kCommTrack})
    lines.push_back(nlohmann::json{{"ph", "M"},
                                   {"name", "thread_name"},
                                   {"pid", rank_},
                                   {"tid", t},
                                   {"args", {{"name", tracks[t]}}}}
                        .dump());
  lines.push_back(nlohmann::json{{"ph", "M"},
                                 {"name", "process_name"},
                                 {"pid", rank_},
                                 {"args", {{"name", "rank " + std::to_string(rank_)}}}}
                      .dump());
  return lines;
}

std::string Tracer::event_line(const Event& e) const {
  nlohmann::json j = {{"ph", std::string(1, e.phase)},
                      {"name", e.name},
                      {"cat", e.category},
                      {"pid", rank_},
                      {"tid", e.track},
                      {"ts", e.ts_us},
                      {"args", e.args}};
  if (e.phase == 'X') j["dur"] = e.dur_us;
  return j.dump();
}

std::vector<std::string> Tracer::take_event_lines() {
  std::vector<Event> taken;
  bool first = false;
  {
    std::lock_guard lock(mu_);
    taken.swap(events_);
    first = !std::exchange(metadata_taken_, true);
  }
  std::vector<std::string> lines;
  if (first) lines = metadata_lines();
  for (const Event& e : taken) lines.push_back(event_line(e));
  return lines;
}

}  // namespace zrt
