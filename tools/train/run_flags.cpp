#include "tools/train/run_flags.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tools/train/train_setup.h"
#include "zrt/model_zoo/models/model_config.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/runtime/comm/rank_agreement.h"
#include "zrt/runtime/error.h"

namespace zrt::train {

namespace {

// A flag's value as the ranks compare it: numbers as numbers (1e-3 and
// 0.001 agree), true/false as booleans, anything else as text.
nlohmann::json normalised_flag_value(const std::string& v) {
  if (v == "true" || v == "false") return v == "true";
  const char* end = v.data() + v.size();
  std::int64_t i = 0;
  if (auto [p, ec] = std::from_chars(v.data(), end, i); ec == std::errc() && p == end) return i;
  std::uint64_t u = 0;
  if (auto [p, ec] = std::from_chars(v.data(), end, u); ec == std::errc() && p == end) return u;
  double d = 0;
  if (auto [p, ec] = std::from_chars(v.data(), end, d); ec == std::errc() && p == end) return d;
  return v;
}

constexpr const char* kWarmupAsRun = "warmup (as run)";
constexpr const char* kSampledHash = ", sampled hash ";

std::uint64_t fnv1a(std::uint64_t h, const char* bytes, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i)
    h = (h ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ull;
  return h;
}

// Size, FNV-1a hash of the first MiB and of 64 blocks of 64 KiB spread over
// the rest up to its end: the same file on every host, and the same file
// as at a save, cheaply (an edit past the first MiB changed nothing of the
// hash of the first alone).
std::string data_identity(const std::string& path) {
  if (path.empty()) return "embedded";
  if (!std::filesystem::is_regular_file(path)) return "not a regular file";  // never open a FIFO
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  const int open_errno = errno;
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  // The reason shows when one rank alone cannot read it (out of file
  // descriptors, say), which would otherwise read as other inputs.
  if (!in)
    return std::string("unreadable: ") + (open_errno ? std::strerror(open_errno) : "open failed");
  if (ec) return "unreadable: " + ec.message();
  constexpr std::uint64_t kHead = std::uint64_t{1} << 20, kBlock = std::uint64_t{1} << 16;
  constexpr std::uint64_t kSamples = 64, kFnvOffset = 14695981039346656037ull;
  std::vector<char> buf(kHead);
  in.read(buf.data(), static_cast<std::streamsize>(kHead));
  std::string id = std::to_string(size) + " bytes, head hash " +
                   std::to_string(fnv1a(kFnvOffset, buf.data(), in.gcount()));
  if (size <= kHead) return id;
  std::uint64_t sampled = kFnvOffset;
  const std::uint64_t rest = size - kHead;
  for (std::uint64_t i = 0; i < kSamples; ++i) {
    const std::uint64_t at = kHead + (rest > kBlock ? (rest - kBlock) * i / (kSamples - 1) : 0);
    in.clear();
    in.seekg(static_cast<std::streamoff>(at));
    in.read(buf.data(), static_cast<std::streamsize>(std::min(kBlock, size - at)));
    sampled = fnv1a(sampled, buf.data(), in.gcount());
  }
  // Checkpoints before the sampled hash stored the rest: a resume compares
  // that prefix (differing_run_flags).
  return id + kSampledHash + std::to_string(sampled);
}

nlohmann::json run_flags(const TrainOptions& o) {
  const model_zoo::ModelConfig& m = o.trainer.model;
  return {{"model", o.trainer.model.kind},
          {"preset", o.trainer.model.preset},
          {"n_layer", m.n_layer.value_or(0)},
          {"n_head", m.n_head.value_or(0)},
          {"n_embd", m.n_embd.value_or(0)},
          {"vocab_size", m.vocab_size.value_or(0)},
          {"block_size", o.as_given ? o.as_given->block_size : m.block_size.value_or(0)},
          {"hidden", m.hidden.value_or(std::vector<std::int64_t>{})},
          {"activation", m.activation.value_or("gelu")},
          {"data", o.data},
          {"steps", o.trainer.steps},
          {"batch_size", o.trainer.batch_size},
          {"seq_len", o.trainer.seq_len},
          {"lr", o.trainer.schedule.max_lr},
          {"min_lr", o.trainer.schedule.min_lr},
          {"warmup", o.as_given ? o.as_given->warmup : o.trainer.schedule.warmup_steps},
          // The warmup the schedule ran: --warmup's default is cut to --steps
          // (warmup_change_note).
          {kWarmupAsRun, o.trainer.schedule.warmup_steps},
          {"weight_decay", o.trainer.engine.zero.adamw.weight_decay},
          {"clip", o.trainer.engine.zero.adamw.max_grad_norm},
          {"beta1", o.trainer.engine.zero.adamw.beta1},
          {"beta2", o.trainer.engine.zero.adamw.beta2},
          {"eps", o.trainer.engine.zero.adamw.eps},
          {"seed", o.trainer.engine.seed},
          // A data file changed under the same path since the save (a
          // resume then warns naming it).
          {"data (contents)", data_identity(o.data)}};
}

}  // namespace

std::string run_flags_json(const TrainOptions& o) { return run_flags(o).dump(); }

// Flags naming a path, which each host may spell its own way.
const char* const kPathFlags[] = {"--data",  "--init-from",      "--save",   "--metrics",
                                  "--trace", "--checkpoint-dir", "--resume", "--offload-optimizer"};

std::string rank_agreement_json(const TrainOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [flag, value] : o.flag_values)  // a default decided later is spelt ""
    j[flag] = value.empty() ? nlohmann::json("(not given)") : normalised_flag_value(value);
  for (const char* flag : kPathFlags) j.erase(flag);
  std::string resumed_index;
  if (o.resume) try {
      const std::string path = o.resume_from.empty() ? o.checkpoint_dir : o.resume_from;
      resumed_index = optim::resolve_checkpoint(path) + "/index.json";
    } catch (const CheckpointError& e) {
      // A fresh start (no `latest` yet), which every rank must make, or
      // `latest` unreadable here: its reason, not "none", when ranks differ.
      resumed_index = resumes_a_checkpoint(o) ? std::string("unreadable: ") + e.what() : "";
    }
  j.update(
      {{"--data (contents)", data_identity(o.data)},
       {"--init-from (contents)", o.trainer.init_from.empty() ? "none"
                                  : resumes_a_checkpoint(o)   ? "not read (a checkpoint is resumed)"
                                                              : data_identity(o.trainer.init_from)},
       // The step's name first: ranks resuming two steps are told which
       // (copies of one step under other roots agree).
       {"--resume (checkpoint index)",
        resumed_index.empty() ? "none"
        : resumed_index.starts_with("unreadable")
            ? resumed_index
            : std::filesystem::path(resumed_index).parent_path().filename().string() + ", " +
                  data_identity(resumed_index)},
       {"--offload-optimizer (kind)",
        o.trainer.engine.zero.offload_optimizer.str().substr(
            0, o.trainer.engine.zero.offload_optimizer.str().find(':'))},
       {"--save (given)", !o.save.empty()},
       {"--metrics (given)", !o.metrics.empty()},  // rank 0 writes it
       {"--checkpoint-dir (given)", !o.checkpoint_dir.empty()},
       {"--resume (given)", o.resume}});
  return j.dump();
}

