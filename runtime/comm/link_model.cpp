// See Note [Link model] in link_model.h.
#include "zrt/runtime/comm/link_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "zrt/runtime/error.h"

namespace zrt {

std::chrono::nanoseconds LinkModel::time(std::uint64_t bytes) const {
  double ns = latency_us * 1e3;
  if (gbps > 0) ns += static_cast<double>(bytes) * 8.0 / gbps;  // 1 Gb/s = 1 bit per ns
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::ceil(ns)));
}

std::string LinkModel::str() const {
  if (!enabled()) return "none";
  std::ostringstream os;
  if (gbps > 0) os << gbps << " Gb/s";
  if (gbps > 0 && latency_us > 0) os << " + ";
  if (latency_us > 0) os << latency_us << " us";
  return os.str();
}

void check_link_model(const LinkModel& m, const char* gbps_name, const char* us_name) {
  ZRT_CHECK_ARG(
      m.gbps == 0 || (std::isfinite(m.gbps) && m.gbps >= kMinLinkGbps && m.gbps <= kMaxLinkGbps),
      gbps_name, " ", m.gbps, " is not a bandwidth in Gb/s from ", kMinLinkGbps, " to ",
      kMaxLinkGbps, " (0: unlimited)");
  ZRT_CHECK_ARG(
      std::isfinite(m.latency_us) && m.latency_us >= 0 && m.latency_us <= kMaxLinkLatencyUs,
      us_name, " ", m.latency_us, " is not a latency in microseconds from 0 to ",
      kMaxLinkLatencyUs);
}

namespace {

// The variable's value (unset or empty: 0): 0, or a number from `lo` to
// `hi`; InvalidArgument naming the variable and its text otherwise.
double env_number(const char* name, const char* what, double lo, double hi) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(env, &end);
  ZRT_CHECK_ARG(errno == 0 && end != env && *end == '\0' && std::isfinite(v) &&
                    (v == 0 || (v >= lo && v <= hi)),
                name, "='", env, "' is not ", what, " from ", lo, " to ", hi,
                " (0: no link model)");
  return v;
}

}  // namespace

LinkModel link_model_from_env() {
  return {
      .gbps = env_number("ZRT_LINK_GBPS", "a bandwidth in Gb/s", kMinLinkGbps, kMaxLinkGbps),
      .latency_us = env_number("ZRT_LINK_US", "a latency in microseconds", 0, kMaxLinkLatencyUs)};
}

void hold_for_link(const LinkModel& model, std::chrono::steady_clock::time_point start,
                   std::uint64_t bytes, const std::function<bool()>& stop) {
  if (!model.enabled()) return;
  const auto until = start + model.time(bytes);
  constexpr auto kSlice = std::chrono::milliseconds(10);
  for (auto now = std::chrono::steady_clock::now(); now < until && !(stop && stop());
       now = std::chrono::steady_clock::now())
    std::this_thread::sleep_until(std::min(until, now + kSlice));
}

}  // namespace zrt
