#include "zrt/runtime/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "zrt/runtime/io/input_file.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/safetensors_writer.h"

namespace zrt {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; zrt reads and writes it by memcpy");

namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit
// read_safetensors reads a whole file into memory: a larger one is a mistake.
constexpr std::uint64_t kMaxSafetensorsBytes = std::uint64_t(1) << 40;

std::int64_t json_int(const json& v, const std::string& what, const std::string& source) {
  if (!v.is_number_integer() || (v.is_number_integer() && v.get<std::int64_t>() < 0))
    ZRT_THROW(CheckpointError, source, ": ", what, " must be a non-negative integer, got ",
              v.dump());
  return v.get<std::int64_t>();
}

SafetensorsEntry parse_entry(const std::string& key, const json& e, std::uint64_t data_bytes,
                             const std::string& source) {
  const std::string where = "tensor '" + key + "'";
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    ZRT_THROW(CheckpointError, source, ": ", where,
              " must be an object with dtype, shape and data_offsets");
  if (!e["dtype"].is_string())
    ZRT_THROW(CheckpointError, source, ": ", where, " has a non-string dtype");
  SafetensorsEntry out;
  out.dtype = parse_safetensors_dtype(e["dtype"].get<std::string>(), source + ": " + where);
  if (!e["shape"].is_array())
    ZRT_THROW(CheckpointError, source, ": ", where, " has a non-array shape");
  for (const json& d : e["shape"]) out.shape.push_back(json_int(d, where + " shape dim", source));
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    ZRT_THROW(CheckpointError, source, ": ", where, " data_offsets must be [begin, end]");
  out.begin = static_cast<std::uint64_t>(json_int(off[0], where + " data offset", source));
  out.end = static_cast<std::uint64_t>(json_int(off[1], where + " data offset", source));
  if (out.begin > out.end || out.end > data_bytes)
    ZRT_THROW(CheckpointError, source, ": ", where, " data_offsets [", out.begin, ", ", out.end,
              ") are outside the data section of ", data_bytes, " bytes");
  std::int64_t numel = 0;
  try {
    numel = shape_numel(out.shape);
  } catch (const InvalidArgument&) {
    ZRT_THROW(CheckpointError, source, ": ", where, " has an impossible shape ",
              shape_str(out.shape));
  }
  if (static_cast<std::uint64_t>(numel) * dtype_size(out.dtype) != out.end - out.begin)
    ZRT_THROW(CheckpointError, source, ": ", where, " holds ", out.end - out.begin, " bytes but ",
              dtype_name(out.dtype), shape_str(out.shape), " needs ",
              numel * dtype_size(out.dtype));
  return out;
}

// Header length from the first 8 bytes, checked against what follows them.
std::uint64_t header_length(const std::uint8_t* first8, std::uint64_t file_bytes,
                            const std::string& source) {
  if (file_bytes < 8)
    ZRT_THROW(CheckpointError, source, ": truncated safetensors file (", file_bytes,
              " bytes, the header length alone takes 8)");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, first8, 8);
  if (header_len > kMaxHeaderBytes || header_len > file_bytes - 8)
    ZRT_THROW(
        CheckpointError, source,
        header_len > kMaxHeaderBytes ? ": not a safetensors file (its first 8 bytes give a "
                                       "header length of "
                                     : ": truncated safetensors file (a header of ",
        header_len,
        header_len > kMaxHeaderBytes ? " bytes, above the format's limit)" : " bytes, but only ",
        header_len > kMaxHeaderBytes ? "" : std::to_string(file_bytes - 8) + " follow the length)");
  return header_len;
}

// As the reference implementation: the tensors' byte ranges, in order, tile
// the data section exactly — no overlap, no hole, nothing after the last.
void check_data_covered(const std::map<std::string, SafetensorsEntry>& entries,
                        std::uint64_t data_bytes, const std::string& source) {
  std::vector<std::pair<std::uint64_t, const std::string*>> starts;
  for (const auto& [key, e] : entries) starts.push_back({e.begin, &key});
  std::sort(starts.begin(), starts.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first
                              : entries.at(*a.second).end < entries.at(*b.second).end;
  });
  std::uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const auto& [begin, key] : starts) {
    if (begin < covered)
      ZRT_THROW(CheckpointError, source, ": tensor '", *key, "' data_offsets start at ", begin,
                ", inside tensor '", *previous, "' (which ends at ", covered, "): tensors overlap");
    if (begin > covered)
      ZRT_THROW(CheckpointError, source, ": ", begin - covered, " bytes before tensor '", *key,
                "' (from ", covered, ") belong to no tensor: the data_offsets leave a hole");
    covered = entries.at(*key).end;
    previous = key;
  }
  if (covered != data_bytes)
    ZRT_THROW(CheckpointError, source, ": the last ", data_bytes - covered,
              " bytes of the data section belong to no tensor");
}

