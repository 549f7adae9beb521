#include "tools/common/stop_signals.h"

#include <signal.h>

namespace zrt::tools {

void install_stop_handlers(void (*handler)(int)) {
  ::signal(SIGXFSZ, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  sigprocmask(SIG_UNBLOCK, &stops, nullptr);
}

}  // namespace zrt::tools