void check_ranks_agree(const std::vector<std::string>& per_rank) {
  std::vector<Settings> ranks;
  for (const std::string& text : per_rank) {
    Settings& flags = ranks.emplace_back();
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object())
      for (const auto& [key, value] : j.items()) flags.emplace_back(key, value.dump());
  }
  const std::vector<std::string> differing = differing_settings(ranks);
  ZRT_CHECK_ARG(differing.empty(),
                "the ranks were started with different flags or inputs; every rank of a run must "
                "be given the same:",
                indented_lines(differing, differing.size()));  // every flag to mend
}

namespace {

// The model's dimensions that run flags (run_flags) give, resolved: a
// dimension left at its preset's value is saved as 0 (or, for --hidden,
// empty), and one spelt out at that value is the same model. Flags that
// do not resolve (an older or foreign checkpoint) stay as they are.
nlohmann::json resolved_dims(nlohmann::json flags) {
  try {
    model_zoo::ModelConfig c;
    c.kind = flags.at("model").get<std::string>();
    c.preset = flags.at("preset").get<std::string>();
    auto dim = [&](const char* key, std::optional<std::int64_t>& field) {
      if (flags.at(key).get<std::int64_t>() != 0) field = flags.at(key).get<std::int64_t>();
    };
    if (c.kind == "gpt") {
      dim("n_layer", c.n_layer), dim("n_head", c.n_head), dim("n_embd", c.n_embd);
      dim("vocab_size", c.vocab_size), dim("block_size", c.block_size);
      const model_zoo::GptDims d = model_zoo::resolve_gpt_dims(c);
      flags.update(
          {{"n_layer", d.n_layer},
           {"n_head", d.n_head},
           {"n_embd", d.n_embd},
           {"vocab_size", d.vocab_size},
           // raised to --seq-len, as raise_block_size_to_seq_len does
           {"block_size", std::max(d.block_size, flags.at("seq_len").get<std::int64_t>())}});
    } else if (c.kind == "mlp") {
      const auto hidden = flags.at("hidden").get<std::vector<std::int64_t>>();
      if (!hidden.empty()) c.hidden = hidden;
      flags["hidden"] = model_zoo::resolve_mlp_dims(c).hidden;
    }
  } catch (const std::exception&) {  // as saved
  }
  return flags;
}

// A number with `digits` significant digits; anything else as JSON.
std::string shown_value(const nlohmann::json& v, int digits) {
  if (!v.is_number_float()) return v.dump();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v.get<double>());
  return buf;
}

