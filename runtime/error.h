// zrt's one exception hierarchy and the check macros built on one generic macro.
//
// Every error carries the failed expression, file and line, so a message from
// deep inside a collective or a kernel launch says where it came from.
// Destructors in zrt never throw: they log through `report_in_destructor`.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace zrt {

class Error : public std::runtime_error {
 public:
  Error(std::string what, const char* file = "", int line = 0)
      : std::runtime_error(std::move(what)), file_(file), line_(line) {}
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  const char* file_;
  int line_;
};

#define ZRT_DEFINE_ERROR(Name, Base) \
  class Name : public Base {         \
   public:                           \
    using Base::Base;                \
  };

ZRT_DEFINE_ERROR(InvalidArgument, Error)  // the caller passed something wrong
ZRT_DEFINE_ERROR(InvalidState, Error)     // the call is wrong for the object's state
ZRT_DEFINE_ERROR(CommError, Error)        // a collective failed or timed out
ZRT_DEFINE_ERROR(CheckpointError, Error)  // reading or writing a checkpoint failed
ZRT_DEFINE_ERROR(ResourceError, Error)    // the system refused a thread, memory or disk space
ZRT_DEFINE_ERROR(ConsistencyError,
                 Error)  // ranks that must hold equal data do not (Note [Consistency check])
ZRT_DEFINE_ERROR(CudaError, Error)  // the CUDA runtime reported an error
ZRT_DEFINE_ERROR(CublasError, CudaError)
ZRT_DEFINE_ERROR(NcclError, CommError)
ZRT_DEFINE_ERROR(MpiError, CommError)
#undef ZRT_DEFINE_ERROR

// Out of memory, with the allocator's view of the world at the time.
class OutOfMemory : public Error {
 public:
  struct Numbers {
    std::size_t requested = 0;  // bytes asked for
    std::size_t allocated = 0;  // bytes handed out and not yet freed
    std::size_t reserved = 0;   // bytes held from the raw source (allocated + cached)
    std::size_t free = 0;       // bytes the raw source says are still free (0 if unknown)
    std::size_t cap = 0;        // the configured memory cap (0 = none)
  };
  OutOfMemory(std::string what, Numbers n, const char* file = "", int line = 0)
      : Error(std::move(what), file, line), numbers_(n) {}
  const Numbers& numbers() const noexcept { return numbers_; }

 private:
  Numbers numbers_;
};

namespace detail {

template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <class E>
[[noreturn]] void throw_error(const char* expr, const char* file, int line,
                              const std::string& msg) {
  std::string what = msg;
  if (expr && *expr)
    what += detail::concat(" [check `", expr, "` failed");
  else
    what += " [";
  what += detail::concat(expr && *expr ? " at " : "at ", file, ":", line, "]");
  throw E(std::move(what), file, line);
}

}  // namespace detail

// Called by destructors that hit an error: prints to stderr and goes on.
void report_in_destructor(const char* where, const std::exception& e) noexcept;

}  // namespace zrt

// The one generic check: throws ErrorType with a message built from the
// remaining arguments (streamed together), the expression, file and line.
#define ZRT_CHECK_AS(ErrorType, cond, ...)                                       \
  do {                                                                           \
    if (!(cond)) [[unlikely]]                                                    \
      ::zrt::detail::throw_error<ErrorType>(#cond, __FILE__, __LINE__,           \
                                            ::zrt::detail::concat(__VA_ARGS__)); \
  } while (0)

#define ZRT_CHECK_ARG(cond, ...) ZRT_CHECK_AS(::zrt::InvalidArgument, cond, __VA_ARGS__)
#define ZRT_CHECK_STATE(cond, ...) ZRT_CHECK_AS(::zrt::InvalidState, cond, __VA_ARGS__)
#define ZRT_THROW(ErrorType, ...) \
  ::zrt::detail::throw_error<ErrorType>("", __FILE__, __LINE__, ::zrt::detail::concat(__VA_ARGS__))
