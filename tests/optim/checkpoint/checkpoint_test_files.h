// Files of the checkpoint tests: a temporary directory, and editing a saved
// step's index.json either as a careful tool would (its checksums rewritten,
// so only validation can catch a lie) or as a careless one (index.json
// alone, so the checksums must).
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/checkpoint/index_checksum.h"

namespace zrt::test {

// A fresh directory under the system's temporary directory, removed with everything in it.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("zrt-ckpt-test-" + std::to_string(::getpid()) + "-" +
       std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
};

enum class Checksums { rewritten, stale };

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Replaces step_dir/index.json by `text`. With Checksums::rewritten, also its
// index.json.xxh64 and, when the root's `latest` names this step, `latest`,
// through the writer's own functions.
inline void write_index_text(const std::filesystem::path& step_dir, const std::string& text,
                             Checksums checksums) {
  if (checksums == Checksums::stale) {
    std::ofstream(step_dir / optim::kIndexFileName, std::ios::binary | std::ios::trunc) << text;
    return;
  }
  optim::write_index_files(step_dir.string(), text);
  const std::filesystem::path root = step_dir.parent_path();
  const auto step = optim::parse_step_dir_name(step_dir.filename().string());
  if (step && read_text(root / "latest").rfind(step_dir.filename().string() + "\n", 0) == 0)
    optim::publish_latest(root.string(), *step);
}

// Applies `edit` to step_dir/index.json, written back as the writer formats it.
inline void edit_index(const std::filesystem::path& step_dir,
                       const std::function<void(nlohmann::json&)>& edit,
                       Checksums checksums = Checksums::rewritten) {
  nlohmann::json index = nlohmann::json::parse(read_text(step_dir / optim::kIndexFileName));
  edit(index);
  write_index_text(step_dir, index.dump(1) + "\n", checksums);
}

}  // namespace zrt::test
