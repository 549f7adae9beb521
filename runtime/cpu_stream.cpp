#include "zrt/runtime/cpu_stream.h"

#include <utility>

#include "zrt/runtime/error.h"

namespace zrt {

namespace {
// Set on every CPU stream's thread: a task there never waits for a stream's tasks.
thread_local bool serving_a_stream = false;
}  // namespace

CpuStream::CpuStream(Task thread_init) {
  try {
    thread_ =
        std::thread([this, init = std::move(thread_init)]() mutable { serve(std::move(init)); });
  } catch (const std::system_error& e) {
    ZRT_THROW(ResourceError, "CPU stream: the system refused a thread (", e.what(),
              "): raise the process's thread or memory limit (ulimit -u, ulimit -v), run fewer "
              "ranks, or own no CPU streams (zrt-train --cpu-streams none)");
  }
}

CpuStream::CpuStream(Discarding) : discards_(true) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CpuStream::push(Item item) {
  if (discards_) {
    if (item.always) item.task();  // an event record: complete at once
    return;
  }
  if (on_stream_thread()) {
    item.task();  // a task issuing more work: already in stream order
    return;
  }
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(item));
    ++issued_;
  }
  work_.notify_one();
}

void CpuStream::enqueue(const char* op, Task task) { push({op, std::move(task), false}); }

void CpuStream::enqueue_always(Task task) { push({"", std::move(task), true}); }

void CpuStream::synchronize() {
  if (on_stream_thread()) return;
  std::unique_lock lock(mutex_);
  const std::uint64_t target = issued_;
  idle_.wait(lock, [&] { return done_ >= target; });
  if (failure_) rethrow(failure_, "CPU stream");
}

bool CpuStream::wait_for_a_task(std::chrono::milliseconds stall) {
  if (serving_a_stream) return false;
  std::unique_lock lock(mutex_);
  const std::uint64_t before = done_;
  if (before >= issued_ || before == stalled_at_) return false;
  if (idle_.wait_for(lock, stall, [&] { return done_ != before; })) return true;
  stalled_at_ = before;
  return false;
}

std::exception_ptr CpuStream::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void CpuStream::serve(Task thread_init) {
  serving_a_stream = true;
  try {
    if (thread_init) thread_init();
  } catch (...) {
    std::lock_guard lock(mutex_);
    failure_ = std::current_exception();
  }
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything issued has run
    Item item = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = failure_ && !item.always;
    lock.unlock();
    std::exception_ptr raised;
    if (!skip) {
      try {
        item.task();
      } catch (...) {
        raised = std::current_exception();
      }
    }
    item.task = nullptr;  // release captures before the issuer learns the task ran
    lock.lock();
    if (raised && !failure_) {
      try {
        rethrow(raised, std::string(item.op));
      } catch (...) {
        failure_ = std::current_exception();
      }
    }
    ++done_;
    idle_.notify_all();
  }
}

void CpuStream::rethrow(const std::exception_ptr& failure, const std::string& context) {
  const std::string prefix = context.empty() ? std::string() : context + ": ";
  try {
    std::rethrow_exception(failure);
  } catch (const CommError&) {
    // It names its collective, group and rank: a prefix of the stream's
    // ops ("waiting for an event of a failed CPU stream: all_gather: ")
    // would only bury that.
    throw;
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(prefix + e.what(), e.numbers(), e.file(), e.line());
  }
#define ZRT_RETHROW_AS(Type)                                     \
  catch (const Type& e) {                                        \
    throw Type(prefix + e.what(), e.file(), e.line(), e.expr()); \
  }
  ZRT_RETHROW_AS(CublasError)
  ZRT_RETHROW_AS(CudaError)
  ZRT_RETHROW_AS(InvalidArgument)
  ZRT_RETHROW_AS(InvalidState)
  ZRT_RETHROW_AS(CheckpointError)
  ZRT_RETHROW_AS(ResourceError)
  ZRT_RETHROW_AS(ConsistencyError)
  ZRT_RETHROW_AS(UserError)
  ZRT_RETHROW_AS(Error)
#undef ZRT_RETHROW_AS
  catch (const std::exception& e) {
    throw Error(prefix + e.what());
  }
}

}  // namespace zrt
