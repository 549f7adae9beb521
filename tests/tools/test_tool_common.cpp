// What zrt's programs share (tools/common): the report of an error (Note
// [User errors and internal errors]) and the check of the ZRT_* environment
// (Note [Environment variables]).
#include <unistd.h>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tools/common/cli_rules.h"
#include "tools/common/environment.h"
#include "tools/common/report_error.h"
#include "tools/common/stop_signals.h"
#include "zrt/runtime/error.h"

using namespace zrt;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// report_error's output with ZRT_DEBUG set to `debug` (nullptr: unset).
std::string reported(const std::exception& e, const char* debug) {
  if (debug)
    ::setenv("ZRT_DEBUG", debug, 1);
  else
    ::unsetenv("ZRT_DEBUG");
  std::FILE* f = std::tmpfile();
  tools::report_error("zrt-x", e, "error", f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  std::fclose(f);
  ::unsetenv("ZRT_DEBUG");
  return out;
}

template <class E>
E raised(const char* msg) {
  try {
    ZRT_CHECK_AS(E, 1 + 1 == 3, msg);
  } catch (const E& e) {
    return e;
  }
  throw std::logic_error("no throw");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tool_common)

// A launcher's copy of a stop signal (timeout, mpirun: to the process and
// its group) is not the user's second, which exits at once.
BOOST_AUTO_TEST_CASE(a_copy_of_a_stop_signal_is_not_a_second_one) {
  using Kind = tools::StopSignalTimes::Kind;
  tools::StopSignalTimes times;
  BOOST_TEST(!times.requested());
  BOOST_TEST((times.take() == Kind::first));
  BOOST_TEST(times.requested());
  BOOST_TEST((times.take() == Kind::copy));
  std::this_thread::sleep_for(std::chrono::nanoseconds(tools::StopSignalTimes::kCopyWindowNs) +
                              std::chrono::milliseconds(20));
  BOOST_TEST((times.take() == Kind::second));
}

// A call out of order (ZRT_CHECK_CALL) reads as a user error does.
BOOST_AUTO_TEST_CASE(a_user_error_shows_its_location_under_zrt_debug_only) {
  InvalidState out_of_order("");
  try {
    ZRT_CHECK_CALL(1 + 1 == 3, "--steps must be positive");
  } catch (const InvalidState& e) {
    out_of_order = e;
  }
  const InvalidArgument user = raised<InvalidArgument>("--steps must be positive");
  for (const Error* e :
       {static_cast<const Error*>(&user), static_cast<const Error*>(&out_of_order)}) {
    for (const char* debug : {static_cast<const char*>(nullptr), "0"})
      BOOST_TEST(reported(*e, debug) == "zrt-x: error: --steps must be positive\n");
    const std::string out = reported(*e, "1");
    BOOST_TEST(has(out,
                   "zrt-x: error: --steps must be positive\nzrt-x: debug: check `1 + 1 == 3` "
                   "failed at "),
               out);
    BOOST_TEST(has(out, "test_tool_common.cpp:"), out);
  }
}

BOOST_AUTO_TEST_CASE(an_internal_error_shows_its_location_always_and_once) {
  const auto e = raised<InvalidState>("handle in state idle");
  for (const char* debug : {static_cast<const char*>(nullptr), "1"}) {
    const std::string out = reported(e, debug);
    BOOST_TEST(has(out, "zrt-x: error: handle in state idle [check `1 + 1 == 3` failed at "), out);
    BOOST_TEST(!has(out, "debug:"), out);
  }
}

// Every variable the table checks refuses a nonsense value, naming the
// variable, the value and what it accepts; unset, it is not read.
BOOST_AUTO_TEST_CASE(every_checked_variable_refuses_nonsense) {
  int checked = 0;
  for (const tools::EnvVariable& v : tools::environment_variables()) {
    if (!v.check) continue;
    ++checked;
    // A directory not there yet is made later: a path that is no directory is the nonsense.
    const std::string bad =
        std::string_view(v.name) == "ZRT_FLIGHT_RECORDER_DIR" ? "/dev/null" : "nonsense";
    ::setenv(v.name, bad.c_str(), 1);
    try {
      tools::check_environment_variables();
      BOOST_ERROR(v.name << "=" << bad << " was accepted");
    } catch (const InvalidArgument& e) {
      const std::string w = e.what();
      BOOST_TEST(has(w, std::string(v.name) + "='" + bad + "'"), w);
      BOOST_TEST(!has(w, ".cpp:"), w);
    }
    ::unsetenv(v.name);
  }
  BOOST_TEST(checked == 14);
  BOOST_TEST(tools::check_environment_variables().empty());
}

BOOST_AUTO_TEST_CASE(the_accepted_values_pass) {
  std::filesystem::remove_all("not-made-yet");  // an earlier failed run's
  for (auto [name, value] : {std::pair{"ZRT_TF32", "1"},
                             {"ZRT_TF32", "off"},
                             {"ZRT_SIMPLE_KERNELS", "layernorm,attention"},
                             {"ZRT_SIMPLE_KERNELS", "all"},
                             {"ZRT_DEBUG", "0"},
                             {"ZRT_CPU_STREAMS", "all"},
                             {"ZRT_ATTENTION_PATH", "gemm"},
                             {"ZRT_COMM_TIMEOUT_S", "2.5"},
                             {"ZRT_LINK_GBPS", "100"},
                             {"ZRT_LINK_GBPS", "0"},
                             {"ZRT_LINK_US", "5.5"},
                             {"ZRT_POISON_MEMORY", "1"},
                             {"ZRT_FLIGHT_RECORDER_DIR", "."},
                             {"ZRT_FLIGHT_RECORDER_DIR", "not-made-yet/job-1"},
                             {"ZRT_FLIGHT_RECORDER_DIR", ""}}) {
    ::setenv(name, value, 1);
    BOOST_CHECK_NO_THROW(tools::check_environment_variables());
    ::unsetenv(name);
  }
  // A flight recorder directory not made yet is made when a record is
  // written, not by the check (zrt-ckpt and zrt-bench write none)...
  BOOST_TEST(!std::filesystem::exists("not-made-yet"));
}

// ... but one that could not be made is refused now, not when a collective
// has failed.
BOOST_AUTO_TEST_CASE(a_flight_recorder_dir_that_cannot_be_made_is_refused) {
  namespace fs = std::filesystem;
  const std::string file = "zrt-test-flight-file." + std::to_string(::getpid());
  std::ofstream(file) << "x";
  // Links are followed before `..`, as the kernel does: proc-link/.. is /proc.
  const std::string proc_link = file + ".proc", dangling = file + ".dangling";
  fs::create_directory_symlink("/proc/self", proc_link);
  fs::create_directory_symlink(file + ".nowhere", dangling);
  for (auto [value, says] :
       {std::pair<std::string, std::string>{"/proc/zrt-not-here/job", "virtual filesystem"},
        {"/sys/zrt-not-here", "virtual filesystem"},
        {proc_link + "/../zrt-x", "virtual filesystem"},
        {dangling, "is a link to " + file + ".nowhere, which does not exist"},
        {file + "/job",
         "cannot be made: " + std::filesystem::absolute(file).string() + " is not a directory"},
        {file, "is not a directory"}}) {
    ::setenv("ZRT_FLIGHT_RECORDER_DIR", value.c_str(), 1);
    try {
      tools::check_environment_variables();
      BOOST_ERROR("ZRT_FLIGHT_RECORDER_DIR=" << value << " was accepted");
    } catch (const InvalidArgument& e) {
      const std::string w = e.what();
      BOOST_TEST(has(w, "ZRT_FLIGHT_RECORDER_DIR='" + value + "'"), w);
      BOOST_TEST(has(w, says), w);
    }
  }
  // ... and a `..` past a link into a real directory is that directory.
  fs::create_directories(file + ".a/b/c");
  fs::create_directories("proc");  // ./proc, a directory on this disk
  fs::create_directory_symlink(fs::absolute(file + ".a/b/c"), file + ".d");
  ::setenv("ZRT_FLIGHT_RECORDER_DIR", (file + ".d/../../../proc/job").c_str(), 1);
  BOOST_CHECK_NO_THROW(tools::check_environment_variables());
  ::unsetenv("ZRT_FLIGHT_RECORDER_DIR");
  for (const std::string& made : {file, proc_link, dangling, file + ".a", file + ".d"})
    fs::remove_all(made);
  fs::remove("proc");
}

// The C++ library's filesystem errors read as the path, then what failed.
BOOST_AUTO_TEST_CASE(filesystem_errors_name_the_path_first) {
  const std::filesystem::filesystem_error e("cannot create directories",
                                            std::filesystem::path("huge.txt"),
                                            std::make_error_code(std::errc::not_a_directory));
  BOOST_TEST(tools::error_text(e) == "huge.txt: cannot create directories (Not a directory)");
  BOOST_TEST(tools::error_text(std::runtime_error("plain")) == "plain");
}

// A host allocation the system refused reads as that, not as a C++ class.
BOOST_AUTO_TEST_CASE(a_refused_allocation_reads_as_out_of_host_memory) {
  const std::string text = tools::error_text(std::bad_alloc());
  BOOST_TEST(text.starts_with("out of host memory: the system refused an allocation"), text);
  BOOST_TEST(has(text, "ulimit -v"), text);
}

BOOST_AUTO_TEST_CASE(an_unknown_zrt_variable_is_named_in_a_warning) {
  ::setenv("ZRT_SIMPEL_KERNELS", "all", 1);
  ::setenv("ZRTX_OTHER", "1", 1);  // not zrt's prefix
  const auto warnings = tools::check_environment_variables();
  ::unsetenv("ZRT_SIMPEL_KERNELS");
  ::unsetenv("ZRTX_OTHER");
  BOOST_TEST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(has(warnings[0], "ZRT_SIMPEL_KERNELS is set but zrt reads no such variable"),
             warnings[0]);
}

// docs/zrt-train.md lists every variable of the table, and the table every
// variable the docs list (one missing from it draws the "a typo?" warning
// from every program wherever it is set, e.g. a gpu-check.sh setting).
BOOST_AUTO_TEST_CASE(the_docs_list_every_variable) {
  std::ifstream in(std::string(ZRT_SOURCE_DIR) + "/docs/zrt-train.md");
  std::stringstream doc;
  doc << in.rdbuf();
  for (const tools::EnvVariable& v : tools::environment_variables())
    BOOST_TEST(has(doc.str(), std::string("| `") + v.name + "` |"), v.name);
  const std::string text = doc.str();
  // Each row "| `ZRT_NAME` |" at the start of a line.
  int rows = 0;
  const std::string row_start = "\n| `ZRT_";
  for (size_t at = text.find(row_start); at != std::string::npos;
       at = text.find(row_start, at + 1), ++rows) {
    const size_t name_start = at + 4, name_end = text.find('`', name_start);
    BOOST_TEST_REQUIRE(name_end != std::string::npos);
    const std::string name = text.substr(name_start, name_end - name_start);
    BOOST_TEST(text.compare(name_end, 3, "` |") == 0,
               name << ": a malformed row in docs/zrt-train.md");
    bool known = false;
    for (const tools::EnvVariable& v : tools::environment_variables())
      known = known || name == v.name;
    BOOST_TEST(known, name << " is in docs/zrt-train.md but not in the variables' table");
  }
  BOOST_TEST(rows >= 10);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A small command line: a scalar, a list, a path, a rate, a flag, or one
// required command.
struct ToyCli {
  CLI::App app{"toy"};
  int steps = 0;
  std::vector<int> hidden;
  std::string out;
  double lr = 0;
  bool on = false;
  explicit ToyCli(bool command = false) {
    app.add_option("--steps", steps);
    app.add_option("--hidden", hidden)->delimiter(',');
    app.add_option("--out", out);
    app.add_option("--lr", lr);
    app.add_flag("--on", on);
    if (command) app.add_subcommand("run", "run it")->add_option("file", out)->required();
    if (command) app.require_subcommand(1);
  }
  // What a user of `toy ARGS` reads: the check of the command line, then the parse.
  std::string error(std::vector<const char*> args) {
    args.insert(args.begin(), "toy");
    try {
      tools::check_command_line(app, static_cast<int>(args.size()), args.data());
      app.parse(static_cast<int>(args.size()), const_cast<char**>(args.data()));
    } catch (const CLI::ParseError& e) {
      return tools::parse_error_text(app, e);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(command_line_errors_name_the_flag_in_the_users_words) {
  const std::vector<std::pair<std::vector<const char*>, std::string>> cases = {
      {{"--steps", "1", "--steps", "2"}, "--steps is given more than once; give it once"},
      {{"--hidden", "64", "--on", "--hidden=32"},
       "--hidden is given more than once; give it once (a list goes in one value, "
       "comma-separated)"},
      {{"--steps", "1.5"}, "--steps: 1.5 is not a whole number"},
      {{"--on", "--steps"}, "--steps needs a whole number"},
      {{"--bogus", "3", "--on"}, "unknown flag --bogus"},
      {{"--steps", "3", "4"},
       "unexpected value '4' (a flag takes one value, a command the arguments --help lists)"},
      // A flag as another flag's value: CLI11 would take it as the value.
      {{"--out", "--steps", "2"},
       "--out needs a value, but the next argument is the flag --steps (a value that begins "
       "with -- goes as --out=VALUE)"},
      {{"--out", "--on"},
       "--out needs a value, but the next argument is the flag --on (a value that begins with "
       "-- goes as --out=VALUE)"},
      {{"--out", "--lr=3"},
       "--out needs a value, but the next argument is the flag --lr (a value that begins with "
       "-- goes as --out=VALUE)"},
      // Numbers CLI11 reads in another base.
      {{"--steps", "010"}, "--steps: 010 has a leading zero; write the number in decimal"},
      {{"--steps=0x10"}, "--steps: 0x10 has a base prefix; write the number in decimal"},
      {{"--hidden", "64,0b11"}, "--hidden: 0b11 has a base prefix; write the number in decimal"},
      {{"--lr", "0x1p-3"}, "--lr: 0x1p-3 has a base prefix; write the number in decimal"},
      // ... past leading white space, which CLI11 skips too.
      {{"--steps", " 010"}, "--steps:  010 has a leading zero; write the number in decimal"},
      {{"--steps", "\t0x10"}, "--steps: \t0x10 has a base prefix; write the number in decimal"},
  };
  for (const auto& [args, expected] : cases) {
    ToyCli cli;
    const std::string got = cli.error(args);
    BOOST_TEST(got == expected, "toy " << args.size() << " args: got '" << got << "'");
  }
  for (const auto& [args, expected] : std::vector<std::pair<std::vector<const char*>, std::string>>{
           {{}, "no command given (one of: run)"},
           {{"walk"}, "unknown command 'walk' (one of: run)"},
           {{"--x"}, "unknown flag --x before a command (one of: run)"},
           {{"run"}, "file is required"},
           // An unknown flag is named before a missing argument.
           {{"run", "--x"}, "unknown flag --x"},
           {{"run", "--x", "-y"}, "unknown flag --x, -y"}}) {
    ToyCli cli(true);
    const std::string got = cli.error(args);
    BOOST_TEST(got == expected, "toy " << args.size() << " args: got '" << got << "'");
  }
  ToyCli fine;  // a list in one value, a repeated value that is no flag
  BOOST_TEST(fine.error({"--hidden", "64,32", "--steps", "2"}).empty());
  BOOST_TEST((fine.hidden == std::vector<int>{64, 32}));
  ToyCli values;  // zeros and values that begin with -- but name no flag
  BOOST_TEST(
      values.error({"--steps", "0", "--lr", "0.01", "--out=--steps", "--hidden", "0"}).empty());
  BOOST_TEST(values.out == "--steps");
  BOOST_TEST(values.lr == 0.01);
  for (const char* rate : {"0.5", "0e0", "-0.1", "00.5", "10"}) {  // decimal reals stay valid
    ToyCli reals;
    BOOST_TEST(reals.error({"--lr", rate}).empty(), rate);
  }
  ToyCli dashes;
  BOOST_TEST(dashes.error({"--out", "--results", "--steps", "-3"}).empty());
  BOOST_TEST(dashes.out == "--results");
  BOOST_TEST(dashes.steps == -3);
}
