#include "zrt/runtime/comm/launched_world.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/mpi_comm.h"
#include "zrt/runtime/comm/nccl_comm.h"
#include "zrt/runtime/comm/tcp_rendezvous.h"
#include "zrt/runtime/device.h"
#include "zrt/runtime/error.h"

namespace zrt {

const char* launcher_name(Launcher l) {
  switch (l) {
    case Launcher::single:
      return "single process";
    case Launcher::mpirun:
      return "mpirun";
    case Launcher::slurm:
      return "slurm";
    case Launcher::torchrun:
      return "torchrun";
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
                "='", v, "' is not a whole number from 0 to ", 1 << 24);
  return static_cast<int>(x);
}

// Where each launcher puts a process's place in the world: it is that
// launcher's when `detect` is set (and `also`, where named).
struct LauncherEnv {
  Launcher launcher;
  const char *detect, *also, *rank, *size, *local_rank, *local_size;
};

constexpr LauncherEnv kLauncherEnvs[] = {
    {Launcher::mpirun, "OMPI_COMM_WORLD_SIZE", nullptr, "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::slurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_NTASKS",
     "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {Launcher::torchrun, "RANK", "WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
     "LOCAL_WORLD_SIZE"},
};

}  // namespace

LaunchInfo detect_launch(const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* n) { return std::getenv(n); });
  LaunchInfo info;
  for (const LauncherEnv& l : kLauncherEnvs) {
    if (!env(l.detect) || (l.also && !env(l.also))) continue;
    info.launcher = l.launcher;
    info.rank = env_int(env, l.rank, 0);
    info.size = env_int(env, l.size, 1);
    info.local_rank = env_int(env, l.local_rank, 0);
    info.local_size = env_int(env, l.local_size, 1);
    break;
  }
  // Half of torchrun's pair would train N separate one-rank runs in silence.
  // (Both set is torchrun's launch, detected above; RANK=0 or WORLD_SIZE=1
  // alone is one process.)
  if (info.launcher == Launcher::single) {
    auto set_beyond = [&](const char* name, const char* one) {
      const char* v = env(name);
      return v != nullptr && *v != '\0' && std::strcmp(v, one) != 0;
    };
    const bool ranked = set_beyond("RANK", "0"), sized = set_beyond("WORLD_SIZE", "1");
    ZRT_CHECK_ARG(!(ranked || sized), "launch environment: ", ranked ? "RANK" : "WORLD_SIZE", "='",
                  env(ranked ? "RANK" : "WORLD_SIZE"), "' is set but ",
                  ranked ? "WORLD_SIZE" : "RANK",
                  " is not: a torchrun-style launch sets RANK, WORLD_SIZE, MASTER_ADDR and "
                  "MASTER_PORT (unset RANK and WORLD_SIZE for one process)");
  }
  if (info.launcher == Launcher::torchrun) {
    if (const char* a = env("MASTER_ADDR")) info.master_addr = a;
    info.master_port = env_int(env, "MASTER_PORT", 0);
  }
  ZRT_CHECK_ARG(info.size >= 1 && info.rank < info.size, "launch environment (",
                launcher_name(info.launcher), "): rank ", info.rank, " is not in a world of size ",
                info.size);
  return info;
}

const char* world_transport_name(WorldTransport t) {
  switch (t) {
    case WorldTransport::automatic:
      return "auto";
    case WorldTransport::mpi:
      return "mpi";
    case WorldTransport::nccl:
      return "nccl";
  }
  return "?";
}

WorldTransport parse_world_transport(const std::string& s) {
  for (WorldTransport t : {WorldTransport::automatic, WorldTransport::mpi, WorldTransport::nccl})
    if (s == world_transport_name(t)) return t;
  ZRT_THROW(InvalidArgument, "world transport '", s, "' is not one of auto, mpi, nccl");
}

bool world_uses_nccl(const LaunchInfo& launch, Device device, WorldTransport transport,
                     bool nccl_built) {
  if (launch.size == 1) return false;
  const bool torchrun = launch.launcher == Launcher::torchrun;
  ZRT_CHECK_ARG(!(torchrun && transport == WorldTransport::mpi),
                "the mpi transport needs mpirun or srun; a ",
                "torchrun-style launch has no MPI (its world is NCCL, bootstrapped over TCP)");
  // Refused here, before any rendezvous, not at the first collective.
  ZRT_CHECK_ARG(!(torchrun && device.is_cpu()), "a torchrun-style launch of ", launch.size,
                " ranks has an NCCL world (bootstrapped over TCP), which moves CUDA tensors only; "
                "cpu ranks launch with mpirun or srun (MPI)");
  ZRT_CHECK_ARG(!(transport == WorldTransport::nccl && device.is_cpu()),
                "the nccl transport moves CUDA tensors ", "only; cpu tensors use mpi (or auto)");
  const bool nccl = torchrun || transport == WorldTransport::nccl ||
                    (transport == WorldTransport::automatic && device.is_cuda() && nccl_built);
  // What the build lacks is the user's to change (another build, another
  // launcher), as with a CUDA device asked of a build without CUDA.
  ZRT_CHECK_ARG(
      !nccl || nccl_built, "a ", launcher_name(launch.launcher), " launch of ", launch.size,
      " ranks ",
      torchrun ? "(its world is NCCL, bootstrapped over TCP on MASTER_ADDR:MASTER_PORT) "
               : "with the nccl transport ",
      "needs a zrt built with CUDA and NCCL; this build has none",
      torchrun ? ": launch with mpirun or srun instead" : ": use --transport mpi or auto");
  return nccl;
}

