#include "tools/train/setup_notice.h"

#include <cstdint>
#include <utility>

namespace zrt::train {

SetupNotice::SetupNotice(std::FILE* out, std::mutex& io, bool prints,
                         std::chrono::milliseconds quiet, std::chrono::milliseconds every)
    : out_(out), io_(io), quiet_(quiet), every_(every) {
  if (prints) thread_ = std::thread([this] { watch(); });
}

SetupNotice::~SetupNotice() { done(); }

void SetupNotice::phase(std::string what) {
  {
    std::lock_guard lock(m_);
    what_ = std::move(what);
    next_line_ = Clock::now() + quiet_;
    ++phases_;
  }
  changed_.notify_one();
}

void SetupNotice::done() {
  {
    std::lock_guard lock(m_);
    done_ = true;
  }
  changed_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void SetupNotice::watch() {
  std::unique_lock lock(m_);
  while (!done_) {
    if (what_.empty()) {
      changed_.wait(lock);
      continue;
    }
    const Clock::time_point due = next_line_;
    const std::uint64_t phase = phases_;
    // Woken early by a new phase (with a due time of its own) or the end.
    if (changed_.wait_until(lock, due, [&] { return done_ || phases_ != phase; })) continue;
    next_line_ = due + every_;
    const std::string what = what_;
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count();
    lock.unlock();  // the lines' lock alone while printing: phase() never waits on it
    {
      std::lock_guard out(io_);
      std::fprintf(out_, "zrt-train: %s (setting up for %lld s)\n", what.c_str(),
                   static_cast<long long>(seconds));
      std::fflush(out_);
    }
    lock.lock();
  }
}

}  // namespace zrt::train
