// --trace as the run goes: each step's events appended to the rank's file.
//
// Note [Streamed trace]
// ~~~~~~~~~~~~~~~~~~~~~
// A run's trace is written as it trains, each step's events appended and
// flushed after the step, so a run holds no more than a step of them however
// long it runs, and a run killed outright (SIGKILL, out of memory) leaves
// the steps it finished. The file is the Chrome trace format's JSON array:
// "[" and one event a line, "]" when the run ends (finished, stopped or
// failed); the format lets the file of a killed run lack the closing "]"
// (chrome://tracing and Perfetto read it). The file is opened when training
// begins, so a run refused on its input writes none, and it is written in
// place (a link through to its target, a stream directly), like --metrics.
// A write that fails (disk full) stops the writing and fails the run once
// it has finished, after its checkpoints and --save: the trace is no reason
// to lose the training. A stream whose reader went away (`| head`) stops
// the writing too, and the run as a closed stdout does (SIGPIPE), exit 0.
#pragma once

#include <fstream>
#include <functional>
#include <string>

#include "zrt/runtime/trace.h"

namespace zrt::train {

// Opens `out` onto `path`, output `flag` (--metrics, --trace) of a run of
// `world_size` ranks, as open_output_stream does: a FIFO no process reads
// yet is said to be waited for (the other ranks wait for this one up to the
// collective timeout), and the wait ends, nothing opened (false), once
// `stopped` says so (a stop signal).
bool open_run_output(std::ofstream& out, const std::string& flag, const std::string& path,
                     std::ios::openmode mode, int world_size, const std::function<bool()>& stopped);

class TraceStream {
 public:
  // Nothing is written while `tracer` is null (no --trace). `world_size`
  // and `stopped` as open_run_output takes them.
  TraceStream(TracerPtr tracer, std::string path, int world_size, std::function<bool()> stopped);
  TraceStream(const TraceStream&) = delete;
  TraceStream& operator=(const TraceStream&) = delete;
  // Training begins: opens the file (truncating it) and writes what the
  // tracer holds. Throws ResourceError when the file cannot be opened; a
  // FIFO given up on for a stop is not written.
  void begin();
  // After each step: appends the events since the last flush.
  void flush();
  // The run has ended: the last events and "]"; throws ResourceError when a
  // write failed, here or earlier.
  void finish();
  // A run that failed after begin(): its events so far, best effort.
  ~TraceStream();

 private:
  void append();
  void note_failure();  // from errno

  TracerPtr tracer_;
  std::string path_;
  int world_size_;
  std::function<bool()> stopped_;
  std::ofstream out_;
  bool first_ = true;
  bool finished_ = false;
  std::string error_;         // the first failed write; nothing is written after it
  bool reader_gone_ = false;  // a stream's reader went away: nothing more is written
};

}  // namespace zrt::train
