// Writing a safetensors file piece by piece, never holding it whole.
//
// Note [Streamed saving]
// ~~~~~~~~~~~~~~~~~~~~~~
// A safetensors file's header says every tensor's dtype, shape and byte
// range, and those follow from the dtypes and shapes alone (tensors in
// name order, each right after the one before). So the header is written
// first, from the shapes, and any element range of any tensor can then go
// straight to its place with pwrite, in any order. `zrt-train --save`
// gathers each unit 16 MiB at a time (FlatParamHandle::gather_full_params;
// a master in host memory goes up a chunk at a time, straight into this
// rank's piece of the gather buffer, so the device holds the 16 MiB alone)
// and rank 0 writes each chunk's pieces where they belong
// (optim::save_full_params);
// `zrt-ckpt export` reads a checkpoint one zero1 shard at a time and does
// the same (optim::export_params). Neither a rank nor a process holds the
// whole model; a file written so has exactly the bytes the whole-file
// writer (serialize_safetensors) gives for the same tensors.
//
// The guarantees of a whole-file output stay (Note [Partial files]): the
// bytes go to a fresh temporary created with O_EXCL, renamed onto the
// target by commit() once every byte is written; a writer destroyed
// without commit() removes it, so an error part-way leaves no file (and an
// older one untouched). A write past the disk or a file-size limit fails
// with the error named; the tools ignore SIGXFSZ so that it is reported.
// Whatever must be refused before a file exists (non-finite weights) is
// decided before the writer is made.
//
// test_streamed_memory (mpirun -np 4) holds each rank's peak resident
// memory to its share of the state + the largest tensor + 24 MiB while it
// initialises, loads, saves and exports, and shows the whole-model paths
// breaking the same bounds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "zrt/runtime/io/safetensors.h"
#include "zrt/runtime/tensor.h"

namespace zrt {

// A tensor's dtype and shape in the file, without its values.
struct SafetensorsSpec {
  DType dtype = DType::f32;
  Shape shape;
};

// The entries a file of `specs` has: name order, each right after the last.
std::map<std::string, SafetensorsEntry> safetensors_layout(
    const std::map<std::string, SafetensorsSpec>& specs);

// The 8-byte length and the padded JSON header of `entries`.
std::string safetensors_header(const std::map<std::string, SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata = {});

class SafetensorsWriter {
 public:
  // Resolves `path` (output_file_target), creates its temporary (Note
  // [Partial files]) and writes the header of `specs`.
  SafetensorsWriter(const std::string& path, const std::map<std::string, SafetensorsSpec>& specs,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();  // without commit(): the temporary is removed
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // Elements [first, first + count) of tensor `name` (flattened), in its
  // file dtype, from src. InvalidArgument for an unknown name or a range
  // outside the tensor; CheckpointError naming the file when a write fails.
  void write_elements(const std::string& name, std::int64_t first, std::int64_t count,
                      const void* src);
  // The whole tensor `name` from `t` (its shape; any dtype and device),
  // converted to the file's dtype.
  void write(const std::string& name, const Tensor& t);
  // Checks that the data section was written (as many bytes as it holds),
  // then renames the temporary onto the target.
  void commit();

 private:
  std::string path_;
  std::filesystem::path target_;
  std::string tmp_;
  int fd_ = -1;
  std::map<std::string, SafetensorsEntry> entries_;
  std::uint64_t data_offset_ = 0, data_bytes_ = 0, written_ = 0;
};

}  // namespace zrt
