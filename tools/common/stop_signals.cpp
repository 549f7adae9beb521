#include "tools/common/stop_signals.h"

#include <signal.h>
#include <time.h>

#include <initializer_list>

namespace zrt::tools {

StopSignalTimes::Kind StopSignalTimes::take() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const std::int64_t ns = std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec + 1;  // never 0
  std::int64_t first = 0;
  // Two handlers at once (copies on two threads): one is the first.
  if (first_ns_.compare_exchange_strong(first, ns)) return Kind::first;
  return ns - first >= kCopyWindowNs ? Kind::second : Kind::copy;
}

void install_stop_handlers(void (*handler)(int), void (*broken_pipe)(int)) {
  ::signal(SIGXFSZ, SIG_IGN);
  if (broken_pipe == nullptr) {
    ::signal(SIGPIPE, SIG_IGN);
  } else {
    struct sigaction pipe {};
    pipe.sa_handler = broken_pipe;
    sigemptyset(&pipe.sa_mask);
    sigaction(SIGPIPE, &pipe, nullptr);
  }
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  // SIGXCPU: the soft CPU-time limit (ulimit -S -t, a batch system's
  // warning before the hard limit's SIGKILL), sent again every second.
  for (const int sig : {SIGTERM, SIGINT, SIGHUP, SIGXCPU}) {
    // Ignored when started (a shell's background job): stays ignored, so a
    // Ctrl-C meant for the foreground does not stop it.
    struct sigaction was {};
    sigaction(sig, nullptr, &was);
    if (was.sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr);
  }
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGHUP);
  sigaddset(&stops, SIGXCPU);
  sigaddset(&stops, SIGPIPE);
  sigprocmask(SIG_UNBLOCK, &stops, nullptr);
}

}  // namespace zrt::tools