// "OLD -> NEW" with the fewest digits (from 6) that tell the two apart: a
// default --min-lr of --lr 0.003 / 10 is 0.0003, not 0.00030000000000000003.
std::string shown_change(const nlohmann::json& before, const nlohmann::json& after) {
  for (int digits = 6;; ++digits) {
    const std::string a = shown_value(before, digits), b = shown_value(after, digits);
    if (a != b || digits == 17) return a + " -> " + b;
  }
}

}  // namespace

std::vector<std::string> differing_run_flags(const std::string& saved_json, const TrainOptions& o,
                                             std::vector<std::string>* values) {
  std::vector<std::string> out;
  const nlohmann::json parsed = nlohmann::json::parse(saved_json, nullptr, false);
  const nlohmann::json saved = parsed.is_object() ? resolved_dims(parsed) : parsed;
  const nlohmann::json ours = resolved_dims(run_flags(o));
  for (const auto& [key, value] : ours.items()) {
    if (key == kWarmupAsRun) continue;  // warmup_change_note
    const bool known = saved.is_object() && saved.contains(key);
    if (known ? saved[key] == value : key == "data (contents)")  // older checkpoints lack it
      continue;
    // Older checkpoints' data identity stops before the sampled hash.
    if (known && key == "data (contents)" && saved[key].is_string() && value.is_string() &&
        value.get<std::string>().starts_with(saved[key].get<std::string>() + kSampledHash))
      continue;
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    out.push_back(flag);
    if (values)
      values->push_back(
          !known || key == "data (contents)" ? flag : flag + " " + shown_change(saved[key], value));
  }
  return out;
}

std::string warmup_change_note(const std::string& saved_json, const TrainOptions& o) {
  const nlohmann::json saved = nlohmann::json::parse(saved_json, nullptr, false);
  const std::int64_t now = o.trainer.schedule.warmup_steps;
  if (!saved.is_object() || !saved.contains(kWarmupAsRun) ||
      !saved[kWarmupAsRun].is_number_integer() || saved[kWarmupAsRun].get<std::int64_t>() == now)
    return "";
  const std::int64_t then = saved[kWarmupAsRun].get<std::int64_t>();
  return "the checkpoint's run warmed the learning rate up over " + std::to_string(then) +
         " step(s), this run over " + std::to_string(now) +
         " (--warmup's default is cut to --steps): the learning rate of the coming steps is not "
         "the one the checkpoint's run would have used" +
         // An explicit --warmup longer than --steps is refused: no advice to give one.
         (then <= o.trainer.steps
              ? "; give --warmup " + std::to_string(then) + " to keep its warmup"
              : std::string());
}

}  // namespace zrt::train
