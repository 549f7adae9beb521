// The world from the launch environment: mpirun (OMPI_COMM_WORLD_*), Slurm
// (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID), torchrun-style (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or a single process.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "zrt/runtime/comm/communicator.h"

namespace zrt {

enum class Launcher { single, mpirun, slurm, torchrun };
const char* launcher_name(Launcher l);

struct LaunchInfo {
  Launcher launcher = Launcher::single;
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // picks the GPU: device_for_local_rank
  int local_size = 1;  // ranks on this host (they share its cores)
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
};

// The world communicator for this process: a size-1 world whose collectives
// are copies for a single process, the MPI world under mpirun or Slurm (MPI
// is initialised if needed). A torchrun-style launch of more than one rank
// gets an NCCL world on device_for_local_rank(LOCAL_RANK) (CUDA tensors only), bootstrapped by
// a TcpRendezvous on MASTER_ADDR:MASTER_PORT; in a build without NCCL it
// throws InvalidState saying to use mpirun or srun.
World init_world(std::chrono::milliseconds timeout = default_comm_timeout());

// The one rule for a rank's GPU: local rank modulo the devices present (so
// several ranks may share one), 0 when there are none.
constexpr int device_for_local_rank(int local_rank, int device_count) {
  return device_count > 0 ? local_rank % device_count : 0;
}

}  // namespace zrt
