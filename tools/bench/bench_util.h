// What every zrt-bench suite shares: its option parser, median timing after
// warm-up and a table printed as aligned text or as JSON lines.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zrt/runtime/device.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/stream.h"

namespace CLI {
class App;
}

namespace zrt::bench {

// A suite's command line, parsed by CLI11 like zrt-train's: "--name value"
// options and "--name" switches. An unknown option, a missing or malformed
// value throws InvalidArgument naming it after `who` ("ops: ..."); --help
// prints the options (after `usage`) and exits 0.
class OptionParser {
 public:
  explicit OptionParser(std::string who, std::string usage = {});
  ~OptionParser();
  // T: std::string, int, std::int64_t or double.
  template <class T>
  OptionParser& value(std::string name, T& target);
  OptionParser& value(std::string name, Device& target);
  OptionParser& flag(std::string name, bool& target);
  // --reps (timed runs; parse checks it is positive) and --json (a JSON
  // object per row), which every timing suite takes.
  OptionParser& runs(int& reps, bool& json);
  void parse(int argc, char** argv);
  // Whether the command line named option `name` (after parse).
  bool given(const std::string& name) const;

 private:
  std::string who_;
  std::unique_ptr<CLI::App> app_;
  const int* reps_ = nullptr;
};

// The middle value (the mean of the middle two of an even count); v must not
// be empty.
double median(std::vector<double> v);

// Runs `fn` `warmup` times, then `reps` times, calling `sync` (e.g. a device
// synchronisation, or nothing on cpu) after each, and returns the median
// wall-clock seconds of the timed runs.
double median_seconds(const std::function<void()>& fn, int warmup, int reps,
                      const std::function<void()>& sync = {});
// The same for several functions run in turn, round by round (a, b, a, b,
// ...): a subject and its baseline meet the same load on a shared machine,
// so their ratio holds where their times do not. One median per function.
std::vector<double> interleaved_median_seconds(const std::vector<std::function<void()>>& fns,
                                               int warmup, int reps,
                                               const std::function<void()>& sync = {});

// The median seconds of `fn`, issued to `stream` on `device`, after two
// warm-up runs: CUDA events around each run on the GPU, wall clock on the
// CPU (where `fn` runs, or is waited for, before it returns).
double median_stream_seconds(const std::function<void()>& fn, Device device, Stream stream,
                             int reps);

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
