// zrt-train: trains a model-zoo model under ZeRO-3 as one process, under
// `mpirun -np N`, or as N local ranks (--ranks N). See README.md for flags.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "tools/common/environment.h"
#include "tools/common/report_error.h"
#include "tools/common/run_lock.h"
#include "tools/common/stop_signals.h"
#include "tools/train/divergence_watch.h"
#include "tools/train/flight_report.h"
#include "tools/train/memory_plan_report.h"
#include "tools/train/preflight.h"
#include "tools/train/run_directory.h"
#include "tools/train/run_flags.h"
#include "tools/train/setup_notice.h"
#include "tools/train/trace_stream.h"
#include "tools/train/train_options.h"
#include "tools/train/train_setup.h"
#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/model_zoo/data/micro_batch.h"
#include "zrt/model_zoo/models/model_config.h"
#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/checkpoint/full_param_file.h"
#include "zrt/optim/optim_error.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/comm/mpi_comm.h"

namespace zrt::train {
namespace {

using model_zoo::TrainerConfig;

// Note [Stopping on a signal]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// SIGTERM (Slurm preemption, `kill`), SIGINT (Ctrl-C), SIGHUP (the
// terminal or ssh session closed) and SIGXCPU (the soft CPU-time limit
// reached; its repeats, one a second, are not second signals) ask the run
// to stop:
// the current step finishes, every rank learns of the request at the same
// step (an all-gather of one byte per step, since a signal may reach ranks at
// different moments or only some of them), a checkpoint is written when
// --checkpoint-dir is set, and zrt-train exits 0 (a stop asked for in the
// last step comes too late: that run has finished and writes --save). A second signal exits at
// once with 128 + the signal number; one within half a second of the first is
// its copy (a launcher signals the process and its group: StopSignalTimes). A write to a closed pipe or socket
// (SIGPIPE: the output went through `| tee`, stopped with the job, or
// `| head`) asks for the stop too, but is no signal of the user's: it never
// makes a later SIGTERM the second one, and each later line raises it again.
// It used to end the run at once, losing every step since the last
// checkpoint. Once a rank under mpirun has failed and ends the job (Note
// [Ending after a timeout]), a stop signal is the launcher ending it: the
// process ends at once, without promising a step it will not finish. These
// three flags are the process-wide variables of zrt-train: a signal handler
// can reach nothing else.
tools::StopSignalTimes stop_signals;
std::atomic<bool> output_closed{false};
std::atomic<bool> job_ending{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the handlers' flags must be lock-free");

extern "C" void on_stop_signal(int sig) {
  const int saved_errno = errno;  // the write below must not change the interrupted code's
  if (job_ending.load()) _exit(128 + sig);
  // The kernel repeats SIGXCPU every second past the soft limit: a repeat
  // is no second signal of the user's.
  if (sig == SIGXCPU && stop_signals.requested()) return;
  const auto kind = stop_signals.take();
  if (kind == tools::StopSignalTimes::Kind::second) _exit(128 + sig);
  if (kind == tools::StopSignalTimes::Kind::copy) return;
  const char msg[] =
      "\nzrt-train: stop requested; finishing the current step (signal again to exit at once)\n";
  [[maybe_unused]] auto n = write(STDERR_FILENO, msg, sizeof msg - 1);
  errno = saved_errno;
}

extern "C" void on_broken_pipe(int) {
  const int saved_errno = errno;
  if (!output_closed.exchange(true)) {
    const char msg[] =
        "\nzrt-train: a write to a closed pipe (the output's reader is gone); stopping after this "
        "step\n";
    [[maybe_unused]] auto n = write(STDERR_FILENO, msg, sizeof msg - 1);
  }
  errno = saved_errno;
}

// What every rank learns after a step (collective, one exchange per step):
// whether any rank saw a stop signal, and whether any rank failed locally.
struct StepAgreement {
  bool stop = false, failed = false;
};

// Runs `fn` on this rank, then every rank learns whether any rank's fn
// threw, and all throw its message: a failure on one rank (the lead's lock,
// say) never leaves the others waiting in a collective it will not reach.
void all_or_none(Communicator& world, const std::function<void()>& fn) {
  std::string error;
  std::exception_ptr mine;
  try {
    fn();
  } catch (const std::exception& e) {
    mine = std::current_exception();
    error = e.what();
    if (error.empty()) error = "failed";
  }
  const auto all = world.all_gather_bytes(std::as_bytes(std::span(error.data(), error.size())));
  for (std::size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) {
      if (mine) std::rethrow_exception(mine);  // our own, with its type
      ZRT_THROW(UserError, "rank ", r, " failed: ",
                std::string(reinterpret_cast<const char*>(all[r].data()), all[r].size()));
    }
}

StepAgreement agree_after_step(Communicator& world, bool failed_here) {
  const std::byte mine[2] = {std::byte(stop_signals.requested() || output_closed.load()),
                             std::byte(failed_here)};
  StepAgreement out;
  for (const auto& b : world.all_gather_bytes(std::span<const std::byte>(mine, 2))) {
    out.stop = out.stop || (b.size() == 2 && b[0] != std::byte{0});
    out.failed = out.failed || (b.size() == 2 && b[1] != std::byte{0});
  }
  return out;
}

// Every rank was given the same flags and data: else one error on every
// rank naming the flags, before any step (different weights, or a hang).
void check_flags_agree(Communicator& world, const TrainOptions& o) {
  const std::string mine = rank_agreement_json(o);
  std::vector<std::string> all;
  for (const auto& b : world.all_gather_bytes(std::as_bytes(std::span(mine.data(), mine.size()))))
    all.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
  check_ranks_agree(all);
}

// Every rank writes its files of a step into --checkpoint-dir and rank 0
// publishes the step: all must see one directory (a filesystem they share).
// Rank 0 holds the run lock; each rank reads the lock's note in its own
// --checkpoint-dir. Caught here, not at the first save after the training.
void check_checkpoint_dir_shared(Communicator& world, const std::string& dir) {
  const std::string mine = tools::run_lock_note(dir);
  const auto all = world.all_gather_bytes(std::as_bytes(std::span(mine.data(), mine.size())));
  const std::string lead(reinterpret_cast<const char*>(all[0].data()), all[0].size());
  if (lead.empty()) return;  // a filesystem without locks: no note to compare
  for (std::size_t r = 1; r < all.size(); ++r) {
    const std::string theirs(reinterpret_cast<const char*>(all[r].data()), all[r].size());
    ZRT_CHECK_ARG(theirs == lead, "--checkpoint-dir: rank ", r,
                  " does not see the directory rank 0 writes into (rank 0's holds its run lock, ",
                  lead, "; rank ", r, "'s ",
                  theirs.empty() ? std::string("holds no run lock") : "holds " + theirs,
                  "): give every rank the same --checkpoint-dir, on a filesystem all ranks share");
  }
}

// --resume: loads the checkpoint (collective) unless there is none yet;
// returns whether it did. Newer steps of the directory are set aside.
bool resume_if_asked(Communicator& world, model_zoo::Trainer& trainer, const TrainOptions& o,
                     std::mutex& io) {
  if (!o.resume) return false;
  const bool lead = world.rank() == 0;
  const std::string path = o.resume_from.empty() ? o.checkpoint_dir : o.resume_from;
  if (!resumes_a_checkpoint(o)) {
    if (lead)
      std::printf("zrt-train: no checkpoint under %s yet: starting at step 0\n", path.c_str());
    return false;
  }
  std::string saved;
  try {
    saved = trainer.resume(path);
  } catch (const CheckpointError& e) {
    // A model of other dimensions fails on a parameter's shape: say which
    // of the model's flags made it so (--seq-len raises --block-size, say).
    static const std::set<std::string> kModelFlags = {"--model",      "--preset",  "--n-layer",
                                                      "--n-head",     "--n-embd",  "--vocab-size",
                                                      "--block-size", "--seq-len", "--hidden"};
    // A parameter missing on either side (--n-layer, --model) is "saved
    // from another model?": the flags say which.
    const std::string_view guess = " (saved from another model?)";
    std::string text = e.what();
    if (text.ends_with(guess)) text.resize(text.size() - guess.size());
    std::string flags;
    if (text.size() < std::string_view(e.what()).size() ||
        text.find(" was saved as ") != std::string::npos)
      try {
        for (const auto& f :
             train::differing_run_flags(optim::CheckpointReader(path).index().run_json, o))
          if (kModelFlags.count(f)) flags += " " + f;
        if (flags.find(" --model") != std::string::npos) flags = " --model";  // the rest follow
      } catch (const std::exception&) {  // the checkpoint's own error says it all
      }
    if (flags.empty()) throw;
    ZRT_THROW(CheckpointError, text, " (these flags differ from the checkpoint's run:", flags, ")");
  }
  // Refused before anything is said or set aside: a failed resume changes
  // nothing (Note [Resuming never loses work]).
  ZRT_CHECK_ARG(trainer.next_step() <= o.trainer.steps, "--steps ", o.trainer.steps,
                " is below the step ", trainer.next_step(),
                " the checkpoint was saved at: there is nothing to train ",
                "(raise --steps to continue)");
  const auto step = static_cast<long long>(trainer.next_step());
  if (lead) {
    std::lock_guard lock(io);
    std::printf("zrt-train: resumed from %s at step %lld\n", path.c_str(), step);
    if (!o.trainer.init_from.empty())
      std::printf("zrt-train: --init-from %s was not read: the checkpoint's weights were resumed\n",
                  o.trainer.init_from.c_str());
    std::vector<std::string> changes;
    const auto flags = train::differing_run_flags(saved, o, &changes);
    std::string text;
    for (const auto& c : changes) text += (text.empty() ? " " : ", ") + c;
    if (!text.empty())
      std::fprintf(stderr, "zrt-train: warning: these flags differ from the checkpoint's run:%s\n",
                   text.c_str());
    // Where the data of the coming steps starts moves with both (Note [Data order]).
    if (std::count(flags.begin(), flags.end(), "--batch-size") ||
        std::count(flags.begin(), flags.end(), "--seq-len"))
      std::fprintf(stderr,
                   "zrt-train: warning: the data of step %lld is read where --batch-size and "
                   "--seq-len place it now: sequences the checkpoint's run had not reached yet "
                   "may be skipped, or ones it trained on read again\n",
                   step);
    if (const std::string note = train::warmup_change_note(saved, o);
        !note.empty() && !std::count(flags.begin(), flags.end(), "--warmup"))
      std::fprintf(stderr, "zrt-train: warning: %s\n", note.c_str());
  }
  // A run that trains nothing abandons no trajectory.
  if (o.checkpoint_dir.empty() || trainer.next_step() == o.trainer.steps) return true;
  all_or_none(world, [&] {
    if (!lead) return;
    // A step of this number resumed from elsewhere: the directory's own is
    // of another trajectory, set aside with the newer ones.
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool own_step =
        fs::equivalent(optim::resolve_checkpoint(path),
                       fs::path(o.checkpoint_dir) / optim::step_dir_name(trainer.next_step()), ec);
    const auto moved = set_aside_newer_steps(o.checkpoint_dir, trainer.next_step(), !own_step);
    if (!moved.empty())
      std::printf(
          "zrt-train: %zu step(s) of %s (the trajectory abandoned by resuming step "
          "%lld%s) were moved into an abandoned-from-%lld-* directory there\n",
          moved.size(), o.checkpoint_dir.c_str(), step, own_step ? "" : " from elsewhere", step);
  });
  return true;
}

// Whether progress rewrites one line (\r) instead of printing a line each
// --log-every steps. Under a launcher a rank's stdout may be a pty (Open
// MPI's) while the job's output goes to a file, which a rewritten line
// would fill with every step.
bool rewrites_progress_line() {
  return isatty(fileno(stdout)) && detect_launch().launcher == Launcher::single;
}

// --checkpoint-dir: saves a step once; with --checkpoint-async, the save
// being written is waited for (and its failure thrown) by the next save and
// by finish().
class Checkpointer {
 public:
  Checkpointer(model_zoo::Trainer& trainer, const TrainOptions& o, bool lead, std::mutex& io)
      : trainer_(trainer),
        o_(o),
        lead_(lead),
        io_(io),
        options_(optim::checkpoint_into(o.checkpoint_dir, o.keep_last)),
        saved_at_(o.resume ? trainer.next_step() : -1) {
    options_.run_json = run_flags_json(o);
  }
  void save() {  // collective
    if (o_.checkpoint_dir.empty() || saved_at_ == trainer_.next_step()) return;
    finish();
    const std::string dir = trainer_.save_checkpoint(options_);
    saved_at_ = trainer_.next_step();
    if (!o_.trainer.checkpoint_async) said_saved(dir);
  }
  void finish() { said_saved(trainer_.wait_for_checkpoint()); }

 private:
  void said_saved(const std::string& dir) {
    if (!lead_ || dir.empty()) return;
    std::lock_guard lock(io_);
    std::printf("%szrt-train: saved checkpoint %s\n", rewrites_progress_line() ? "\n" : "",
                dir.c_str());
  }
  model_zoo::Trainer& trainer_;
  const TrainOptions& o_;
  bool lead_;
  std::mutex& io_;
  optim::CheckpointSaveOptions options_;
  std::int64_t saved_at_;
};

// The step `latest` names in a checkpoint directory; 0 without one.
std::int64_t newest_step_of(const std::string& checkpoint_dir) {
  if (checkpoint_dir.empty()) return 0;
  try {
    const std::string step = optim::resolve_checkpoint(checkpoint_dir);
    return optim::parse_step_dir_name(std::filesystem::path(step).filename().string()).value_or(0);
  } catch (const CheckpointError&) {
    return 0;
  }
}

// The lead's metrics line and progress line of each step.
class StepReporter {
 public:
  // Files are opened only after every input was validated: bad input writes nothing.
  StepReporter(const TrainOptions& o, bool lead, bool resumed, std::int64_t first, int world_size,
               std::mutex& io)
      : o_(o), tty_(lead && rewrites_progress_line()), first_(first), io_(io) {
    if (!lead || o.metrics.empty()) return;
    // A resumed run continues the file from its step, each step once (Note [Resuming never loses work]).
    // A resume that trains nothing (first == --steps) keeps the lines up to
    // the directory's newest step, which it leaves in place, and drops only
    // those of steps no checkpoint holds (a run killed after its last save).
    if (resumed && first == o.trainer.steps) {
      truncate_metrics_at(o.metrics, std::max(first, newest_step_of(o.checkpoint_dir)));
      return;
    }
    if (resumed) truncate_metrics_at(o.metrics, first);
    if (!open_run_output(metrics_, "--metrics", o.metrics,
                         resumed ? std::ios::app : std::ios::trunc, world_size,
                         [] { return stop_signals.requested(); }))
      return;  // stopped while it waited for a reader: the run stops at its first step
    const int err = errno;
    ZRT_CHECK_ARG(metrics_.good(), "cannot write metrics file '", o.metrics, "'",
                  err != 0 ? detail::concat(": ", std::strerror(err)) : std::string(),
                  err == EMFILE ? " (the open-file limit, ulimit -n)" : "");
  }
  void report(const model_zoo::StepReport& r, std::int64_t s) {
    elapsed_ += r.seconds;
    const double per_s = static_cast<double>(r.stats.tokens) / std::max(r.seconds, 1e-9);
    if (metrics_.is_open() && !metrics_reader_gone_) write_metrics(r, per_s);
    const bool last = s + 1 == o_.trainer.steps;
    // The run's first step (of a resumed run too), every --log-every, the last.
    if (!tty_ && !last && s != first_ && r.step % o_.log_every != 0) return;
    const double eta = elapsed_ / static_cast<double>(s + 1 - first_) *
                       static_cast<double>(o_.trainer.steps - s - 1);
    std::lock_guard lock(io_);
    std::printf(
        "%sstep %5lld/%lld  loss %.4f  lr %.2e  norm %.3f%s  %.0f %s/s  mem %s (peak %s)  "
        "comm %s  eta %.0fs%s",
        tty_ ? "\r" : "", static_cast<long long>(r.step + 1),
        static_cast<long long>(o_.trainer.steps), r.stats.loss, r.lr, r.stats.grad_norm,
        r.stats.skipped ? " (skipped)" : "", per_s, o_.trainer.model.kind == "gpt" ? "tok" : "rows",
        human_bytes(static_cast<double>(r.memory.allocated)).c_str(),
        human_bytes(static_cast<double>(r.memory.peak_allocated)).c_str(),
        human_bytes(static_cast<double>(r.traffic.total().sent)).c_str(), eta,
        tty_ && !last ? "" : "\n");
    std::fflush(stdout);
  }

 private:
  void write_metrics(const model_zoo::StepReport& r, double per_s) {
    nlohmann::ordered_json sent_by_kind;
    for (std::size_t k = 0; k < kCollectiveKinds; ++k)
      sent_by_kind[collective_kind_name(static_cast<CollectiveKind>(k))] = r.traffic.kinds[k].sent;
    const nlohmann::ordered_json line = {{"step", r.step},
                                         {"loss", r.stats.loss},
                                         {"lr", r.lr},
                                         {"grad_norm", r.stats.grad_norm},
                                         {"skipped", r.stats.skipped},
                                         {"tokens_per_s", per_s},
                                         {"mem_allocated", r.memory.allocated},
                                         {"mem_reserved", r.memory.reserved},
                                         {"mem_peak", r.memory.peak_allocated},
                                         {"rss", process_memory().resident},
                                         {"comm_sent", r.traffic.total().sent},
                                         {"comm_received", r.traffic.total().received},
                                         {"comm_sent_by_kind", sent_by_kind}};
    errno = 0;
    metrics_ << line.dump() << "\n";
    metrics_.flush();
    // A stream whose reader went away (`| head`) has asked for the stop
    // (SIGPIPE, on_broken_pipe), as a closed stdout does: not a failure.
    metrics_reader_gone_ = !metrics_.good() && errno == EPIPE;
    if (metrics_reader_gone_) return;
    const int err = errno;
    ZRT_CHECK_AS(ResourceError, metrics_.good(), "writing the metrics file ", o_.metrics,
                 " failed: ", err != 0 ? std::strerror(err) : "disk full?",
                 err == EFBIG ? " (the file size limit, ulimit -f)" : "");
  }
  const TrainOptions& o_;
  bool tty_;
  std::int64_t first_;
  std::mutex& io_;
  std::ofstream metrics_;
  bool metrics_reader_gone_ = false;
  double elapsed_ = 0;
};

// What a diverged run's message advises: bf16 only where fp16 overflowed;
// and what of the run is not written.
std::string divergence_advice(const TrainOptions& o) {
  const bool decay =
      weight_decay_too_large(o.trainer.schedule.max_lr, o.trainer.engine.zero.adamw.weight_decay);
  return std::string(decay ? "lower --weight-decay or --lr" : "lower --lr") +
         (o.trainer.engine.zero.dtype == DType::f16 ? " or use --dtype bf16" : "") +
         (o.save.empty() ? "" : "; --save " + o.save + " was not written");
}

// What a run that must end after a trained step (its metrics line failed)
// keeps of it: a checkpoint, as a stopped run writes (collective). Said as
// the end of the run's error.
std::string keep_trained_steps(model_zoo::Trainer& trainer, const TrainOptions& o,
                               Checkpointer& checkpoints) {
  const std::string after = "; the run stopped after step " + std::to_string(trainer.next_step()) +
                            " of " + std::to_string(o.trainer.steps);
  if (o.checkpoint_dir.empty()) return after + " (without --checkpoint-dir nothing of it is kept)";
  try {
    checkpoints.save();
    checkpoints.finish();
  } catch (const std::exception& e) {
    return after + ", and its checkpoint failed too: " + e.what();
  }
  return after + " and wrote its checkpoint into " + o.checkpoint_dir +
         ": continue with --resume (that step has no metrics line)";
}

// The steps from the trainer's next to --steps; false when a signal stopped them.
bool train_steps(Communicator& world, model_zoo::Trainer& trainer, const TrainOptions& o,
                 Checkpointer& checkpoints, StepReporter& reporter, TraceStream& trace) {
  const bool lead = world.rank() == 0;
  DivergenceWatch divergence(o.trainer.steps, divergence_advice(o));
  for (std::int64_t s = trainer.next_step(); s < o.trainer.steps; ++s) {
    model_zoo::StepReport r;
    try {
      r = trainer.step();
    } catch (const optim::TooManySkippedStepsWith<model_zoo::StepReport>& e) {
      // The same step on every rank: its line as any skipped step's, then
      // the stop (a line that cannot be written leaves the stop to say it).
      try {
        trace.flush();
        if (lead) reporter.report(e.found, s);
      } catch (const std::exception&) {
      }
      ZRT_THROW(optim::TooManySkippedSteps, "the run stopped at step ", s + 1, " of ",
                o.trainer.steps, " by --max-skipped-steps ",
                o.trainer.engine.zero.adamw.max_consecutive_skips, ": ", e.what(), "; ",
                divergence_advice(o));
    }
    divergence.add(r.stats);
    if (lead)  // --on-inconsistency warn: the findings, the same on every rank
      for (const std::string& f : r.stats.inconsistencies)
        std::fprintf(stderr, "zrt-train: warning: step %lld: %s\n", static_cast<long long>(r.step),
                     f.c_str());
    trace.flush();             // before its metrics line: a step with a line has its trace on disk
    std::string report_error;  // the lead's metrics write may fail: every rank must learn of it
    if (lead) {
      try {
        reporter.report(r, s);
      } catch (const std::exception& e) {
        report_error = e.what();
      }
    }
    StepAgreement agreed = agree_after_step(world, !report_error.empty());
    if (agreed.failed)
      ZRT_THROW(ResourceError, lead ? report_error : "rank 0 failed to write its metrics",
                keep_trained_steps(trainer, o, checkpoints));
    if (o.checkpoint_every > 0 && trainer.next_step() % o.checkpoint_every == 0) {
      checkpoints.save();
      // A stop asked for during the save stops here, its step saved, not
      // after one more step and save (a preemption's grace is short).
      if (!agreed.stop) agreed.stop = agree_after_step(world, false).stop;
    }
    // A stop asked for during the last step comes too late to stop anything:
    // the run has finished and writes --save.
    if (agreed.stop && trainer.next_step() < o.trainer.steps) return false;
  }
  divergence.check();  // the same steps on every rank: the same verdict
  return true;
}

// The last checkpoint, then --save (collective), or the note of a stop.
void finish(Communicator& world, model_zoo::Trainer& trainer, const TrainOptions& o,
            Checkpointer& checkpoints, bool completed, std::mutex& io) {
  const bool lead = world.rank() == 0;
  checkpoints.save();
  checkpoints.finish();
  if (!completed) {
    if (lead)
      std::printf("%szrt-train: stopped by a signal after step %lld of %lld%s\n",
                  rewrites_progress_line() ? "\n" : "", static_cast<long long>(trainer.next_step()),
                  static_cast<long long>(o.trainer.steps),
                  o.checkpoint_dir.empty() ? "" : "; continue with --resume");
    // --save holds the final weights: a stopped run has none to write.
    if (lead && !o.save.empty())
      std::printf(
          "zrt-train: --save %s was not written (the run did not finish)%s\n", o.save.c_str(),
          o.checkpoint_dir.empty() ? "; without --checkpoint-dir nothing of it is kept" : "");
    return;
  }
  if (o.save.empty()) return;
  // A chunk of a unit at a time, rank 0 writing (Note [Streamed saving]).
  const std::size_t n =
      optim::save_full_params(trainer.engine().module(), o.save, "--save " + o.save);
  if (!lead) return;
  std::lock_guard lock(io);
  std::printf("zrt-train: wrote %zu parameters to %s\n", n, o.save.c_str());
}

// One rank's run: agree across ranks, set up, train, finish.
void run(const CommPtr& world, const CommPtr& host, const TrainOptions& o, int local_rank,
         const model_zoo::Dataset* shared_data, std::mutex& io, SetupNotice& notice) {
  TrainerConfig config = trainer_config(o, local_rank);
  config.host_comm = host;  // a background save's agreements beside an NCCL world
  if (!o.trace.empty()) config.engine.zero.tracer = std::make_shared<Tracer>(world->rank());
  TraceStream trace(config.engine.zero.tracer, trace_path(o.trace, world->rank(), world->size()),
                    world->size(), [] { return stop_signals.requested(); });
  const bool lead = world->rank() == 0;
  // The lead's setup ends here however run() ends: a failed setup's error
  // follows no more lines of what it was doing.
  struct NoticeDone {
    SetupNotice& notice;
    bool lead;
    ~NoticeDone() {
      if (lead) notice.done();
    }
  } notice_done{notice, lead};
  if (lead) notice.phase("agreeing on the flags with every rank");
  check_flags_agree(*world, o);
  // One run per checkpoint directory (Note [Resuming never loses work]).
  std::optional<tools::RunLock> run_lock;
  all_or_none(*world, [&] {
    if (lead && !o.checkpoint_dir.empty())
      run_lock.emplace(o.checkpoint_dir, "--checkpoint-dir", "zrt-train");
  });
  if (!o.checkpoint_dir.empty()) check_checkpoint_dir_shared(*world, o.checkpoint_dir);
  if (lead)
    notice.phase("building the model on " + std::to_string(world->size()) + " rank(s)" +
                 (o.trainer.init_from.empty() ? ", drawing its weights"
                                              : ", reading --init-from " + o.trainer.init_from));
  model_zoo::Trainer trainer = make_trainer(world, o, config, shared_data);
  if (lead && o.resume) notice.phase("resuming from a checkpoint");
  const bool resumed = resume_if_asked(*world, trainer, o, io);
  Checkpointer checkpoints(trainer, o, lead, io);
  StepReporter reporter(o, lead, resumed, trainer.next_step(), world->size(), io);
  if (lead) {
    notice.done();
    std::lock_guard lock(io);
    // A preset whose dimensions flags changed says what it became.
    std::string dims;
    if (o.trainer.model.kind == "gpt") {
      const model_zoo::GptDims d = model_zoo::resolve_gpt_dims(config.model);
      dims = " (" + std::to_string(d.n_layer) + " layers, " + std::to_string(d.n_embd) + " wide, " +
             std::to_string(d.n_head) + " heads, vocab " + std::to_string(d.vocab_size) + ")";
    }
    std::printf("zrt-train: %s/%s%s, %d rank(s), strategy %s, dtype %s, device %s, %zu units\n",
                o.trainer.model.kind.c_str(), o.trainer.model.preset.c_str(), dims.c_str(),
                world->size(), optim::strategy_name(o.trainer.engine.zero.strategy),
                dtype_flag(o.trainer.engine.zero.dtype), config.engine.zero.device.str().c_str(),
                trainer.engine().handles().size());
    // A step's batch larger than the data set reads some of it twice (Note
    // [Data order]): legal, but rarely what was meant.
    const model_zoo::Dataset& data = trainer.data();
    const bool rows = data.kind == model_zoo::Dataset::Kind::rows;
    // Tokens: a step's B sequences of T, one apart, and one more target (Note [Data order]).
    const std::int64_t step_needs =
        rows ? config.batch_size : config.batch_size * config.seq_len + 1;
    if (data.size() < step_needs) {
      const std::string reads =
          "--batch-size " + std::to_string(config.batch_size) +
          (rows ? std::string() : " x --seq-len " + std::to_string(config.seq_len));
      std::fprintf(stderr,
                   "zrt-train: warning: the data set (%s) holds %lld %s, fewer than one step "
                   "reads (%s): every step reads some of them more than once\n",
                   o.data.empty() ? "embedded" : o.data.c_str(),
                   static_cast<long long>(data.size()), rows ? "rows" : "tokens", reads.c_str());
    }
    // A tail the data order never reaches, when it is not a negligible part
    // of the data (a small file, a --seq-len near its length).
    if (const std::int64_t tail =
            rows ? 0 : model_zoo::tail_never_a_target(config.seq_len, data.size());
        tail > 0 && tail * 100 >= data.size())
      std::fprintf(stderr,
                   "zrt-train: warning: the last %lld tokens of the data set (%s) are never a "
                   "target: --seq-len %lld and its %lld tokens share the factor %lld, so "
                   "sequences start only at its multiples; a --seq-len that shares no factor "
                   "with the token count reads every token\n",
                   static_cast<long long>(tail), o.data.empty() ? "embedded" : o.data.c_str(),
                   static_cast<long long>(config.seq_len), static_cast<long long>(data.size()),
                   static_cast<long long>(tail + 1));  // the factor: tail_never_a_target + 1
  }
  all_or_none(*world, [&] { trace.begin(); });  // one rank's unwritable file stops every rank
  const bool completed = train_steps(*world, trainer, o, checkpoints, reporter, trace);
  finish(*world, trainer, o, checkpoints, completed, io);
  trace.finish();
}

}  // namespace
}  // namespace zrt::train

int main(int argc, char** argv) {
  using namespace zrt;
  // A line at a time into a file or pipe too: a log of stdout and stderr
  // together keeps their order (the header before a later error).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  train::TrainOptions o;
  try {
    if (!train::parse_train_options(argc, argv, o)) return 0;
    tools::check_environment("zrt-train");  // Note [Environment variables]
    // Note [TF32 GEMMs]: read once, at the first GEMM, after this.
    if (o.tf32) ::setenv("ZRT_TF32", "1", 1);
  } catch (const std::exception& e) {
    tools::report_error("zrt-train", e);
    return 2;
  }
  std::mutex io;
  try {
    if (o.plan) {  // instead of training; one printout for a launched world; SIGTERM ends it
      if (detect_launch().rank != 0) return 0;
      return train::print_memory_plan(o, stdout) ? 0 : 3;
    }
    // Before any thread: Note [OpenBLAS loaded on first use].
    (void)kernels::cpu_gemm();
    tools::install_stop_handlers(train::on_stop_signal, train::on_broken_pipe);
    // Note [A slow start says so]: the lead process says what a long setup does.
    train::SetupNotice notice(stdout, io, o.ranks > 0 || detect_launch().rank == 0);
    const train::ModelSize size = train::model_size(o);
    train::check_memory_floor(o, size);
    notice.phase("checking that the run fits in memory (the dry steps of --plan)");
    train::check_plan_fits_memory(o);
    train::check_free_space(train::planned_outputs(o, size));
    // Note [One data set per process]: local ranks share one, read-only.
    std::optional<model_zoo::Dataset> shared_data;
    if (o.ranks > 0) {
      notice.phase("reading the data set" + (o.data.empty() ? std::string() : " " + o.data));
      shared_data = train::load_data(o, train::trainer_config(o, 0));
    }
    struct FlightDirCleanup {  // after the ranks, however they end
      const train::TrainOptions& options;
      ~FlightDirCleanup() { train::remove_process_flight_dir(options); }
    } flight_dir_cleanup{o};
    notice.phase("starting the ranks");
    train::run_ranks(
        o.ranks,
        [&](const CommPtr& world, int local_rank, const CommPtr& host) {
          train::forget_flight_record(o, world->rank());
          try {
            train::run(world, host, o, local_rank, shared_data ? &*shared_data : nullptr, io,
                       notice);
          } catch (const CommError& e) {
            // A peer may be stopped or gone: finalising MPI would wait for it
            // forever. The error, the flight recorder's report (Note [Flight
            // recorder]), then the whole job ends (Note [Ending after a
            // timeout]); a no-op outside an MPI launch.
            const bool ends_job = o.ranks == 0 && world->size() > 1 && mpi_job_running();
            train::job_ending = ends_job;
            if (ends_job) tools::report_error("zrt-train", e);
            train::report_flight(*world, o, io, ends_job);
            if (ends_job) abort_mpi_job(1);
            throw;
          }
        },
        o.threads, train::world_device(o), parse_world_transport(o.transport));
  } catch (const std::exception& e) {
    tools::report_error("zrt-train", e);
    if (const auto* oom = dynamic_cast<const OutOfMemory*>(&e))
      std::fprintf(stderr,
                   "zrt-train: hint: %sthe same flags with --plan --fit BYTES list the "
                   "strategies, recomputation and optimizer offload whose peak fits BYTES a rank\n",
                   oom->numbers().cap > 0 ? "a rank needs more than its --memory-limit; "
                   : oom->numbers().address_space_limit > 0
                       ? "raise the limit it names (thread stacks and malloc's arenas count "
                         "against it too, not only the memory used), or "
                       : "");
    return 1;
  }
  return 0;
}
