// zrt-bench ckpt [--params N] [--ranks R] [--optimizer-state-dtype fp32|bf16]
//                [--reps K] [--dir D] [--json]
//
// Saves and loads the checkpoint of a GPT of about N parameters (n_embd 512,
// as many layers as N allows, at least one: 3.3 M) trained one step on R local ranks (AdamW's
// moments in fp32 or bf16: Note [bf16 AdamW moments]), and
// compares, in the same run and directory:
//   save  vs writing the same bytes, one file per rank, with write + fsync;
//   a background save's pause (the staging copy; Note [Checkpoints saved in
//   the background]) vs the synchronous save, and its write, which overlaps
//   a training step;
//   load  vs reading those plain files back with read;
//   the pause a save adds to a training step (step + save vs step alone).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "tools/train/train_setup.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/optim/checkpoint/background_checkpoint.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/kernel_filesystem.h"

namespace zrt::bench {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::int64_t params = std::int64_t(1) << 24;
  int ranks = 1;
  std::string state_dtype = "fp32";  // AdamW's m and v: fp32 or bf16
  int reps = 5;
  std::string dir;
  bool json = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Wall-clock seconds `fn` takes.
template <class F>
double seconds_of(const F& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return seconds_since(t0);
}

// The baselines: all of `bytes` written with write + fsync, or read with read.
void plain_io(const std::string& path, std::vector<char>& bytes, bool write) {
  const int fd = write ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                       : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZRT_CHECK_ARG(fd >= 0, "cannot open ", path);
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = write ? ::write(fd, bytes.data() + done, bytes.size() - done)
                            : ::read(fd, bytes.data() + done, bytes.size() - done);
    ZRT_CHECK_ARG(n > 0, write ? "write to " : "read of ", path, " failed");
    done += static_cast<std::size_t>(n);
  }
  if (write) ::fsync(fd);
  ::close(fd);
}

}  // namespace

