#include "zrt/model_zoo/data/data_files.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "zrt/runtime/io/input_file.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/safetensors.h"

namespace zrt::model_zoo {
namespace {

// Note [One rule for every file zrt reads] (runtime/io/input_file.h).
struct DataFile {
  explicit DataFile(const std::string& path)
      : file(path, kMaxDataFileBytes, InputKind::argument, "data file") {
    ZRT_CHECK_ARG(file.size() > 0, "data file ", path, " is empty");
  }
  InputFile file;
};

// Note [Data read in chunks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A token file is read a chunk at a time straight into its int32 tokens:
// the host holds the tokens (4 bytes each, what the memory plan counts)
// and one chunk, never the file's bytes beside them. The tokens' buffer is
// the one large allocation, and its failure names the file.
constexpr std::uint64_t kReadChunkBytes = std::uint64_t{1} << 20;

Tensor token_buffer(const std::string& path, std::int64_t count) {
  try {
    return Tensor::empty({count}, DType::i32);
  } catch (const OutOfMemory&) {
    ZRT_THROW(ResourceError, "data file ", path, ": its ", count, " tokens take ",
              count * static_cast<std::int64_t>(sizeof(std::int32_t)),
              " bytes of host memory (4 a token), which could not be allocated");
  }
}

// Bytes [offset, offset + count * width) of `f` as `count` little-endian
// unsigned tokens of `width` bytes into `out`; returns the largest token.
// Tokens of one byte are text's, where a NUL byte is refused as it is read
// (Note [Data file formats]): no text holds one, and a binary file (most
// likely tokens without llm.c's header) would train a token a byte.
std::int32_t read_tokens(const InputFile& f, const std::string& path, std::uint64_t offset,
                         std::int64_t count, int width, std::int32_t* out) {
  std::vector<std::uint8_t> chunk(kReadChunkBytes);
  std::int32_t max_token = 0;
  const std::uint64_t total = static_cast<std::uint64_t>(count) * width;
  for (std::uint64_t done = 0; done < total;) {
    const std::uint64_t want = std::min<std::uint64_t>(kReadChunkBytes, total - done);
    ZRT_CHECK_ARG(f.read_at(offset + done, chunk.data(), want) == want, "data file ", path,
                  " shrank while it was read");
    for (std::uint64_t i = 0; i < want; i += width) {
      std::int32_t t = chunk[i];
      if (width == 2) t |= std::int32_t{chunk[i + 1]} << 8;
      ZRT_CHECK_ARG(width != 1 || t != 0, "data file ", path, " holds a NUL byte (at byte ",
                    offset + done + i,
                    "), which no text does, so it is not read as text, a token a byte. Tokens "
                    "need llm.c's format: a .bin file, uint16 after a 1024-byte header; a "
                    "headerless uint16 file (nanoGPT's train.bin) needs that header written "
                    "before its tokens");
      *out++ = t;
      max_token = std::max(max_token, t);
    }
    done += want;
  }
  return max_token;
}

// Whether `path` ends with `tail` (lower case), in any case: data.BIN is
// an llm.c file as data.bin is.
bool ends_with(const std::string& path, const std::string& tail) {
  if (path.size() < tail.size()) return false;
  return std::equal(
      tail.begin(), tail.end(), path.end() - static_cast<std::ptrdiff_t>(tail.size()),
      [](char t, char c) { return t == std::tolower(static_cast<unsigned char>(c)); });
}

constexpr std::int32_t kLlmcMagic = 20240520;

constexpr std::size_t kLlmcHeaderBytes = 256 * sizeof(std::int32_t);

// The token count of an llm.c file of `file_bytes` bytes from its header's
// first 12 bytes; InvalidArgument naming the file unless they agree.
std::int64_t llmc_token_count(const std::uint8_t* header_bytes, std::size_t file_bytes,
                              const std::string& path) {
  constexpr std::int32_t kVersion = 1;
  ZRT_CHECK_ARG(file_bytes >= kLlmcHeaderBytes, "llm.c token file ", path,
                " is truncated: ", file_bytes, " bytes, the header alone takes ", kLlmcHeaderBytes);
  std::int32_t header[3];
  std::memcpy(header, header_bytes, sizeof(header));
  ZRT_CHECK_ARG(header[0] == kLlmcMagic, "llm.c token file ", path, " has magic ", header[0],
                ", expected ", kLlmcMagic,
                ": a .bin file is read as llm.c's tokens, uint16 after a 1024-byte header "
                "whose first int32 is that magic; a headerless uint16 file (nanoGPT's "
                "train.bin) needs that header written before its tokens, and text needs "
                "another name than .bin");
  ZRT_CHECK_ARG(header[1] == kVersion, "llm.c token file ", path, " has version ", header[1],
                ", expected ", kVersion);
  const std::int64_t count = header[2];
  ZRT_CHECK_ARG(count > 0, "llm.c token file ", path, " declares ", count, " tokens");
  const std::size_t want = kLlmcHeaderBytes + static_cast<std::size_t>(count) * 2;
  ZRT_CHECK_ARG(file_bytes == want, "llm.c token file ", path, " declares ", count, " tokens (",
                want, " bytes) but has ", file_bytes, " bytes");
  return count;
}

}  // namespace

// Note [One rule for every file zrt reads]: checked before reading.
std::uint64_t check_data_file(const std::string& path) {
  return InputFile(path, kMaxDataFileBytes, InputKind::argument, "data file").size();
}

Dataset load_text_tokens(const std::string& path) {
  const DataFile data(path);
  const InputFile& f = data.file;
  const auto count = static_cast<std::int64_t>(f.size());
  Dataset d;
  d.kind = Dataset::Kind::tokens;
  d.tokens = token_buffer(path, count);
  d.vocab_size = read_tokens(f, path, 0, count, 1, d.tokens.data<std::int32_t>()) + 1;
  d.source = path;
  return d;
}

Dataset load_llmc_tokens(const std::string& path) {
  const DataFile data(path);
  const InputFile& f = data.file;
  std::uint8_t header[12] = {};
  f.read_at(0, header, sizeof(header));
  const std::int64_t count = llmc_token_count(header, f.size(), path);
  Dataset d;
  d.kind = Dataset::Kind::tokens;
  d.tokens = token_buffer(path, count);
  d.vocab_size =
      read_tokens(f, path, kLlmcHeaderBytes, count, 2, d.tokens.data<std::int32_t>()) + 1;
  d.source = path;
  return d;
}

namespace {

// A rows file holds 'x' and 'y', and nothing else: a tensor beside them (a
// mask, sample weights) would be ignored without a word.
template <class TensorsByName>
void check_row_tensor_names(const std::string& path, const TensorsByName& tensors) {
  ZRT_CHECK_ARG(tensors.count("x") && tensors.count("y"), "data file ", path,
                " must hold tensors 'x' and 'y': a .safetensors data file is an mlp's feature "
                "rows (a gpt trains on a text file or llm.c's .bin tokens; weights go to "
                "--init-from)");
  std::string others;
  for (const auto& named : tensors)
    if (named.first != "x" && named.first != "y")
      others += (others.empty() ? "'" : ", '") + named.first + "'";
  ZRT_CHECK_ARG(others.empty(), "data file ", path, " holds tensors zrt does not read (", others,
                "): a rows file holds 'x' and 'y' only");
}

// "PATH: why" of a reader's error, which may begin with PATH already.
std::string said_of(const std::string& path, const std::exception& e) {
  const std::string what = e.what();
  return what.starts_with(path + ": ") ? what : path + ": " + what;
}

// What a rows file's 'x' and 'y' must be, from their dtypes and shapes
// (the header holds them: a plan checks without reading the rows).
void check_rows(const std::string& path, DType x_dtype, const Shape& x_shape, DType y_dtype,
                const Shape& y_shape) {
  ZRT_CHECK_ARG(x_shape.size() == 2 && x_dtype == DType::f32, "data file ", path, ": x ",
                shape_str(x_shape), " ", dtype_name(x_dtype), " must be f32 [N, d_in]");
  ZRT_CHECK_ARG(y_shape.size() == 1 && y_dtype == DType::i64 && y_shape[0] == x_shape[0],
                "data file ", path, ": y ", shape_str(y_shape), " ", dtype_name(y_dtype),
                " must be i64 [", x_shape[0], "]");
  ZRT_CHECK_ARG(y_shape[0] > 0, "data file ", path, " has no rows");
}

}  // namespace

Dataset load_row_dataset(const std::string& path) {
  SafetensorsFile f;
  try {
    f = read_safetensors(path);
  } catch (const CheckpointError& e) {
    ZRT_THROW(InvalidArgument, "data file ", said_of(path, e));
  }
  check_row_tensor_names(path, f.tensors);
  auto x = f.tensors.find("x"), y = f.tensors.find("y");
  check_rows(path, x->second.dtype(), x->second.shape(), y->second.dtype(), y->second.shape());
  Dataset d;
  d.kind = Dataset::Kind::rows;
  d.x = x->second;
  d.y = y->second;
  const std::int64_t* labels = d.y.data<std::int64_t>();
  for (std::int64_t i = 0; i < d.y.numel(); ++i) {
    ZRT_CHECK_ARG(labels[i] >= 0, "data file ", path, ": label ", labels[i], " of row ", i,
                  " is negative");
    d.n_classes = std::max(d.n_classes, labels[i] + 1);
  }
  // A NaN or Inf feature would train on silently, every loss after it NaN.
  const float* features = d.x.data<float>();
  const std::int64_t d_in = d.x.shape()[1];
  for (std::int64_t i = 0; i < d.x.numel(); ++i)
    ZRT_CHECK_ARG(std::isfinite(features[i]), "data file ", path, ": feature ", i % d_in,
                  " of row ", i / d_in, " is ", features[i], " (x must be finite)");
  d.source = path;
  return d;
}

namespace {

enum class DataFormat { text, llmc, rows };

// Note [Data file formats]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// .safetensors is a rows file and .bin an llm.c token file, in any case;
// any other file that begins with llm.c's magic (20240520, little-endian)
// is an llm.c token file too: read as text, its header and 16-bit tokens
// would train as bytes without a word. No UTF-8 text begins with those
// bytes (0x88 0xD8 0x34 0x01: 0x88 is a continuation byte, which starts no
// character). So is a safetensors file under another name: a little-endian
// header length, then the header's '{'. A length whose top three bytes are
// zero says so however damaged the rest (no text holds NUL bytes), and
// the reader then names the damage. Everything else is text, a token a byte;
// a NUL byte in it is refused (a binary file, most likely headerless tokens).
DataFormat data_format(const std::string& path) {
  if (ends_with(path, ".safetensors")) return DataFormat::rows;
  if (ends_with(path, ".bin")) return DataFormat::llmc;
  const DataFile data(path);
  unsigned char head[9] = {};
  const std::size_t got = data.file.read_at(0, head, sizeof(head));
  std::int32_t magic = 0;
  std::memcpy(&magic, head, sizeof(magic));
  if (got >= sizeof(magic) && magic == kLlmcMagic) return DataFormat::llmc;
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, head, sizeof(header_bytes));
  if (got == sizeof(head) && head[8] == '{' &&
      ((header_bytes >= 2 && header_bytes <= data.file.size() - 8) ||
       (head[5] == 0 && head[6] == 0 && head[7] == 0)))
    return DataFormat::rows;
  return DataFormat::text;
}

}  // namespace

