#include "tools/bench/bench_util.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "tools/common/cli_rules.h"
#include "zrt/runtime/error.h"

namespace zrt::bench {

OptionParser::OptionParser(std::string who, std::string usage)
    : who_(std::move(who)),
      app_(std::make_unique<CLI::App>(usage.empty() ? "zrt-bench " + who_ : usage)) {}

OptionParser::~OptionParser() = default;

template <class T>
OptionParser& OptionParser::value(std::string name, T& target) {
  CLI::Option* option = app_->add_option(name, target)->capture_default_str();
  // CLI11 reads a 64-bit number past the type's range as its largest value
  // (an --ops of 10^20 ran without end); an int's range it refuses itself.
  if constexpr (std::is_same_v<T, std::int64_t>)
    option->check(CLI::Validator(
        [](std::string& v) {
          if (!tools::is_whole_number(v)) return std::string();  // CLI11 names the rest
          try {
            (void)std::stoll(v);
            return std::string();
          } catch (const std::out_of_range&) {
            return v + " is out of range for a whole number";
          }
        },
        ""));  // CLI11 prints the type already
  // `--dir ""` (an unset shell variable) would read as the option not given.
  if constexpr (std::is_same_v<T, std::string>)
    option->check(CLI::Validator(
        [](std::string& v) {
          return v.empty() ? std::string("the value is empty (an unset shell variable?)")
                           : std::string();
        },
        ""));
  return *this;
}
template OptionParser& OptionParser::value(std::string, std::string&);
template OptionParser& OptionParser::value(std::string, int&);
template OptionParser& OptionParser::value(std::string, std::int64_t&);
template OptionParser& OptionParser::value(std::string, double&);

OptionParser& OptionParser::value(std::string name, Device& target) {
  app_->add_option_function<std::string>(
      name,
      [&target, name](const std::string& v) {
        target = Device::parse(v);
#ifndef ZRT_WITH_CUDA
        if (target.is_cuda())
          ZRT_THROW(InvalidArgument, name, " ", v,
                    ": this build of zrt has no CUDA support (configure with -DZRT_CUDA=ON)");
#endif
        ZRT_CHECK_ARG(!target.is_cuda() || cuda_device_count() > target.index, name, " ", v,
                      ", but no such CUDA device is usable here (", cuda_device_count(), " found)");
      },
      "cpu, cuda or cuda:N");
  return *this;
}

OptionParser& OptionParser::flag(std::string name, bool& target) {
  app_->add_flag(name, target);
  return *this;
}

bool OptionParser::given(const std::string& name) const { return app_->count(name) > 0; }

OptionParser& OptionParser::runs(int& reps, bool& json) {
  reps_ = &reps;
  return value("--reps", reps).flag("--json", json);
}

void OptionParser::parse(int argc, char** argv) {
  tools::check_command_line(*app_, argc, argv);
  try {
    app_->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app_->help().c_str());
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    ZRT_THROW(InvalidArgument, tools::parse_error_text(*app_, e), " (zrt-bench ", who_,
              " --help lists the options)");
  }
  ZRT_CHECK_ARG(reps_ == nullptr || *reps_ > 0, "--reps must be positive (got ", reps_ ? *reps_ : 0,
                ")");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid]
                           : (v[mid - 1] + v[mid]) / 2;  // an even count: the middle two's mean
}

std::vector<double> interleaved_median_seconds(const std::vector<std::function<void()>>& fns,
                                               int warmup, int reps,
                                               const std::function<void()>& sync) {
  auto run = [&](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    if (sync) sync();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < warmup; ++i)
    for (const auto& fn : fns) run(fn);
  std::vector<std::vector<double>> times(fns.size());
  for (int i = 0; i < std::max(reps, 1); ++i)
    for (std::size_t f = 0; f < fns.size(); ++f) times[f].push_back(run(fns[f]));
  std::vector<double> medians;
  for (auto& t : times) medians.push_back(median(std::move(t)));
  return medians;
}

double median_seconds(const std::function<void()>& fn, int warmup, int reps,
                      const std::function<void()>& sync) {
  return interleaved_median_seconds({fn}, warmup, reps, sync).front();
}

double median_stream_seconds(const std::function<void()>& fn, Device device, Stream stream,
                             int reps) {
  if (device.is_cpu()) return median_seconds(fn, 2, reps, [&] { stream.synchronize(); });
  std::vector<double> times;
  for (int i = 0; i < 2 + std::max(reps, 1); ++i) {
    Event start(device, true), end(device, true);
    start.record(stream);
    fn();
    end.record(stream);
    end.synchronize();
    if (i >= 2) times.push_back(Event::elapsed_ms(start, end) / 1e3);
  }
  return median(std::move(times));
}

std::string Table::num(double v, int precision) {
  std::ostringstream os;
  os.precision(precision);
  os << std::fixed << v;
  return os.str();
}

void Table::print(bool json) const {
  if (json) {
    for (const auto& row : rows_) {
      nlohmann::ordered_json line = nlohmann::ordered_json::object();
      for (std::size_t i = 0; i < columns_.size() && i < row.size(); ++i) {
        const std::string& c = row[i];
        const bool numeric =
            !c.empty() && c.find_first_not_of("0123456789.-+eE") == std::string::npos;
        if (c.empty())  // no figure for this row: null, not a string
          line[columns_[i]] = nullptr;
        else if (numeric && c.find_first_of(".eE") == std::string::npos)
          line[columns_[i]] = std::stoll(c);
        else if (numeric)
          line[columns_[i]] = std::stod(c);
        else
          line[columns_[i]] = c;
      }
      std::printf("%s\n", line.dump().c_str());
    }
    return;
  }
  std::vector<std::size_t> width(columns_.size());
  for (std::size_t i = 0; i < columns_.size(); ++i) width[i] = columns_[i].size();
  for (const auto& row : rows_)
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  auto print_row = [&](const std::vector<std::string>& r) {
    std::string line;
    for (std::size_t i = 0; i < width.size(); ++i) {
      std::string c = i < r.size() ? r[i] : "";
      line += (i ? "  " : "") + std::string(width[i] - c.size(), ' ') + c;
    }
    std::printf("%s\n", line.c_str());
  };
  print_row(columns_);
  for (const auto& row : rows_) print_row(row);
}

}  // namespace zrt::bench
