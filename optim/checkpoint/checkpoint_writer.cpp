#include "zrt/optim/checkpoint/checkpoint_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "zrt/optim/checkpoint/checksum.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/checkpoint/index_checksum.h"
#include "zrt/optim/checkpoint/index_validation.h"
#include "zrt/runtime/io/safetensors.h"
#include "zrt/runtime/io/safetensors_writer.h"

namespace zrt::optim {

namespace fs = std::filesystem;

std::string step_dir(const std::string& root, std::int64_t step) {
  return (fs::path(root) / step_dir_name(step)).string();
}

std::string step_tmp_dir(const std::string& root, std::int64_t step) {
  return step_dir(root, step) + ".tmp";
}

void begin_step(const std::string& root, std::int64_t step) {
  // A step inside a step: neither would load as written.
  check_directory_outside_checkpoint_steps({"the checkpoint directory", root});
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    ZRT_THROW(CheckpointError, root, ": cannot create the checkpoint directory: ", ec.message());
  if (!fs::is_directory(root)) ZRT_THROW(CheckpointError, root, ": is not a directory");
  remove_stale_temporaries(root);
  const std::string tmp = step_tmp_dir(root, step);
  if (!fs::create_directory(tmp, ec) || ec)
    ZRT_THROW(CheckpointError, tmp, ": cannot create: ", ec ? ec.message() : "it exists");
}

namespace {

// A file descriptor that writes everything or throws naming the path.
class OutFile {
 public:
  explicit OutFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) ZRT_THROW(CheckpointError, path, ": cannot create: ", std::strerror(errno));
  }
  ~OutFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, std::size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        ZRT_THROW(CheckpointError, path_, ": write failed after ", written_,
                  " bytes: ", n < 0 ? std::strerror(errno) : "no progress");
      p += n;
      bytes -= static_cast<std::size_t>(n);
      written_ += static_cast<std::uint64_t>(n);
    }
  }
  std::uint64_t sync_and_close() {
    if (::fsync(fd_) != 0)
      ZRT_THROW(CheckpointError, path_, ": fsync failed: ", std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      ZRT_THROW(CheckpointError, path_, ": close failed: ", std::strerror(errno));
    return written_;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
};

}  // namespace

void write_rank_file(const std::string& path, const std::map<std::string, Tensor>& tensors,
                     RankRecord& record) {
  // Host copies only for device tensors: a cpu shard is written from its own memory.
  std::map<std::string, Tensor> host;
  std::map<std::string, SafetensorsSpec> stored;
  for (const auto& [name, t] : tensors) {
    ZRT_CHECK_ARG(t.dtype() == DType::f32 || t.dtype() == DType::bf16 || t.dtype() == DType::f16,
                  "checkpoint file ", path, ": tensor '", name, "' is ", dtype_name(t.dtype()),
                  ", which does not widen to f32");
    stored[name] = {DType::f32, t.shape()};
    if (t.device().is_cpu()) {
      host[name] = t;
    } else {
      Tensor h = Tensor::empty(t.shape(), t.dtype());
      h.copy_(t);
      host[name] = h;
    }
  }
  OutFile out(path);
  const std::string header = safetensors_header(safetensors_layout(stored));
  out.write(header.data(), header.size());
  record.tensors.clear();
  Tensor wide;  // the widened slice: at most kWidenElements, grown as needed
  for (const auto& [name, t] : host) {
    StreamingXxh64 hash;
    const Tensor flat = t.flatten();
    for (std::int64_t k = 0; k < t.numel(); k += kWidenElements) {
      const std::int64_t c = std::min(kWidenElements, t.numel() - k);
      Tensor piece = flat.slice(k, c);
      if (t.dtype() != DType::f32) {
        if (wide.numel() < c) wide = Tensor::empty({c}, DType::f32);
        piece = wide.slice(0, c).copy_(piece);  // exact: bf16 and f16 widen to f32
      }
      out.write(piece.data_ptr(), piece.nbytes());
      hash.update(piece.data_ptr(), piece.nbytes());
    }
    record.tensors[name] = {DType::f32, t.shape(), checksum_hex(hash.digest())};
  }
  record.bytes = out.sync_and_close();
}

std::string commit_step(const std::string& root, const CheckpointIndex& index, int keep_last) {
  const std::string tmp = step_tmp_dir(root, index.step);
  const std::string final_dir = step_dir(root, index.step);
  // An index the reader would refuse is a bug of the writer: fail the save, not the resume.
  validate_index(index, (fs::path(tmp) / kIndexFileName).string());
  write_index_files(tmp, index_to_json(index));
  fsync_path(tmp);
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    // Saving a step again (a run resumed from an older step): `latest` moves
    // to the newest other step first, so it never names a missing directory.
    std::int64_t previous = -1;
    for (std::int64_t s : indexed_steps(root))  // checkpoints only, as pruning takes
      if (s != index.step) previous = s;
    if (previous >= 0)
      publish_latest(root, previous);
    else
      fs::remove(fs::path(root) / "latest", ec);
    retire_step(root, index.step);
  }
  fs::rename(tmp, final_dir, ec);
  if (ec)
    ZRT_THROW(CheckpointError, final_dir, ": cannot rename ", tmp, " into place: ", ec.message());
  fsync_path(root);
  try {
    publish_latest(root, index.step);
  } catch (...) {
    // Where `latest` still names an older step (its write failed, a disk
    // full by then), the step goes back to its temporary name, which the
    // failed save removes: no complete step is left newer than `latest`
    // (a resume would set it aside as an abandoned trajectory). One that
    // `latest` already names (only the directory's fsync failed) stays.
    std::string named;
    std::getline(std::ifstream(fs::path(root) / "latest"), named);
    std::error_code back;
    if (named != step_dir_name(index.step)) fs::rename(final_dir, tmp, back);
    throw;
  }
  prune_steps(root, keep_last);
  return final_dir;
}

}  // namespace zrt::optim