Dataset load_dataset(const std::string& path) {
  check_data_file(path);
  switch (data_format(path)) {
    case DataFormat::llmc:
      return load_llmc_tokens(path);
    case DataFormat::rows:
      return load_row_dataset(path);
    case DataFormat::text:
      break;
  }
  return load_text_tokens(path);
}

std::size_t data_file_memory_bytes(const std::string& path) {
  const std::uint64_t file_bytes = check_data_file(path);
  ZRT_CHECK_ARG(file_bytes > 0, "data file ", path, " is empty");
  const DataFormat format = data_format(path);
  if (format == DataFormat::rows) {
    try {
      const SafetensorsReader reader(path);  // the header alone
      const auto& e = reader.entries();
      check_row_tensor_names(path, e);
      auto x = e.find("x"), y = e.find("y");
      check_rows(path, x->second.dtype, x->second.shape, y->second.dtype, y->second.shape);
      return (x->second.end - x->second.begin) + (y->second.end - y->second.begin);
    } catch (const CheckpointError& e) {
      ZRT_THROW(InvalidArgument, "data file ", said_of(path, e));
    }
  }
  if (format == DataFormat::text) return file_bytes * sizeof(std::int32_t);  // a token a byte
  std::uint8_t header[12] = {};
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(header), sizeof(header));
  return static_cast<std::size_t>(llmc_token_count(header, file_bytes, path)) *
         sizeof(std::int32_t);
}

}  // namespace zrt::model_zoo
