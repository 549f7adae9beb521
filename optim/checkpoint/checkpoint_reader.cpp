#include "zrt/optim/checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include "zrt/optim/checkpoint/checksum.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/checkpoint/index_checksum.h"
#include "zrt/runtime/io/output_path.h"

namespace zrt::optim {

namespace fs = std::filesystem;

namespace {

// The step number a step directory's name carries; nullopt for another name (a copy, a .tmp).
std::optional<std::int64_t> step_of_dir(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return parse_step_dir_name(p.filename().string());
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path) {
  std::optional<std::string> latest_checksum;
  step_dir_ = resolve_checkpoint(path, &latest_checksum);
  const std::string index_path = (fs::path(step_dir_) / kIndexFileName).string();
  // Checksums before parsing: an edited index is named as edited, not as whatever it now gets wrong.
  const IndexBytes bytes =
      read_checked_index(step_dir_, latest_checksum, (fs::path(path) / "latest").string());
  index_ = index_from_json(bytes.text, index_path);
  const std::string checksum_file = (fs::path(step_dir_) / kIndexChecksumFileName).string();
  if (index_.version >= kFirstIndexChecksumVersion && !bytes.has_checksum_file)
    ZRT_THROW(CheckpointError, checksum_file, ": is missing; format ", index_.version,
              " always writes it next to index.json, so this step is incomplete or was "
              "altered: resume another step");
  if (index_.version < kFirstIndexChecksumVersion && bytes.has_checksum_file)
    ZRT_THROW(CheckpointError, index_path, ": says format version ", index_.version,
              ", which predates ", kIndexChecksumFileName,
              ", yet it is there: the version was edited");
  if (const auto named = step_of_dir(step_dir_); named && *named != index_.step)
    ZRT_THROW(CheckpointError, index_path, ": index field step is ", index_.step,
              " but the directory is ", step_dir_name(*named));
  for (std::size_t h = 0; h < index_.handles.size(); ++h)
    for (std::size_t i = 0; i < index_.handles[h].params.size(); ++i)
      params_.emplace(index_.handles[h].params[i].fqn,
                      std::make_pair(h, i));  // unique: validate_index
  for (const RankRecord& r : index_.ranks) {
    if (r.file.empty()) continue;
    const fs::path f = fs::path(step_dir_) / r.file;
    std::error_code ec;
    const fs::file_status status = fs::status(f, ec);  // through links
    if (!fs::exists(status))
      ZRT_THROW(CheckpointError, f.string(), ": rank ", r.rank, "'s file is missing");
    if (!fs::is_regular_file(status))
      ZRT_THROW(CheckpointError, f.string(), ": rank ", r.rank, "'s file is ",
                file_type_name(status.type()), ", not a regular file");
    const auto size = fs::file_size(f, ec);
    if (ec)
      ZRT_THROW(CheckpointError, f.string(), ": rank ", r.rank, "'s file cannot be read (",
                ec.message(), ")");
    if (size != r.bytes)
      ZRT_THROW(CheckpointError, f.string(), ": rank ", r.rank, "'s file has ", size,
                " bytes, the index says ", r.bytes, " (truncated or replaced)");
  }
}

CheckpointReader::~CheckpointReader() = default;

const ParamRecord* CheckpointReader::find_param(const std::string& fqn, std::size_t* handle) const {
  auto it = params_.find(fqn);
  if (it == params_.end()) return nullptr;
  if (handle) *handle = it->second.first;
  return &index_.handles[it->second.first].params[it->second.second];
}

SafetensorsReader& CheckpointReader::file(const RankRecord& rank) {
  // Only the calling thread opens files; read_shards opens them before its threads start.
  auto it = files_.find(rank.rank);
  // A checkpoint of more ranks than the process may open files: the open
  // ones are closed (reopened when needed again).
  if (it == files_.end() && files_.size() >= kMaxOpenFiles) files_.clear();
  if (it == files_.end())
    it = files_
             .emplace(rank.rank, std::make_unique<SafetensorsReader>(
                                     (fs::path(step_dir_) / rank.file).string()))
             .first;
  return *it->second;
}

Tensor CheckpointReader::read_verified(const RankRecord& rank, const std::string& name) {
  SafetensorsReader& f = file(rank);
  const TensorRecord& want = rank.tensors.at(name);
  auto it = f.entries().find(name);
  if (it == f.entries().end())
    ZRT_THROW(CheckpointError, f.path(), ": tensor ", name, " is missing");
  if (it->second.dtype != want.dtype || it->second.shape != want.shape)
    ZRT_THROW(CheckpointError, f.path(), ": tensor ", name, " is ", dtype_name(it->second.dtype),
              shape_str(it->second.shape), ", the index says ", dtype_name(want.dtype),
              shape_str(want.shape));
  // Hashed piece by piece as it is read, while each piece is in cache.
  StreamingXxh64 hash;
  Tensor t = f.read(name, huge_page_host_allocator(),
                    [&](const void* p, std::size_t n) { hash.update(p, n); });
  const std::string got = checksum_hex(hash.digest());
  if (got != want.xxh64)
    ZRT_THROW(CheckpointError, f.path(), ": tensor ", name, " fails its checksum (xxh64 ", got,
              ", the index says ", want.xxh64, "): the file is corrupt");
  return t;
}

const RankRecord& CheckpointReader::holder(std::size_t h, int z) const {
  for (const RankRecord& r : index_.ranks)
    if (!r.file.empty() && r.zero1_rank == z) return r;
  ZRT_THROW(CheckpointError, step_dir_, ": no rank file holds zero1 shard ", z, " of ",
            index_.handles[h].name);
}

const Tensor& CheckpointReader::shard(std::size_t h, int z, ShardKind kind) {
  const auto key = std::make_tuple(h, z, kind);
  auto it = shards_.find(key);
  if (it != shards_.end()) return it->second;
  return shards_[key] =
             read_verified(holder(h, z), shard_tensor_name(index_.handles[h].name, kind));
}

void CheckpointReader::read_shards(const std::vector<ShardKey>& keys) {
  struct Job {
    std::tuple<std::size_t, int, ShardKind> key;
    const RankRecord* rank;
    std::string name;
  };
  std::vector<Job> jobs;
  for (const ShardKey& k : keys) {
    const auto key = std::make_tuple(k.handle, k.zero1_rank, k.kind);
    if (shards_.count(key) ||
        std::any_of(jobs.begin(), jobs.end(), [&](const Job& j) { return j.key == key; }))
      continue;
    const RankRecord& r = holder(k.handle, k.zero1_rank);
    jobs.push_back({key, &r, shard_tensor_name(index_.handles[k.handle].name, k.kind)});
  }
  std::vector<Tensor> read(jobs.size());
  std::vector<std::exception_ptr> errors(jobs.size());
  // The jobs in runs of at most kMaxOpenFiles files, each opened here before
  // the threads start: the threads only read.
  for (std::size_t begin = 0; begin < jobs.size();) {
    std::set<int> ranks;
    std::size_t end = begin;
    for (; end < jobs.size(); ++end) {
      if (!ranks.count(jobs[end].rank->rank) && ranks.size() == kMaxOpenFiles) break;
      ranks.insert(jobs[end].rank->rank);
    }
    std::erase_if(files_, [&](const auto& f) { return !ranks.count(f.first); });
    for (std::size_t j = begin; j < end; ++j) file(*jobs[j].rank);
    std::atomic<std::size_t> next{begin};
    auto work = [&] {
      for (std::size_t j; (j = next++) < end;) {
        try {
          read[j] = read_verified(*jobs[j].rank, jobs[j].name);
        } catch (...) {
          errors[j] = std::current_exception();
        }
      }
    };
    // Reading from the page cache is a copy per thread: a few threads, not one per core.
    const std::size_t threads =
        std::min<std::size_t>({end - begin, 4, std::max(1u, std::thread::hardware_concurrency())});
    std::vector<std::thread> pool;
    try {
      for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    } catch (const std::system_error&) {
      // No more threads to be had: those started and this one read them all.
    }
    work();
    for (std::thread& t : pool) t.join();
    begin = end;
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);  // the first failing shard, in key order
  for (std::size_t j = 0; j < jobs.size(); ++j) shards_[jobs[j].key] = read[j];
}

void CheckpointReader::read_param_range(const std::string& fqn, ShardKind kind, std::int64_t begin,
                                        std::int64_t end, float* dst) {
  std::size_t h = 0;
  const ParamRecord* p = find_param(fqn, &h);
  if (!p) ZRT_THROW(CheckpointError, step_dir_, ": the checkpoint has no parameter ", fqn);
  ZRT_CHECK_ARG(0 <= begin && begin <= end && end <= shape_numel(p->shape), "range [", begin, ", ",
                end, ") is outside parameter ", fqn, " of ", shape_numel(p->shape), " elements");
  const std::int64_t shard_numel = index_.handles[h].shard_numel();
  // Flat elements [p->offset + begin, p->offset + end), shard by shard.
  for (std::int64_t flat = p->offset + begin; flat < p->offset + end;) {
    const int z = static_cast<int>(flat / shard_numel);
    const std::int64_t in_shard = flat - z * shard_numel;
    const std::int64_t n = std::min(p->offset + end - flat, shard_numel - in_shard);
    const Tensor& s = shard(h, z, kind);
    std::memcpy(dst + (flat - p->offset - begin), s.data<float>() + in_shard,
                static_cast<std::size_t>(n) * 4);
    flat += n;
  }
}

Tensor CheckpointReader::read_param(const std::string& fqn, ShardKind kind) {
  const ParamRecord* p = find_param(fqn);
  if (!p) ZRT_THROW(CheckpointError, step_dir_, ": the checkpoint has no parameter ", fqn);
  Tensor t = Tensor::empty(p->shape, DType::f32);
  read_param_range(fqn, kind, 0, t.numel(), t.data<float>());
  return t.set_name(fqn);
}

std::uint64_t CheckpointReader::verify_all() {
  std::uint64_t bytes = 0;
  for (const RankRecord& r : index_.ranks) {
    if (r.file.empty()) continue;
    SafetensorsReader& f = file(r);
    for (const auto& [name, e] : f.entries())
      if (!r.tensors.count(name))
        ZRT_THROW(CheckpointError, f.path(), ": tensor ", name, " is not in the index");
    for (const auto& [name, rec] : r.tensors) bytes += read_verified(r, name).nbytes();
  }
  return bytes;
}

void fill_shard(CheckpointReader& reader, const std::vector<std::string>& fqns,
                const std::vector<optim::ShardParamInfo>& infos, ShardKind kind, Tensor& out) {
  ZRT_CHECK_ARG(fqns.size() == infos.size(), "fill_shard: ", fqns.size(), " names for ",
                infos.size(), " infos");
  ZRT_CHECK_ARG(out.dtype() == DType::f32 && out.device().is_cpu(), "fill_shard: ", out.str(),
                " must be f32 cpu");
  float* dst = out.data<float>();
  for (std::size_t i = 0; i < fqns.size(); ++i) {
    const optim::ShardParamInfo& info = infos[i];
    if (info.in_shard && info.numel_in_shard > 0)
      reader.read_param_range(fqns[i], kind, info.intra_param_start, info.intra_param_end,
                              dst + info.offset_in_shard);
  }
  zero_outside_params(infos, out);
}

void zero_outside_params(const std::vector<optim::ShardParamInfo>& infos, Tensor& out) {
  ZRT_CHECK_ARG(out.dtype() == DType::f32 && out.device().is_cpu(),
                "zero_outside_params: ", out.str(), " must be f32 cpu");
  float* dst = out.data<float>();
  // Parameters lie in flat order: the padding is between and after them.
  std::int64_t covered = 0;
  for (const optim::ShardParamInfo& info : infos) {
    if (!info.in_shard || info.numel_in_shard == 0) continue;
    ZRT_CHECK_ARG(info.offset_in_shard >= covered,
                  "zero_outside_params: parameters out of flat order");
    std::fill(dst + covered, dst + info.offset_in_shard, 0.0f);
    covered = info.offset_in_shard + info.numel_in_shard;
  }
  std::fill(dst + covered, dst + out.numel(), 0.0f);
}

}  // namespace zrt::optim
