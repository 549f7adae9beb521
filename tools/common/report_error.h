// How zrt's programs report a failure (Note [User errors and internal
// errors]): one line "PROGRAM: KIND: MESSAGE" on stderr. A UserError's
// message names the flag, file or value; where the check that raised it sits
// in the source is printed only under ZRT_DEBUG=1, on a line of its own. An
// internal error's message carries its location anyway.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

namespace zrt::tools {

// ZRT_DEBUG=1 (check_environment refuses a value other than 0 or 1).
bool debug_enabled();

// e.what(), but a std::filesystem error in the user's words: "PATH:
// cannot create directories (Not a directory)" for the library's
// "filesystem error: cannot create directories: Not a directory [PATH]".
std::string error_text(const std::exception& e);

// Prints `e` as "PROGRAM: KIND: error_text(e)" to `out`, and under ZRT_DEBUG=1 a
// user error's source location as "PROGRAM: debug: check `...` failed at
// file:line".
void report_error(std::string_view program, const std::exception& e,
                  std::string_view kind = "error", std::FILE* out = stderr);

}  // namespace zrt::tools
