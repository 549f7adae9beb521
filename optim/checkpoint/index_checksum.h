// The checksum of a step's index.json: xxHash64 of its exact bytes, kept
// outside it in the step's index.json.xxh64 and on the second line of
// `latest` (Note [Checkpoint format], "The index's own checksum").
#pragma once

#include <optional>
#include <string>

namespace zrt::optim {

inline constexpr const char* kIndexFileName = "index.json";
// "<16 hex digits>  index.json\n", as `xxhsum` prints it (so `xxhsum -c` reads it too).
inline constexpr const char* kIndexChecksumFileName = "index.json.xxh64";

// Writes step_dir/index.json and then its checksum file, each durably;
// returns the checksum.
std::string write_index_files(const std::string& step_dir, const std::string& index_json);

// The checksum step_dir's checksum file records; nullopt when there is no
// such file. CheckpointError naming the file when it is malformed.
std::optional<std::string> read_index_checksum_file(const std::string& step_dir);

struct IndexBytes {
  std::string text;                // index.json, byte for byte
  bool has_checksum_file = false;  // whether index.json.xxh64 was there (and matched)
};
// Reads step_dir/index.json and checks it against every checksum recorded:
// its checksum file when there is one, and `latest_xxh64` when given (read
// from the `latest` file `latest_path`). CheckpointError naming the file
// that disagrees and both checksums.
IndexBytes read_checked_index(const std::string& step_dir,
                              const std::optional<std::string>& latest_xxh64 = {},
                              const std::string& latest_path = {});

}  // namespace zrt::optim
