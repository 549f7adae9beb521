// What every zrt-bench suite shares: median timing after warm-up and a table
// printed as aligned text or as JSON lines.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace zrt::bench {

// Runs `fn` `warmup` times, then `reps` times, calling `sync` (e.g. a device
// synchronisation, or nothing on cpu) after each, and returns the median
// wall-clock seconds of the timed runs.
double median_seconds(const std::function<void()>& fn, int warmup, int reps,
                      const std::function<void()>& sync = {});

// A result table: text for people, one JSON object per row for scripts.
class Table {
 public:
  explicit Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}
  // Cells are preformatted strings; numbers that should stay numeric in JSON
  // are passed through `num`.
  void add(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(bool json) const;
  static std::string num(double v, int precision = 3);

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace zrt::bench
