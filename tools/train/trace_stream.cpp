#include "tools/train/trace_stream.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

#include "tools/common/report_error.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/io/output_path.h"

namespace zrt::train {

bool open_run_output(std::ofstream& out, const std::string& flag, const std::string& path,
                     std::ios::openmode mode, int world_size,
                     const std::function<bool()>& stopped) {
  return open_output_stream(
      out, path, mode,
      [&] {
        std::fprintf(stderr,
                     "zrt-train: %s %s is a FIFO that no process reads yet: waiting for its "
                     "reader%s\n",
                     flag.c_str(), path.c_str(),
                     world_size > 1 ? " (the other ranks wait for this one up to the collective "
                                      "timeout, ZRT_COMM_TIMEOUT_S)"
                                    : "");
      },
      stopped);
}

TraceStream::TraceStream(TracerPtr tracer, std::string path, int world_size,
                         std::function<bool()> stopped)
    : tracer_(std::move(tracer)),
      path_(std::move(path)),
      world_size_(world_size),
      stopped_(std::move(stopped)) {}

void TraceStream::begin() {
  if (!tracer_) return;
  // Through a link to its target, as every output (Note [Outputs write
  // through links, never over devices]); a stream as it is.
  const std::string file =
      names_a_stream(path_) ? path_ : output_file_target(path_, "--trace").string();
  if (!open_run_output(out_, "--trace", file, std::ios::trunc | std::ios::binary, world_size_,
                       stopped_))
    return;  // stopped while it waited for a reader
  ZRT_CHECK_AS(ResourceError, out_.is_open(), "--trace ", path_, ": cannot be written",
               errno != 0 ? std::string(": ") + std::strerror(errno) : std::string());
  append();
}

void TraceStream::flush() {
  if (out_.is_open()) append();
}

void TraceStream::append() {
  // Taken even after a failed write, so the tracer never holds more than a step.
  const std::vector<std::string> lines = tracer_->take_event_lines();
  if (!error_.empty() || reader_gone_) return;
  errno = 0;
  for (const std::string& line : lines) {
    out_ << (first_ ? "[" : ",") << line << '\n';
    first_ = false;
  }
  out_.flush();
  if (!out_) note_failure();
}

void TraceStream::note_failure() {
  // A stream whose reader went away (`| head`) asks for the run to stop
  // (SIGPIPE) and is written no more: not a failed run.
  if (errno == EPIPE) {
    reader_gone_ = true;
    return;
  }
  error_ = "--trace " + path_ + ": writing failed: " + std::strerror(errno != 0 ? errno : EIO);
}

void TraceStream::finish() {
  if (!out_.is_open() || finished_) return;
  finished_ = true;
  append();
  if (error_.empty() && !reader_gone_) {
    errno = 0;
    out_ << (first_ ? "[" : "") << "]\n";
    out_.close();
    if (!out_) note_failure();
  }
  ZRT_CHECK_AS(ResourceError, error_.empty(), error_);
}

TraceStream::~TraceStream() {
  try {
    finish();
  } catch (const std::exception& e) {
    tools::report_error("zrt-train", e);
  }
}

}  // namespace zrt::train
