// How a zrt program takes SIGTERM, SIGINT, SIGHUP and SIGPIPE (Note [Stopping on a signal] in
// tools/train/main.cpp, Note [zrt-ckpt stops on a signal] in
// tools/ckpt/main.cpp).
#pragma once

namespace zrt::tools {

// Sends SIGTERM, SIGINT and SIGHUP (a closed terminal or ssh session) to
// `handler` (unless the program was started with them ignored, as a shell's
// background job or nohup does), then unblocks them, so that one sent while
// they were blocked is delivered now, to the handler. SIGPIPE, raised by a
// write to a pipe whose reader is gone (`| tee` stopped with the job, `|
// head`), goes to `broken_pipe`, or is ignored when that is null, so the
// write fails with EPIPE instead of the signal killing the program without
// a word. SIGXFSZ is ignored: past a file-size limit (ulimit -f) a write
// fails with EFBIG and is reported, instead of the signal killing the
// program and leaving partial files.
void install_stop_handlers(void (*handler)(int), void (*broken_pipe)(int) = nullptr);

}  // namespace zrt::tools
