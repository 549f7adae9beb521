// Note [A slow start says so]: a phase that outlasts the quiet time is
// printed, a quick one is not, and nothing follows done().
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "tools/train/setup_notice.h"

namespace zrt::train {
namespace {

using namespace std::chrono_literals;

// What was printed to `f` so far.
std::string printed(std::FILE* f) {
  std::fflush(f);
  const long end = std::ftell(f);
  std::string text(static_cast<std::size_t>(end), '\0');
  std::rewind(f);
  const std::size_t n = std::fread(text.data(), 1, text.size(), f);
  text.resize(n);
  std::fseek(f, 0, SEEK_END);
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// What `f` holds once it has `lines` lines, polled, not slept for: a
// loaded machine may take its time (a minute at most).
std::string wait_for_lines(std::FILE* f, std::mutex& io, std::size_t lines) {
  std::string text;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (count(text, "\n") < lines && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
    std::lock_guard lock(io);
    text = printed(f);
  }
  return text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(setup_notice)

BOOST_AUTO_TEST_CASE(a_phase_past_the_quiet_time_is_printed_once_a_period) {
  std::FILE* f = std::tmpfile();
  std::mutex io;
  {
    SetupNotice notice(f, io, true, 50ms, 1h);
    notice.phase("reading the data set x.bin");
    wait_for_lines(f, io, 1);
    notice.done();
    notice.phase("after done");
  }
  const std::string text = printed(f);
  BOOST_TEST(count(text, "zrt-train: reading the data set x.bin (setting up for ") == 1u, text);
  BOOST_TEST(count(text, "\n") == 1u, text);
  std::fclose(f);
}

BOOST_AUTO_TEST_CASE(a_quick_start_and_another_process_print_nothing) {
  std::FILE* f = std::tmpfile();
  std::mutex io;
  {
    SetupNotice quick(f, io, true, 1h, 1h);
    quick.phase("checking that the run fits in memory");
    quick.phase("building the model");
    std::this_thread::sleep_for(50ms);  // time enough for a line due at once
  }                                     // done() by the destructor
  {
    SetupNotice other(f, io, false, 0ms, 1ms);  // inert: not the printing process
    other.phase("building the model");
    std::this_thread::sleep_for(20ms);
  }
  BOOST_TEST(printed(f).empty(), printed(f));
  std::fclose(f);
}

BOOST_AUTO_TEST_CASE(a_long_phase_is_printed_again_every_period) {
  std::FILE* f = std::tmpfile();
  std::mutex io;
  std::string text;
  {
    SetupNotice notice(f, io, true, 1ms, 20ms);
    notice.phase("drawing the weights");
    text = wait_for_lines(f, io, 3);
  }
  BOOST_TEST(count(printed(f), "zrt-train: drawing the weights (setting up for ") >= 3u, text);
  std::fclose(f);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace zrt::train
