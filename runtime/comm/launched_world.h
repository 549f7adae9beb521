// The world from the launch environment: mpirun (OMPI_COMM_WORLD_*), Slurm
// (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID), torchrun-style (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or a single process.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "zrt/runtime/comm/communicator.h"

namespace zrt {

enum class Launcher { single, mpirun, slurm, torchrun };
const char* launcher_name(Launcher l);

struct LaunchInfo {
  Launcher launcher = Launcher::single;
  int rank = 0;
  int size = 1;
  int local_rank = 0;       // picks the GPU: device_for_local_rank
  int local_size = 1;       // ranks on this host (they share its cores)
  std::string master_addr;  // torchrun only
  int master_port = 0;      // torchrun only
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads the launch variables (first match: mpirun, Slurm, torchrun, else a
// single process). Throws InvalidArgument naming a variable that is not an
// integer or a rank outside [0, size). `env` defaults to std::getenv.
LaunchInfo detect_launch(const EnvLookup& env = {});

struct World {
  CommPtr comm;
  int local_rank = 0;
  LaunchInfo launch;
  CommPtr bootstrap;  // the MPI world an NCCL world was bootstrapped over, kept for the run
};

// What carries a launched world's collectives.
//  - automatic: NCCL when the world's tensors are on CUDA and this build has
//    NCCL (under mpirun and srun MPI only shares NCCL's id), else MPI; a
//    torchrun-style launch is always NCCL (bootstrapped over TCP).
//  - mpi: MPI, CUDA tensors staged through host memory (mpirun, srun).
//  - nccl: NCCL, or an InvalidArgument saying why it cannot be.
enum class WorldTransport { automatic, mpi, nccl };
const char* world_transport_name(WorldTransport t);
WorldTransport parse_world_transport(const std::string& s);  // InvalidArgument naming the choices

// Whether a launch of more than one rank gets an NCCL world for tensors on
// `device`; InvalidArgument naming the conflict (NCCL for cpu tensors, a
// torchrun-style launch with MPI or cpu tensors, NCCL in a build without it).
bool world_uses_nccl(const LaunchInfo& launch, Device device, WorldTransport transport,
                     bool nccl_built);

// The world communicator for this process: a size-1 world whose collectives
// are copies for a single process; for more ranks the transport
// world_uses_nccl picks: NCCL on device_for_local_rank(local rank) (CUDA
// tensors only), bootstrapped by MPI under mpirun or Slurm and by a
// TcpRendezvous on MASTER_ADDR:MASTER_PORT under torchrun, or the MPI world
// (MPI is initialised if needed). `device`: where the world's tensors live;
// unsaid, the transport is chosen as for cpu tensors, except that a
// torchrun-style launch (NCCL only) is not refused for them.
World init_world(std::chrono::milliseconds timeout = default_comm_timeout(),
                 std::optional<Device> device = std::nullopt,
                 WorldTransport transport = WorldTransport::automatic);

// The one rule for a rank's GPU: local rank modulo the devices present (so
// several ranks may share one), 0 when there are none.
constexpr int device_for_local_rank(int local_rank, int device_count) {
  return device_count > 0 ? local_rank % device_count : 0;
}

}  // namespace zrt