// The JSON header's entries and metadata, every entry checked against a data
// section of `data_bytes` bytes.
void parse_header(const char* text, std::uint64_t len, std::uint64_t data_bytes,
                  const std::string& source, std::map<std::string, SafetensorsEntry>& entries,
                  std::map<std::string, std::string>& metadata) {
  json header;
  // JSON lets a key repeat and keeps the last: two entries of one tensor
  // would silently lose one. A key seen twice at the top level is refused.
  std::set<std::string> top_keys;
  std::string repeated;
  const json::parser_callback_t on_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 &&
        !top_keys.insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  try {
    header = json::parse(text, text + len, on_key);
  } catch (const json::parse_error& e) {
    ZRT_THROW(CheckpointError, source, ": the safetensors header (", len,
              " bytes) is not valid JSON at its byte ", e.byte,
              ": the file is not safetensors, or is corrupt");
  } catch (const json::exception&) {
    ZRT_THROW(CheckpointError, source, ": the safetensors header (", len,
              " bytes) is not valid JSON: the file is not safetensors, or is corrupt");
  }
  if (!repeated.empty())
    ZRT_THROW(CheckpointError, source, ": the safetensors header names tensor '", repeated,
              "' twice");
  if (!header.is_object())
    ZRT_THROW(CheckpointError, source, ": the safetensors header must be a JSON object");
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        ZRT_THROW(CheckpointError, source, ": __metadata__ must be an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          ZRT_THROW(CheckpointError, source, ": __metadata__ value of '", k, "' is not a string");
        metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries[key] = parse_entry(key, value, data_bytes, source);
  }
  check_data_covered(entries, data_bytes, source);
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::f64:
      return "F64";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
  }
  return "?";
}

namespace {
// The safetensors format's dtypes that are no DType.
constexpr std::string_view kOtherSafetensorsDTypes[] = {
    "BOOL",    "I8",      "I16", "U16",     "U32",     "U64", "F8_E4M3",
    "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
}  // namespace

DType parse_safetensors_dtype(const std::string& name, const std::string& source) {
  for (DType t : kAllDTypes)
    if (name == safetensors_dtype_name(t)) return t;
  // The format's other dtypes are valid files zrt has no tensor type for.
  const bool in_format =
      std::ranges::find(kOtherSafetensorsDTypes, name) != std::end(kOtherSafetensorsDTypes);
  ZRT_THROW(CheckpointError, source, ": ",
            in_format
                ? "holds a tensor of safetensors dtype '" + name + "', which zrt does not read"
                : "unknown safetensors dtype '" + name + "'",
            " (it reads F32, BF16, F16, F64, I32, I64, U8)");
}

SafetensorsFile parse_safetensors(const std::vector<std::uint8_t>& bytes,
                                  const std::string& source) {
  const std::uint64_t header_len = header_length(bytes.data(), bytes.size(), source);
  const std::uint8_t* data = bytes.data() + 8 + header_len;
  std::map<std::string, SafetensorsEntry> entries;
  SafetensorsFile file;
  parse_header(reinterpret_cast<const char*>(bytes.data()) + 8, header_len,
               bytes.size() - 8 - header_len, source, entries, file.metadata);
  for (const auto& [key, e] : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    file.tensors[key] = t.set_name(key);
  }
  return file;
}

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  // Non-blocking: opening a FIFO must not wait for a writer (Note [One rule
  // for every file zrt reads]); fstat then refuses it.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0)
    ZRT_THROW(CheckpointError, path_, ": cannot open safetensors file: ", std::strerror(errno));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))
      ZRT_THROW(CheckpointError, path_, " is ",
                file_type_name(std::filesystem::status(path_).type()), ", not a regular file");
    const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
    std::uint8_t first8[8] = {};
    read_at(first8, std::min<std::uint64_t>(8, file_bytes), 0, "the safetensors header");
    const std::uint64_t header_len = header_length(first8, file_bytes, path_);
    std::string text(header_len, '\0');
    read_at(text.data(), header_len, 8, "the safetensors header");
    data_offset_ = 8 + header_len;
    parse_header(text.data(), header_len, file_bytes - data_offset_, path_, entries_, metadata_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsReader::read_at(void* dst, std::uint64_t bytes, std::uint64_t offset,
                                const std::string& what) const {
  char* p = static_cast<char*>(dst);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ZRT_THROW(CheckpointError, path_, ": read error in ", what, " after ", done, " of ", bytes,
                " bytes: ", n < 0 ? std::strerror(errno) : "the file ends early");
    done += static_cast<std::uint64_t>(n);
  }
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) ZRT_THROW(CheckpointError, path_, ": no tensor '", name, "'");
  return it->second;
}

