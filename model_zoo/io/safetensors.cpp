#include "model_zoo/io/safetensors.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

namespace zrt::model_zoo {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; zrt reads and writes it by memcpy");

namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

std::int64_t json_int(const json& v, const std::string& what, const std::string& source) {
  if (!v.is_number_integer() || (v.is_number_integer() && v.get<std::int64_t>() < 0))
    ZRT_THROW(CheckpointError, source, ": ", what, " must be a non-negative integer, got ",
              v.dump());
  return v.get<std::int64_t>();
}

Tensor parse_entry(const std::string& key, const json& e, const std::uint8_t* data,
                   std::uint64_t data_bytes, const std::string& source) {
  const std::string where = "tensor '" + key + "'";
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    ZRT_THROW(CheckpointError, source, ": ", where,
              " must be an object with dtype, shape and data_offsets");
  if (!e["dtype"].is_string()) ZRT_THROW(CheckpointError, source, ": ", where, " has a non-string dtype");
  const DType dtype = parse_safetensors_dtype(e["dtype"].get<std::string>(), source + ": " + where);
  if (!e["shape"].is_array()) ZRT_THROW(CheckpointError, source, ": ", where, " has a non-array shape");
  Shape shape;
  for (const json& d : e["shape"]) shape.push_back(json_int(d, where + " shape dim", source));
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    ZRT_THROW(CheckpointError, source, ": ", where, " data_offsets must be [begin, end]");
  const auto begin = static_cast<std::uint64_t>(json_int(off[0], where + " data offset", source));
  const auto end = static_cast<std::uint64_t>(json_int(off[1], where + " data offset", source));
  if (begin > end || end > data_bytes)
    ZRT_THROW(CheckpointError, source, ": ", where, " data_offsets [", begin, ", ", end,
              ") are outside the data section of ", data_bytes, " bytes");
  std::int64_t numel = 0;
  try {
    numel = shape_numel(shape);
  } catch (const InvalidArgument&) {
    ZRT_THROW(CheckpointError, source, ": ", where, " has an impossible shape ", shape_str(shape));
  }
  if (static_cast<std::uint64_t>(numel) * dtype_size(dtype) != end - begin)
    ZRT_THROW(CheckpointError, source, ": ", where, " holds ", end - begin, " bytes but ",
              dtype_name(dtype), shape_str(shape), " needs ", numel * dtype_size(dtype));
  Tensor t = Tensor::empty(shape, dtype);
  if (end > begin) std::memcpy(t.data_ptr(), data + begin, end - begin);
  return t.set_name(key);
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
  }
  return "?";
}

DType parse_safetensors_dtype(const std::string& name, const std::string& source) {
  for (DType t : kAllDTypes)
    if (name == safetensors_dtype_name(t)) return t;
  ZRT_THROW(CheckpointError, source, ": unknown safetensors dtype '", name,
            "' (F32, BF16, F16, F64, I32, I64, U8)");
}

SafetensorsFile parse_safetensors(const std::vector<std::uint8_t>& bytes, const std::string& source) {
  if (bytes.size() < 8)
    ZRT_THROW(CheckpointError, source, ": truncated safetensors file (", bytes.size(),
              " bytes, the header length alone takes 8)");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes || header_len > bytes.size() - 8)
    ZRT_THROW(CheckpointError, source, ": truncated safetensors file: header of ", header_len,
              " bytes but only ", bytes.size() - 8, " follow the length");
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
  } catch (const json::exception& e) {
    ZRT_THROW(CheckpointError, source, ": bad safetensors JSON header: ", e.what());
  }
  if (!header.is_object())
    ZRT_THROW(CheckpointError, source, ": the safetensors header must be a JSON object");
  const std::uint8_t* data = bytes.data() + 8 + header_len;
  const std::uint64_t data_bytes = bytes.size() - 8 - header_len;
  SafetensorsFile file;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) ZRT_THROW(CheckpointError, source, ": __metadata__ must be an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          ZRT_THROW(CheckpointError, source, ": __metadata__ value of '", k, "' is not a string");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    file.tensors[key] = parse_entry(key, value, data, data_bytes, source);
  }
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ZRT_THROW(CheckpointError, path, ": cannot open safetensors file");
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  if (in.bad()) ZRT_THROW(CheckpointError, path, ": read error");
  return parse_safetensors(bytes, path);
}

std::vector<std::uint8_t> serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                                const std::map<std::string, std::string>& metadata,
                                                const SafetensorsWriteOptions& options) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  std::uint64_t offset = 0;
  for (const auto& [key, t] : tensors) {
    ZRT_CHECK_ARG(!key.empty() && key != "__metadata__", "safetensors: invalid tensor name '",
                  key, "'");
    const DType out = is_floating(t.dtype()) && !options.keep_float_dtypes ? DType::f32 : t.dtype();
    Tensor h = Tensor::empty(t.shape(), out);
    h.copy_(t);
    header[key] = {{"dtype", safetensors_dtype_name(out)},
                   {"shape", t.shape()},
                   {"data_offsets", {offset, offset + h.nbytes()}}};
    offset += h.nbytes();
    host.push_back(std::move(h));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::vector<std::uint8_t> bytes(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, text.data(), text.size());
  std::uint8_t* p = bytes.data() + 8 + text.size();
  for (const Tensor& h : host) {
    if (h.nbytes()) std::memcpy(p, h.data_ptr(), h.nbytes());
    p += h.nbytes();
  }
  return bytes;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const SafetensorsWriteOptions& options) {
  const std::vector<std::uint8_t> bytes = serialize_safetensors(tensors, metadata, options);
  namespace fs = std::filesystem;
  std::random_device rd;
  const std::string tmp = path + ".tmp" + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) ZRT_THROW(CheckpointError, path, ": cannot create temporary file ", tmp);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      ZRT_THROW(CheckpointError, path, ": writing ", bytes.size(), " bytes failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    ZRT_THROW(CheckpointError, path, ": cannot rename the temporary file into place: ", ec.message());
  }
}

}  // namespace zrt::model_zoo
