// zrt's one exception hierarchy and the check macros built on one generic macro.
//
// Every error records the failed expression, file and line (Error::where()).
// Note [User errors and internal errors] says which messages show them.
// Destructors in zrt never throw: they log through `report_in_destructor`.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace zrt {

// Note [User errors and internal errors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A message is read by whoever can act on it. A UserError is a problem in
// what the user gave (a flag, a file, a value, an environment variable) or
// met in the machine (memory, disk, threads, a peer that failed, a damaged
// checkpoint): its message names the flag, file or value and what to do, and
// the source location of the check stays out of it, since the user cannot
// act on `model_config.cpp:36`. The location is kept in the object
// (where()), and the programs print it under ZRT_DEBUG=1 (report_error in
// tools/common/report_error.h). Every other Error is an internal invariant
// failure, a bug in zrt or in the code calling it (InvalidState: a call in
// the wrong state; CudaError: the CUDA runtime failed under a kernel or a
// copy): its message ends with " [check `expr` failed at file:line]", which
// is what a bug report needs. The choice is made by the type, once, in
// throw_error: a check says what went wrong, and its type says for whom.
// One exception: a call out of order that the caller makes and can mend (a
// step with no backward, a scope inside another, a view read outside its
// scope) is an InvalidState written in the caller's terms, ZRT_CHECK_CALL
// and ZRT_THROW_CALL: its message keeps the location out too (throw_error's
// Said::to_caller; every check macro is the one body, ZRT_CHECK_SAID).
class Error : public std::runtime_error {
 public:
  Error(std::string what, const char* file = "", int line = 0, const char* expr = "")
      : std::runtime_error(std::move(what)), file_(file), line_(line), expr_(expr ? expr : "") {}
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  // The failed check's expression; empty for a ZRT_THROW.
  const char* expr() const noexcept { return expr_; }
  // "check `expr` failed at file:line" (or "at file:line"); empty when no
  // location was recorded.
  std::string where() const;

 private:
  const char* file_;
  int line_;
  const char* expr_;
};

// A problem the user can act on; its message has no source location (Note
// [User errors and internal errors]).
class UserError : public Error {
 public:
  using Error::Error;
};

#define ZRT_DEFINE_ERROR(Name, Base) \
  class Name : public Base {         \
   public:                           \
    using Base::Base;                \
  };

// User errors.
ZRT_DEFINE_ERROR(InvalidArgument, UserError)  // the caller passed something wrong
ZRT_DEFINE_ERROR(CommError, UserError)        // a collective failed or timed out
ZRT_DEFINE_ERROR(CheckpointError, UserError)  // reading or writing a checkpoint failed
ZRT_DEFINE_ERROR(ResourceError,
                 UserError)  // the system lacks a thread, memory, disk space or a library
ZRT_DEFINE_ERROR(ConsistencyError,
                 UserError)  // ranks that must hold equal data do not (Note [Consistency check])
ZRT_DEFINE_ERROR(NcclError, CommError)
ZRT_DEFINE_ERROR(MpiError, CommError)
// Internal errors: the message keeps the source location.
ZRT_DEFINE_ERROR(InvalidState, Error)  // the call is wrong for the object's state
ZRT_DEFINE_ERROR(CudaError, Error)     // the CUDA runtime reported an error
ZRT_DEFINE_ERROR(CublasError, CudaError)
#undef ZRT_DEFINE_ERROR

// Out of memory, with the allocator's view of the world at the time.
class OutOfMemory : public UserError {
 public:
  struct Numbers {
    std::size_t requested = 0;  // bytes asked for
    std::size_t allocated = 0;  // bytes handed out and not yet freed
    std::size_t reserved = 0;   // bytes held from the raw source (allocated + cached)
    std::size_t free = 0;       // bytes the raw source says are still free (0 if unknown)
    std::size_t cap = 0;        // the configured memory cap (0 = none)
    // Host memory under the address-space limit (ulimit -v), which may be
    // what ran out (Note [Address-space limit]); 0 when there is none.
    std::size_t address_space_limit = 0;
  };
  OutOfMemory(std::string what, Numbers n, const char* file = "", int line = 0)
      : UserError(std::move(what), file, line), numbers_(n) {}
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

// " [check `expr` failed at file:line]" or " [at file:line]".
std::string location_suffix(const char* expr, const char* file, int line);

// Whose terms a message is in (Note [User errors and internal errors]):
// by_kind: an internal error's message ends with the location, a user
// error's does not; to_caller: a call out of order, said in the caller's
// terms, never does. The location is kept in where() either way.
enum class Said { by_kind, to_caller };

// Throws E with `msg`, located as `said` says.
template <class E, Said said = Said::by_kind>
[[noreturn]] void throw_error(const char* expr, const char* file, int line, std::string msg) {
  if constexpr (said == Said::by_kind && !std::is_base_of_v<UserError, E>)
    msg += location_suffix(expr, file, line);
  throw E(std::move(msg), file, line, expr);
}

}  // namespace detail

// Called by destructors that hit an error: prints to stderr and goes on;
// while an exception unwinds, only under ZRT_DEBUG=1 (it is most often the
// propagating failure seen again).
void report_in_destructor(const char* where, const std::exception& e) noexcept;

}  // namespace zrt

// The one generic check: throws ErrorType with a message built from the
// remaining arguments (streamed together), recording the expression, file and
// line (in the message too for an internal error).
#define ZRT_CHECK_AS(ErrorType, cond, ...) \
  ZRT_CHECK_SAID(ErrorType, by_kind, cond, #cond, __VA_ARGS__)

// A call out of order, said in the caller's terms (Note [User errors and
// internal errors]): InvalidState without the location in its message.
#define ZRT_CHECK_CALL(cond, ...) \
  ZRT_CHECK_SAID(::zrt::InvalidState, to_caller, cond, #cond, __VA_ARGS__)
#define ZRT_THROW_CALL(...)                                                        \
  ::zrt::detail::throw_error<::zrt::InvalidState, ::zrt::detail::Said::to_caller>( \
      "", __FILE__, __LINE__, ::zrt::detail::concat(__VA_ARGS__))

// Both checks' body; `said`: a detail::Said; `text`: the condition as the
// check was written (stringified there, before any macro in it expands).
#define ZRT_CHECK_SAID(ErrorType, said, cond, text, ...)                 \
  do {                                                                   \
    if (!(cond)) [[unlikely]]                                            \
      ::zrt::detail::throw_error<ErrorType, ::zrt::detail::Said::said>(  \
          text, __FILE__, __LINE__, ::zrt::detail::concat(__VA_ARGS__)); \
  } while (0)

#define ZRT_CHECK_ARG(cond, ...) \
  ZRT_CHECK_SAID(::zrt::InvalidArgument, by_kind, cond, #cond, __VA_ARGS__)
#define ZRT_CHECK_STATE(cond, ...) \
  ZRT_CHECK_SAID(::zrt::InvalidState, by_kind, cond, #cond, __VA_ARGS__)
#define ZRT_THROW(ErrorType, ...) \
  ::zrt::detail::throw_error<ErrorType>("", __FILE__, __LINE__, ::zrt::detail::concat(__VA_ARGS__))