void SafetensorsReader::read_bytes(const std::string& name, void* dst) const {
  const SafetensorsEntry& e = entry(name);
  read_at(dst, e.end - e.begin, data_offset_ + e.begin, "tensor '" + name + "'");
}

void SafetensorsReader::read_elements(const std::string& name, std::int64_t first,
                                      std::int64_t count, void* dst) const {
  const SafetensorsEntry& e = entry(name);
  const std::uint64_t item = dtype_size(e.dtype);
  const std::int64_t n = static_cast<std::int64_t>((e.end - e.begin) / item);
  ZRT_CHECK_ARG(first >= 0 && count >= 0 && first <= n - count, path_, ": elements [", first, ", ",
                first + count, ") of tensor '", name, "' are outside its ", n, " elements");
  read_at(dst, static_cast<std::uint64_t>(count) * item,
          data_offset_ + e.begin + static_cast<std::uint64_t>(first) * item,
          "tensor '" + name + "'");
}

Tensor SafetensorsReader::read(const std::string& name) const { return read(name, nullptr, {}); }

Tensor SafetensorsReader::read(
    const std::string& name, const AllocatorPtr& allocator,
    const std::function<void(const void*, std::size_t)>& on_piece) const {
  const SafetensorsEntry& e = entry(name);
  Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu(), allocator);
  constexpr std::uint64_t kPiece = std::uint64_t(1) << 20;  // stays in L2 for the checksum
  char* dst = e.end > e.begin ? static_cast<char*>(t.data_ptr()) : nullptr;
  for (std::uint64_t done = 0; done < e.end - e.begin;) {
    const std::uint64_t n = std::min(kPiece, e.end - e.begin - done);
    read_at(dst + done, n, data_offset_ + e.begin + done, "tensor '" + name + "'");
    if (on_piece) on_piece(dst + done, n);
    done += n;
  }
  return t.set_name(name);
}

SafetensorsFile read_safetensors(const std::string& path) {
  // Note [One rule for every file zrt reads]: a FIFO, /dev/zero or a
  // directory is refused by name before anything is read.
  const std::string text =
      read_input_file(path, kMaxSafetensorsBytes, InputKind::checkpoint, "safetensors file");
  return parse_safetensors(std::vector<std::uint8_t>(text.begin(), text.end()), path);
}

std::string safetensors_header(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::map<std::string, SafetensorsSpec> specs;
  for (const auto& [key, t] : tensors) specs[key] = {t.dtype(), t.shape()};
  return safetensors_header(safetensors_layout(specs), metadata);
}

std::vector<std::uint8_t> serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                                const std::map<std::string, std::string>& metadata,
                                                const SafetensorsWriteOptions& options) {
  std::map<std::string, Tensor> host;
  std::uint64_t data_bytes = 0;
  for (const auto& [key, t] : tensors) {
    const DType out = is_floating(t.dtype()) && !options.keep_float_dtypes ? DType::f32 : t.dtype();
    Tensor h = Tensor::empty(t.shape(), out);
    h.copy_(t);
    data_bytes += h.nbytes();
    host[key] = std::move(h);
  }
  const std::string header = safetensors_header(host, metadata);
  std::vector<std::uint8_t> bytes(header.size() + data_bytes);
  std::memcpy(bytes.data(), header.data(), header.size());
  std::uint8_t* p = bytes.data() + header.size();
  for (const auto& [key, h] : host) {
    if (h.nbytes()) std::memcpy(p, h.data_ptr(), h.nbytes());
    p += h.nbytes();
  }
  return bytes;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const SafetensorsWriteOptions& options) {
  // Tensor by tensor (Note [Streamed saving]): one converted copy at a time.
  std::map<std::string, SafetensorsSpec> specs;
  for (const auto& [key, t] : tensors)
    specs[key] = {is_floating(t.dtype()) && !options.keep_float_dtypes ? DType::f32 : t.dtype(),
                  t.shape()};
  SafetensorsWriter out(path, specs, metadata);
  for (const auto& [key, t] : tensors) out.write(key, t);
  out.commit();
}

}  // namespace zrt
