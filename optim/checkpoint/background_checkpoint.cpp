#include "zrt/optim/checkpoint/background_checkpoint.h"

#include <cstdio>
#include <exception>
#include <system_error>
#include <thread>
#include <utility>

#include "zrt/optim/checkpoint/checkpoint_writer.h"
#include "zrt/runtime/device.h"

namespace zrt::optim {

namespace {

// The saver's own communicator for its agreements, on the host (Note
// [Checkpoints saved in the background]).
std::unique_ptr<Communicator> agreement_comm(Communicator& world, Communicator* host) {
  if (!host) {
    ZRT_CHECK_ARG(world.keeps_to_host(), "checkpoints saved in the background beside world '",
                  world.name(), "' (", world.backend_name(),
                  ": device tensors only) need a host communicator for their agreements, or may "
                  "deadlock the GPU: "
                  "launch with mpirun or srun (their MPI world serves), or save synchronously (no "
                  "--checkpoint-async)");
    host = &world;
  }
  ZRT_CHECK_ARG(host->keeps_to_host(),
                "checkpoints saved in the background: the host communicator '", host->name(), "' (",
                host->backend_name(), ") takes device tensors only");
  ZRT_CHECK_ARG(host->size() == world.size() && host->rank() == world.rank(),
                "checkpoints saved in the background: ", "the host communicator '", host->name(),
                "' has rank ", host->rank(), " of ", host->size(), " but the world has rank ",
                world.rank(), " of ", world.size());
  return host->split(0, world.rank(), world.name() + "/checkpoint");
}

}  // namespace

BackgroundCheckpointSaver::BackgroundCheckpointSaver(ZeroModule& module, Communicator* host)
    : module_(module), comm_(agreement_comm(*module.world(), host)) {
  // A writer waiting for a slow rank is not where training is stuck (Note [Flight recorder]).
  comm_->use_own_flight_recorder();
  comm_->set_phase_timer(nullptr);  // the writer's agreements are no step's communication
  comm_->count_own_traffic();       // nor its traffic (Note [Bytes on the link])
  module_.set_background_save_wait([this] { wait(); });
  module_alive_ = module_.lifetime();
}

BackgroundCheckpointSaver::~BackgroundCheckpointSaver() {
  // Note [Checkpoints wait for the save in flight]; the module must
  // outlive the saver, but one destroyed first is not touched.
  if (!module_alive_.expired()) module_.set_background_save_wait({});
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "zrt: a checkpoint saved in the background failed and nobody waited for it: %s\n",
                 e.what());
  }
}

std::string BackgroundCheckpointSaver::save(std::int64_t next_step,
                                            const CheckpointSaveOptions& options) {
  wait();
  snapshot_ = take_snapshot(module_, next_step, options, &staging_);
  result_.clear();
  error_ = nullptr;
  try {
    worker_ = std::thread([this, device = module_.options().device] {
      try {
        // A new thread's current device is 0: the rank's is made current
        // before any CUDA call, or a device guard would make a context on GPU 0.
        set_current_device(device);
        result_ = write_snapshot(*comm_, snapshot_);
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  } catch (const std::system_error& e) {
    ZRT_THROW(ResourceError,
              "a background checkpoint save: the system refused its writer's thread (", e.what(),
              "): raise the process's thread or memory limit (ulimit -u, ulimit -v), or save "
              "synchronously (zrt-train: without --checkpoint-async)");
  }
  return step_dir(options.root, next_step);
}

std::string BackgroundCheckpointSaver::wait() {
  if (!worker_.joinable()) return {};
  // A before_write that saves or loads this module would join its own thread.
  ZRT_CHECK_CALL(std::this_thread::get_id() != worker_.get_id(),
                 "a checkpoint of this module was saved or loaded from the background save's "
                 "own before_write, which runs on the writer's thread; save and load from the "
                 "training thread");
  worker_.join();
  snapshot_.tensors.clear();  // the staging buffers stay with staging_
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return result_;
}

}  // namespace zrt::optim
