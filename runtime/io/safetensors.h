// The safetensors file format: an 8-byte little-endian header length N, N
// bytes of JSON mapping each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end)} (offsets relative to the data section) and an
// optional "__metadata__" string map, then the raw little-endian data.
// Dtypes: F32, BF16, F16, F64, I32, I64, U8.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "zrt/runtime/tensor.h"

namespace zrt {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // cpu tensors, named
  std::map<std::string, std::string> metadata;
};

// Parses a whole file; CheckpointError naming the file and the problem for a
// missing or truncated file, bad JSON, an unknown dtype, a bad shape or
// offsets outside the data section or not matching the shape.
SafetensorsFile read_safetensors(const std::string& path);
SafetensorsFile parse_safetensors(const std::vector<std::uint8_t>& bytes,
                                  const std::string& source = "<memory>");

struct SafetensorsWriteOptions {
  // Floating tensors are written as F32 unless this is set (then each keeps
  // its dtype). Integer tensors always keep theirs.
  bool keep_float_dtypes = false;
};

// The file's bytes (header padded with spaces to a multiple of 8, tensors in
// name order). Tensors may live on any device.
std::vector<std::uint8_t> serialize_safetensors(
    const std::map<std::string, Tensor>& tensors,
    const std::map<std::string, std::string>& metadata = {},
    const SafetensorsWriteOptions& options = {});

// Writes atomically: into a temporary file beside `path`, renamed over it
// once complete, so a failure leaves no file (and an older one untouched).
// The temporary is ".NAME.zrt-partial-N"; one left by a killed write is
// removed by the next write of the same NAME (Note [Partial files]).
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const SafetensorsWriteOptions& options = {});

// One tensor's header entry: data_offsets are relative to the data section.
struct SafetensorsEntry {
  DType dtype = DType::f32;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
};

// Random access to a file's tensors: the header is read and checked (as
// read_safetensors does) on construction; tensors are read with pread, so
// threads may read different tensors of one reader at once.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;
  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // CheckpointError naming the file for an unknown name or a short read.
  const SafetensorsEntry& entry(const std::string& name) const;
  Tensor read(const std::string& name) const;
  // The same into memory of `allocator`, handing each piece read to
  // `on_piece` while it is still in cache (a checksum on the way).
  Tensor read(const std::string& name, const AllocatorPtr& allocator,
              const std::function<void(const void* data, std::size_t bytes)>& on_piece) const;
  void read_bytes(const std::string& name, void* dst) const;  // entry(name).end - begin bytes
  // Elements [first, first + count) of tensor `name` (flattened), in its
  // file dtype, into dst: a part of a tensor without reading the rest.
  void read_elements(const std::string& name, std::int64_t first, std::int64_t count,
                     void* dst) const;

 private:
  // `bytes` at `offset` of the file into dst; CheckpointError naming `what` on a short read.
  void read_at(void* dst, std::uint64_t bytes, std::uint64_t offset, const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  std::uint64_t data_offset_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// The 8-byte length and the padded JSON header for `tensors` written as they
// are (their own dtypes), in name order, data offsets counted from 0.
std::string safetensors_header(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// "F32", "BF16", ... and back (nullopt-free: CheckpointError for unknown names).
const char* safetensors_dtype_name(DType dtype);
DType parse_safetensors_dtype(const std::string& name, const std::string& source);

}  // namespace zrt
