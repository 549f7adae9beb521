#include "zrt/runtime/io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "zrt/runtime/io/output_path.h"

namespace zrt {

namespace fs = std::filesystem;

std::map<std::string, SafetensorsEntry> safetensors_layout(
    const std::map<std::string, SafetensorsSpec>& specs) {
  std::map<std::string, SafetensorsEntry> out;
  std::uint64_t offset = 0;
  for (const auto& [key, s] : specs) {
    ZRT_CHECK_ARG(!key.empty() && key != "__metadata__", "safetensors: invalid tensor name '", key,
                  "'");
    const std::uint64_t bytes =
        static_cast<std::uint64_t>(shape_numel(s.shape)) * dtype_size(s.dtype);
    out[key] = {s.dtype, s.shape, offset, offset + bytes};
    offset += bytes;
  }
  return out;
}

std::string safetensors_header(const std::map<std::string, SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const auto& [key, e] : entries)
    header[key] = {{"dtype", safetensors_dtype_name(e.dtype)},
                   {"shape", e.shape},
                   {"data_offsets", {e.begin, e.end}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const std::uint64_t n = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + text;
}

namespace {

// `bytes` from src at `offset` of fd; CheckpointError naming `path` on a failure.
void write_at(int fd, const void* src, std::uint64_t bytes, std::uint64_t offset,
              const std::string& path) {
  const char* p = static_cast<const char*>(src);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ZRT_THROW(CheckpointError, path, ": writing ", bytes, " bytes at offset ", offset + done,
                " failed: ", std::strerror(err),
                err == ENOSPC || err == EFBIG ? " (disk full or file size limit)" : "");
    }
    done += static_cast<std::uint64_t>(n);
  }
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(const std::string& path,
                                     const std::map<std::string, SafetensorsSpec>& specs,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), entries_(safetensors_layout(specs)) {
  const std::string header = safetensors_header(entries_, metadata);
  data_offset_ = header.size();
  for (const auto& [key, e] : entries_) data_bytes_ = e.end;
  // Note [Partial files] (output_path.h): a fresh hidden temporary, renamed into place.
  target_ = output_file_target(path, "safetensors output");
  tmp_ = create_partial_file(target_, "safetensors output");
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    std::error_code ignored;
    fs::remove(tmp_, ignored);
    ZRT_THROW(CheckpointError, path, ": cannot open temporary file ", tmp_, ": ",
              std::strerror(err));
  }
  try {
    write_at(fd_, header.data(), header.size(), 0, path_);
  } catch (...) {
    ::close(fd_);
    std::error_code ignored;
    fs::remove(tmp_, ignored);
    throw;
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::error_code ignored;
  fs::remove(tmp_, ignored);
}

void SafetensorsWriter::write_elements(const std::string& name, std::int64_t first,
                                       std::int64_t count, const void* src) {
  ZRT_CHECK_ARG(fd_ >= 0, path_, ": write after commit");
  const auto it = entries_.find(name);
  ZRT_CHECK_ARG(it != entries_.end(), path_, ": no tensor '", name, "' in the file's header");
  const SafetensorsEntry& e = it->second;
  const std::uint64_t item = dtype_size(e.dtype);
  const auto n = static_cast<std::int64_t>((e.end - e.begin) / item);
  ZRT_CHECK_ARG(first >= 0 && count >= 0 && first <= n - count, path_, ": elements [", first, ", ",
                first + count, ") of tensor '", name, "' are outside its ", n, " elements");
  const std::uint64_t bytes = static_cast<std::uint64_t>(count) * item;
  write_at(fd_, src, bytes, data_offset_ + e.begin + static_cast<std::uint64_t>(first) * item,
           path_);
  written_ += bytes;
}

void SafetensorsWriter::write(const std::string& name, const Tensor& t) {
  const auto it = entries_.find(name);
  ZRT_CHECK_ARG(it != entries_.end(), path_, ": no tensor '", name, "' in the file's header");
  ZRT_CHECK_ARG(t.shape() == it->second.shape, path_, ": tensor '", name, "' is ",
                shape_str(t.shape()), " but the header says ", shape_str(it->second.shape));
  if (t.numel() == 0) return;
  if (t.device().is_cpu() && t.dtype() == it->second.dtype) {
    write_elements(name, 0, t.numel(), t.data_ptr());
    return;
  }
  Tensor h = Tensor::empty(t.shape(), it->second.dtype);  // one tensor converted at a time
  h.copy_(t);
  write_elements(name, 0, h.numel(), h.data_ptr());
}

void SafetensorsWriter::commit() {
  ZRT_CHECK_ARG(fd_ >= 0, path_, ": committed twice");
  ZRT_CHECK_STATE(written_ == data_bytes_, path_, ": ", written_, " of the data section's ",
                  data_bytes_, " bytes were written");
  const int fd = fd_;
  fd_ = -1;  // from here the temporary is removed below, not by the destructor
  // Note [Durable outputs] (output_path.h).
  const int synced = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 || synced != 0) {
    const int err = synced != 0 ? synced : errno;
    std::error_code ignored;
    fs::remove(tmp_, ignored);
    ZRT_THROW(CheckpointError, path_, ": writing the file failed: ", std::strerror(err),
              err == ENOSPC || err == EFBIG ? " (disk full or file size limit)" : "");
  }
  std::error_code ec;
  fs::rename(tmp_, target_, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp_, ignored);
    ZRT_THROW(CheckpointError, path_,
              ": cannot rename the temporary file into place: ", ec.message());
  }
  sync_directory_of(target_, "safetensors output");
}

}  // namespace zrt