namespace {

// NCCL on the local rank's GPU, its unique id shared by `all_gather_bytes`.
CommPtr nccl_world(const World& w, const BytesAllGather& all_gather_bytes,
                   std::chrono::milliseconds timeout) {
#ifdef ZRT_WITH_NCCL
  // The rank's device is current before NCCL starts: a CudaDeviceGuard that
  // had to change it would set device 0 back afterwards, which makes a
  // CUDA context on GPU 0 in every rank's process.
  const int device = device_for_local_rank(w.launch.local_rank, cuda_device_count());
  set_current_device(Device::cuda(device));
  return make_nccl_communicator(all_gather_bytes, w.launch.rank, w.launch.size, device, timeout,
                                "world");
#else
  (void)w, (void)all_gather_bytes, (void)timeout;
  ZRT_THROW(InvalidArgument, "this build of zrt has no NCCL: launch with mpirun or srun");
#endif
}

}  // namespace

World init_world(std::chrono::milliseconds timeout, std::optional<Device> device,
                 WorldTransport transport) {
  World w;
  w.launch = detect_launch();
  w.local_rank = w.launch.local_rank;
#ifdef ZRT_WITH_NCCL
  constexpr bool nccl_built = true;
#else
  constexpr bool nccl_built = false;
#endif
  if (w.launch.size == 1) {
    w.comm = make_local_world(1, timeout)[0];
    return w;
  }
  // A torchrun-style world is NCCL whatever the device; only a cpu device
  // said so is refused.
  const bool torchrun = w.launch.launcher == Launcher::torchrun;
  const Device tensors = device.value_or(torchrun ? Device::cuda(0) : Device::cpu());
  const bool nccl = world_uses_nccl(w.launch, tensors, transport, nccl_built);
  if (torchrun) {
    // No MPI here: a TCP rendezvous on MASTER_ADDR:MASTER_PORT shares the
    // NCCL unique id, and the world is NCCL on the local rank's device.
    ZRT_CHECK_ARG(w.launch.master_port > 0, "init_world: a torchrun-style launch of ",
                  w.launch.size, " ranks needs MASTER_PORT (and MASTER_ADDR)");
    // Said before any rendezvous, not as the CUDA error of the first device call.
    ZRT_CHECK_ARG(cuda_device_count() > 0, "a torchrun-style launch of ", w.launch.size,
                  " ranks (RANK, WORLD_SIZE, MASTER_ADDR set) has an NCCL world on the GPUs, "
                  "but no CUDA device is usable here: cpu ranks launch with mpirun or srun (MPI)");
    TcpRendezvous rendezvous(w.launch.master_addr, w.launch.master_port, w.launch.rank,
                             w.launch.size, timeout);
    w.comm = nccl_world(
        w, [&](std::span<const std::byte> mine) { return rendezvous.all_gather_bytes(mine); },
        timeout);
    return w;
  }
  CommPtr mpi = make_mpi_world(nccl ? "bootstrap" : "world");
  mpi->set_timeout(timeout);
  // A launcher of another MPI, or its variables left in the environment.
  ZRT_CHECK_AS(CommError, mpi->size() == w.launch.size && mpi->rank() == w.launch.rank,
               "the MPI library zrt was built with sees rank ", mpi->rank(), " of ", mpi->size(),
               ", but the environment of ", launcher_name(w.launch.launcher), " says rank ",
               w.launch.rank, " of ", w.launch.size,
               ": launch with the mpirun of the same MPI (or unset its variables)");
  if (!nccl) {
    w.comm = mpi;
    return w;
  }
  // MPI shares NCCL's unique id; CUDA tensors then move over NCCL.
  w.comm = nccl_world(
      w, [&](std::span<const std::byte> mine) { return mpi->all_gather_bytes(mine); }, timeout);
  w.bootstrap = std::move(mpi);
  return w;
}

}  // namespace zrt
