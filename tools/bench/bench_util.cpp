#include "tools/bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "zrt/runtime/error.h"

namespace zrt::bench {

OptionParser& OptionParser::value(std::string name, std::function<void(const std::string&)> set) {
  options_.push_back({std::move(name), true, std::move(set)});
  return *this;
}

OptionParser& OptionParser::value(std::string name, std::string& target) {
  return value(std::move(name), [&target](const std::string& v) { target = v; });
}

OptionParser& OptionParser::value(std::string name, int& target) {
  return value(std::move(name), [&target](const std::string& v) { target = std::stoi(v); });
}

OptionParser& OptionParser::value(std::string name, std::int64_t& target) {
  return value(std::move(name), [&target](const std::string& v) { target = std::stoll(v); });
}

OptionParser& OptionParser::value(std::string name, Device& target) {
  return value(std::move(name), [&target](const std::string& v) { target = Device::parse(v); });
}

OptionParser& OptionParser::flag(std::string name, bool& target) {
  options_.push_back({std::move(name), false, [&target](const std::string&) { target = true; }});
  return *this;
}

void OptionParser::parse(int argc, char** argv) const {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!usage_.empty() && (a == "--help" || a == "-h")) {
      std::printf("%s\n", usage_.c_str());
      std::exit(0);
    }
    const Option* option = nullptr;
    for (const Option& o : options_)
      if (o.name == a) option = &o;
    if (!option) ZRT_THROW(InvalidArgument, who_, ": unknown option ", a);
    if (!option->takes_value) {
      option->set({});
      continue;
    }
    ZRT_CHECK_ARG(i + 1 < argc, who_, ": ", a, " needs a value");
    option->set(argv[++i]);
  }
}

double median_seconds(const std::function<void()>& fn, int warmup, int reps,
                      const std::function<void()>& sync) {
  for (int i = 0; i < warmup; ++i) {
    fn();
    if (sync) sync();
  }
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(std::max(reps, 1)));
  for (int i = 0; i < std::max(reps, 1); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    if (sync) sync();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
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
      std::string line = "{";
      for (std::size_t i = 0; i < columns_.size() && i < row.size(); ++i) {
        const std::string& c = row[i];
        bool numeric = !c.empty() && c.find_first_not_of("0123456789.-+eE") == std::string::npos;
        line += (i ? ", \"" : "\"") + columns_[i] + "\": " + (numeric ? c : "\"" + c + "\"");
      }
      std::printf("%s}\n", line.c_str());
    }
    return;
  }
  std::vector<std::size_t> width(columns_.size());
  for (std::size_t i = 0; i < columns_.size(); ++i) width[i] = columns_[i].size();
  for (const auto& row : rows_)
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
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
