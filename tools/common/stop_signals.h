// How a zrt program takes SIGTERM and SIGINT (Note [Stopping on a signal] in
// tools/train/main.cpp, Note [zrt-ckpt stops on a signal] in
// tools/ckpt/main.cpp).
#pragma once

namespace zrt::tools {

// Sends SIGTERM and SIGINT to `handler` (unless the program was started
// with them ignored, as a shell's background job is), then unblocks them,
// so that one sent while they were blocked is delivered now, to the handler. SIGXFSZ is ignored: past a file-size limit
// (ulimit -f) a write fails with EFBIG and is reported, instead of the
// signal killing the program without a word and leaving partial files.
void install_stop_handlers(void (*handler)(int));

}  // namespace zrt::tools
