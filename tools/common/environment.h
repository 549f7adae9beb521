// Note [Environment variables]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// zrt reads a few ZRT_* environment variables, each where it acts and most
// once per process (a cached parse: the libraries keep no mutable state), so
// a bad value would surface late, in the middle of a run, or not at all. The
// programs check every one at start instead, through the table of
// environment.cpp: each entry names the variable, the values it accepts and
// what it does, and checks a set value by calling the very parser of the
// layer that reads it (so the table cannot accept what the reader refuses).
// A bad value is an InvalidArgument naming the variable, its value and the
// values accepted; a ZRT_* variable the table does not know is most likely a
// typo, and gets a warning naming it. An empty value (ZRT_X=) is the same
// as leaving the variable unset, for every one of them, as a shell's
// `VAR= cmd` is commonly meant. docs/zrt-train.md lists the table.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zrt::tools {

struct EnvVariable {
  const char* name;
  const char* accepted;  // the values accepted, in words
  const char* meaning;
  void (*check)();  // throws InvalidArgument for a bad value; nullptr: any value
};

// Every ZRT_* variable zrt's programs, libraries and scripts read.
std::span<const EnvVariable> environment_variables();

// Checks every variable of the table that is set (InvalidArgument for the
// first bad one) and returns a warning for each ZRT_* variable set that the
// table does not know.
std::vector<std::string> check_environment_variables();

// check_environment_variables, printing its warnings as "PROGRAM: warning: ...".
void check_environment(std::string_view program);

}  // namespace zrt::tools