int bench_ckpt(int argc, char** argv) {
  Options o;
  OptionParser("ckpt",
               "usage: zrt-bench ckpt [--params N] [--ranks R] [--optimizer-state-dtype "
               "fp32|bf16] [--reps K] [--dir D] [--json]")
      .value("--params", o.params)
      .value("--ranks", o.ranks)
      .value("--optimizer-state-dtype", o.state_dtype)
      .value("--dir", o.dir)
      .runs(o.reps, o.json)
      .parse(argc, argv);
  ZRT_CHECK_ARG(o.params > 0 && o.ranks > 0, "--params and --ranks must be positive");
  ZRT_CHECK_ARG(o.ranks <= train::kMaxLocalRanks, "--ranks ", o.ranks, " is more than ",
                train::kMaxLocalRanks, " local ranks");
  ZRT_CHECK_ARG(o.state_dtype == "fp32" || o.state_dtype == "bf16",
                "--optimizer-state-dtype is fp32 or bf16, not '", o.state_dtype, "'");
  const fs::path dir =
      o.dir.empty() ? fs::temp_directory_path() / ("zrt-bench-ckpt-" + std::to_string(::getpid()))
                    : fs::path(o.dir);
  // A --dir given keeps what it held: the suite's own names must be free.
  for (const char* own : {"ckpt", "ckpt-async"})
    ZRT_CHECK_ARG(o.dir.empty() || !fs::exists(dir / own), "--dir ", o.dir, " already holds ", own,
                  "/, which this suite writes and removes: give another --dir");
  for (int r = 0; r < o.ranks && !o.dir.empty(); ++r)
    ZRT_CHECK_ARG(!fs::exists(dir / ("plain-" + std::to_string(r))), "--dir ", o.dir,
                  " already holds plain-", r,
                  ", which this suite writes and removes: give another "
                  "--dir");
  ZRT_CHECK_ARG(o.dir.empty() || fs::is_directory(dir), "--dir ", o.dir,
                " is not an existing directory");
  if (!o.dir.empty()) refuse_kernel_filesystem("--dir", dir);
  // The host holds about 32 bytes a parameter: the weights, their fp32
  // master and gradient, AdamW's moments and a background save's copy.
  const train::AvailableMemory avail = train::available_memory();
  ZRT_CHECK_ARG(avail.bytes() == 0 ||
                    static_cast<double>(o.params) * 32 <= static_cast<double>(avail.bytes()),
                "--params ", o.params, " needs about ",
                train::human_bytes(static_cast<double>(o.params) * 32), " of memory, but ",
                train::human_bytes(static_cast<double>(avail.bytes())), " is available",
                avail.bound_by());
  fs::create_directories(dir);
  // What it writes goes however the suite ends; a --dir given stays (it may
  // hold other files).
  struct Cleanup {
    const Options& o;
    const fs::path& dir;
    ~Cleanup() {
      std::error_code ec;
      if (o.dir.empty()) {
        fs::remove_all(dir, ec);
        return;
      }
      fs::remove_all(dir / "ckpt", ec);
      fs::remove_all(dir / "ckpt-async", ec);
      for (int r = 0; r < o.ranks; ++r) fs::remove(dir / ("plain-" + std::to_string(r)), ec);
    }
  } cleanup{o, dir};
  const std::int64_t width = 512;
  const int layers = static_cast<int>(std::max<std::int64_t>(1, o.params / (12 * width * width)));

  std::vector<double> save_s, write_s, load_s, read_s, step_s, step_save_s, pause_s, written_s,
      step_async_s;
  std::int64_t numel = 0;
  std::uint64_t bytes = 0;
  std::mutex mu;
  run_local_ranks(o.ranks, [&](const CommPtr& world) {
    model_zoo::TrainerConfig c;
    c.model.n_layer = layers;
    c.model.n_head = 8;
    c.model.n_embd = width;
    c.batch_size = o.ranks;
    c.seq_len = 16;
    c.steps = 2 * o.reps + 2;
    c.engine.zero.adamw.state_dtype = o.state_dtype == "bf16" ? DType::bf16 : DType::f32;
    model_zoo::Trainer trainer(world, c, model_zoo::synthetic_text_dataset());
    trainer.step();
    const std::string root = (dir / "ckpt").string();
    zrt::optim::BackgroundCheckpointSaver saver(trainer.engine().module());  // collective
    auto background = [&] {
      return saver.save(trainer.next_step(), zrt::optim::checkpoint_into(root + "-async", 1));
    };
    background();  // faults the staging buffers in once, as a run's first save does
    saver.wait();
    const fs::path plain = dir / ("plain-" + std::to_string(world->rank()));
    for (int r = 0; r < o.reps; ++r) {
      world->barrier();
      std::string step;
      const double save =
          seconds_of([&] { step = trainer.save_checkpoint(zrt::optim::checkpoint_into(root, 1)); });
      zrt::optim::CheckpointReader reader(step);  // sizes of every rank's file
      const auto& me = reader.index().ranks[world->rank()];
      std::vector<char> blob(me.bytes, 1);
      world->barrier();
      const double write = seconds_of([&] {
        plain_io(plain.string(), blob, true);
        world->barrier();
      });
      const double load = seconds_of([&] { trainer.resume(step); });
      world->barrier();
      const double read = seconds_of([&] {
        plain_io(plain.string(), blob, false);
        world->barrier();
      });
      const double step_alone = seconds_of([&] { trainer.step(); });
      const double step_and_save = seconds_of([&] {
        trainer.step();
        trainer.save_checkpoint(zrt::optim::checkpoint_into(root, 1));
      });
      // A background save, then a step while it is written.
      world->barrier();
      const auto t0 = std::chrono::steady_clock::now();
      background();
      const double pause = seconds_since(t0);
      trainer.step();
      const double step_with_async = seconds_since(t0);
      saver.wait();
      const double written = seconds_since(t0);
      if (world->rank() == 0) {
        std::lock_guard lock(mu);
        save_s.push_back(save), write_s.push_back(write), load_s.push_back(load),
            read_s.push_back(read);
        step_s.push_back(step_alone), step_save_s.push_back(step_and_save);
        pause_s.push_back(pause), written_s.push_back(written),
            step_async_s.push_back(step_with_async);
        bytes = reader.index().total_bytes();
        numel = 0;
        for (const auto& h : reader.index().handles)
          for (const auto& p : h.params) numel += shape_numel(p.shape);
      }
    }
  });

  const double gb = static_cast<double>(bytes) / 1e9;
  Table table({"what", "ms", "GB_s", "vs_plain"});
  table.add({"save (write+fsync, index, rename)", Table::num(median(save_s) * 1e3),
             Table::num(gb / median(save_s)), Table::num(median(write_s) / median(save_s))});
  table.add({"plain write + fsync", Table::num(median(write_s) * 1e3),
             Table::num(gb / median(write_s)), "1"});
  table.add({"background save: pause (vs_plain: pause / save)", Table::num(median(pause_s) * 1e3),
             "", Table::num(median(pause_s) / median(save_s))});
  table.add({"background save: written (a step overlapping)", Table::num(median(written_s) * 1e3),
             "", ""});
  table.add({"load (verify + reshard + apply)", Table::num(median(load_s) * 1e3),
             Table::num(gb / median(load_s)), Table::num(median(read_s) / median(load_s))});
  table.add({"plain read", Table::num(median(read_s) * 1e3), Table::num(gb / median(read_s)), "1"});
  table.add({"training step", Table::num(median(step_s) * 1e3), "", ""});
  table.add({"training step + save", Table::num(median(step_save_s) * 1e3), "",
             Table::num(median(step_s) / median(step_save_s))});
  table.add({"training step + background save", Table::num(median(step_async_s) * 1e3), "",
             Table::num(median(step_s) / median(step_async_s))});
  if (!o.json)
    std::printf(
        "zrt-bench ckpt: GPT of %lld parameters (%d layers x %lld wide), %d rank(s), %s moments, "
        "%.1f MB per checkpoint, median of %d, in %s%s\n",
        static_cast<long long>(numel), layers, static_cast<long long>(width), o.ranks,
        o.state_dtype.c_str(), gb * 1e3, o.reps, dir.c_str(),
        numel > 2 * o.params ? " (the smallest this suite builds: one layer)" : "");
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
