#include "zrt/optim/checkpoint/index_checksum.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "zrt/optim/checkpoint/checksum.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/io/input_file.h"

namespace zrt::optim {

namespace fs = std::filesystem;

namespace {

const std::string kChecksumLineTail = std::string("  ") + kIndexFileName;
// An index lists every parameter's name, shape and offset: far below this.
constexpr std::uint64_t kMaxIndexBytes = std::uint64_t(1) << 30;

std::string index_checksum(const std::string& text) {
  return checksum_hex(xxh64(text.data(), text.size()));
}

}  // namespace

std::string write_index_files(const std::string& step_dir, const std::string& index_json) {
  const std::string sum = index_checksum(index_json);
  // index.json first: a kill between the two leaves a .tmp step, never a step without its checksum.
  write_file_durably((fs::path(step_dir) / kIndexFileName).string(), index_json);
  write_file_durably((fs::path(step_dir) / kIndexChecksumFileName).string(),
                     sum + kChecksumLineTail + "\n");
  return sum;
}

std::optional<std::string> read_index_checksum_file(const std::string& step_dir) {
  const fs::path path = fs::path(step_dir) / kIndexChecksumFileName;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  // Note [One rule for every file zrt reads]: one line of a few dozen bytes.
  std::string line =
      read_input_file(path.string(), 4096, InputKind::checkpoint, "index checksum file");
  if (!line.empty() && line.back() == '\n') line.pop_back();
  if (line.size() != 16 + kChecksumLineTail.size() || !is_checksum_hex(line.substr(0, 16)) ||
      line.substr(16) != kChecksumLineTail)
    ZRT_THROW(CheckpointError, path.string(), ": must hold one line '<16 hex digits>",
              kChecksumLineTail, "', holds '", line.substr(0, 80), "'");
  return line.substr(0, 16);
}

IndexBytes read_checked_index(const std::string& step_dir,
                              const std::optional<std::string>& latest_xxh64,
                              const std::string& latest_path) {
  const std::string index_path = (fs::path(step_dir) / kIndexFileName).string();
  IndexBytes out{
      read_input_file(index_path, kMaxIndexBytes, InputKind::checkpoint, "checkpoint index"),
      false};
  const std::string got = index_checksum(out.text);
  if (const auto recorded = read_index_checksum_file(step_dir)) {
    out.has_checksum_file = true;
    if (*recorded != got)
      ZRT_THROW(CheckpointError, index_path,
                ": fails its checksum: ", (fs::path(step_dir) / kIndexChecksumFileName).string(),
                " records xxh64 ", *recorded, ", the file hashes to ", got,
                " (index.json was changed or is corrupt)");
  }
  if (latest_xxh64 && *latest_xxh64 != got)
    ZRT_THROW(CheckpointError, index_path, ": fails its checksum: ", latest_path,
              " records index-xxh64 ", *latest_xxh64, ", the file hashes to ", got,
              " (index.json was changed or is corrupt)");
  return out;
}

}  // namespace zrt::optim
