// Data sets from files. Errors are InvalidArgument naming the file and the
// problem (missing, empty, malformed).
#pragma once

#include <cstddef>
#include <cstdint>

#include <string>

#include "zrt/model_zoo/data/dataset.h"

namespace zrt::model_zoo {

// Any file read as bytes: one token per byte (vocab_size: its largest byte
// plus one); a NUL byte, which no text holds, is refused (InvalidArgument
// naming its place). Note [Data read in chunks].
Dataset load_text_tokens(const std::string& path);

// llm.c's token file: a header of 256 little-endian int32 (magic 20240520,
// version 1, token count, rest unused) then `count` uint16 tokens.
Dataset load_llmc_tokens(const std::string& path);

// A safetensors file with `x` f32 [N, d_in] and `y` i64 [N] (labels ≥ 0).
Dataset load_row_dataset(const std::string& path);

// The largest data file read whole into memory (2 GiB: a text file becomes
// 4 bytes per token in memory, an llm.c file 2).
inline constexpr std::uintmax_t kMaxDataFileBytes = std::uintmax_t{1} << 31;

// The size of data file `path`; throws InvalidArgument unless it is a
// regular file (through links) on a disk of at most kMaxDataFileBytes (Note
// [One rule for every file zrt reads]): a FIFO would block a reader,
// /dev/zero fill memory, a directory fail without its name.
std::uint64_t check_data_file(const std::string& path);

// Note [Data file formats]: .bin (or llm.c's magic) → llm.c tokens,
// .safetensors → rows, anything else → text bytes (no NUL byte). The path must name a regular file (through links) of at most
// kMaxDataFileBytes: InvalidArgument naming it and what it is otherwise.
Dataset load_dataset(const std::string& path);

// The host memory load_dataset(path) holds once loaded (Dataset::nbytes), from
// the file's size and header without reading the rest: 4 bytes a token of a
// text or llm.c file, a safetensors file's x and y. The same checks and
// errors as load_dataset for the file and the header it reads.
std::size_t data_file_memory_bytes(const std::string& path);

}  // namespace zrt::model_zoo
