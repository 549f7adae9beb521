#include "zrt/runtime/comm/launch.h"

#include <cerrno>
#include <cstdlib>

#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/mpi_comm.h"
#include "zrt/runtime/comm/nccl_comm.h"
#include "zrt/runtime/comm/tcp_rendezvous.h"
#include "zrt/runtime/device.h"
#include "zrt/runtime/error.h"

namespace zrt {

const char* launcher_name(Launcher l) {
  switch (l) {
    case Launcher::single: return "single process";
    case Launcher::mpirun: return "mpirun";
    case Launcher::slurm: return "slurm";
    case Launcher::torchrun: return "torchrun";
  }
  return "?";
}

namespace {

int env_int(const EnvLookup& env, const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  ZRT_CHECK_ARG(errno == 0 && *end == '\0' && x >= 0 && x <= 1 << 24, "launch environment: ", name,
                "='", v, "' is not a non-negative integer");
  return static_cast<int>(x);
}

}  // namespace

LaunchInfo detect_launch(const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* n) { return std::getenv(n); });
  LaunchInfo info;
  if (env("OMPI_COMM_WORLD_SIZE")) {
    info.launcher = Launcher::mpirun;
    info.rank = env_int(env, "OMPI_COMM_WORLD_RANK", 0);
    info.size = env_int(env, "OMPI_COMM_WORLD_SIZE", 1);
    info.local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    info.local_size = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    info.launcher = Launcher::slurm;
    info.rank = env_int(env, "SLURM_PROCID", 0);
    info.size = env_int(env, "SLURM_NTASKS", 1);
    info.local_rank = env_int(env, "SLURM_LOCALID", 0);
    info.local_size = env_int(env, "SLURM_NTASKS_PER_NODE", 1);
  } else if (env("RANK") && env("WORLD_SIZE")) {
    info.launcher = Launcher::torchrun;
    info.rank = env_int(env, "RANK", 0);
    info.size = env_int(env, "WORLD_SIZE", 1);
    info.local_rank = env_int(env, "LOCAL_RANK", 0);
    info.local_size = env_int(env, "LOCAL_WORLD_SIZE", 1);
    if (const char* a = env("MASTER_ADDR")) info.master_addr = a;
    info.master_port = env_int(env, "MASTER_PORT", 0);
  }
  ZRT_CHECK_ARG(info.size >= 1 && info.rank < info.size, "launch environment (",
                launcher_name(info.launcher), "): rank ", info.rank, " is not in a world of size ",
                info.size);
  return info;
}

World init_world(std::chrono::milliseconds timeout) {
  World w;
  w.launch = detect_launch();
  w.local_rank = w.launch.local_rank;
  if (w.launch.size == 1) {
    w.comm = make_local_world(1, timeout)[0];
  } else if (w.launch.launcher == Launcher::torchrun) {
#ifdef ZRT_WITH_NCCL
    // No MPI here: a TCP rendezvous on MASTER_ADDR:MASTER_PORT shares the
    // NCCL unique id, and the world is NCCL on the local rank's device.
    ZRT_CHECK_ARG(w.launch.master_port > 0, "init_world: a torchrun-style launch of ",
                  w.launch.size, " ranks needs MASTER_PORT (and MASTER_ADDR)");
    TcpRendezvous rendezvous(w.launch.master_addr, w.launch.master_port, w.launch.rank,
                             w.launch.size, timeout);
    // The rank's device is current before NCCL starts: a CudaDeviceGuard that
    // had to change it would set device 0 back afterwards, which makes a
    // CUDA context on GPU 0 in every rank's process.
    const int device = device_for_local_rank(w.launch.local_rank, cuda_device_count());
    set_current_device(Device::cuda(device));
    w.comm = make_nccl_communicator(
        [&](std::span<const std::byte> mine) { return rendezvous.all_gather_bytes(mine); },
        w.launch.rank, w.launch.size, device, timeout, "world");
#else
    ZRT_THROW(InvalidState, "init_world: a torchrun-style launch of ", w.launch.size,
              " ranks needs a zrt built with CUDA and NCCL (its world is NCCL, bootstrapped over "
              "TCP on MASTER_ADDR:MASTER_PORT); this build has no NCCL: launch with mpirun or "
              "srun instead");
#endif
  } else {
    w.comm = make_mpi_world("world");
    w.comm->set_timeout(timeout);
    ZRT_CHECK_STATE(w.comm->size() == w.launch.size && w.comm->rank() == w.launch.rank,
                    "init_world: MPI says rank ", w.comm->rank(), " of ", w.comm->size(), " but ",
                    launcher_name(w.launch.launcher), " says rank ", w.launch.rank, " of ",
                    w.launch.size);
  }
  return w;
}

}  // namespace zrt
