// Note [Flight recorder] under mpirun: rank 1 skips the second collective, an
// all-gather (`skip`), or reaches it late (`stall`); every rank writes its ring into DIR
// when it fails (or, rank 1 skipping, when it is done), rank 0 prints the
// report. No rank ends before rank 0 has printed it (an exit without
// MPI_Finalize makes mpirun stop the others); check_flight.cmake checks it.
// The late rank times out too: an all-gather's data moves non-blocking,
// whereas an all-reduce's late rank may pass the contract exchange its peers
// gave up on and block in MPI_Allreduce (Note [Entry barrier]).
// usage: flight_fault DIR skip|stall
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "zrt/runtime/comm/launched_world.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string dir = argv[1], mode = argv[2];
  zrt::World w = zrt::init_world(std::chrono::seconds(2));
  const int rank = w.comm->rank();
  zrt::Tensor t = zrt::Tensor::full({16}, 1.0, zrt::DType::f32);
  zrt::Tensor all = zrt::Tensor::zeros({16 * w.comm->size()}, zrt::DType::f32);
  try {
    w.comm->all_reduce(t, zrt::ReduceOp::sum);
    if (rank == 1 && mode == "skip")
      throw zrt::CommError("skipped");  // done: its record, as the others'
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
    w.comm->all_gather_into_tensor(all, t);
    std::fprintf(stderr, "rank %d: the second collective returned\n", rank);
  } catch (const zrt::CommError& e) {
    w.comm->flight_recorder()->write(dir);
  }
  const std::string done = dir + "/report-printed";
  if (rank == 0) {
    std::printf("report: %s\n",
                zrt::flight_report(dir, w.comm->size(), std::chrono::seconds(8)).c_str());
    std::fflush(nullptr);
    std::ofstream(done) << "done\n";
  } else {
    for (int i = 0; i < 300 && !std::filesystem::exists(done); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fflush(nullptr);
  std::_Exit(0);  // MPI_Finalize would wait for collectives that never completed
}
