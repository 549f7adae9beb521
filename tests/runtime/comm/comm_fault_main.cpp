// A rank fails while the others enter a collective: the job must end
// promptly with a non-zero status and a clear message, never hang.
//   comm_fault                       the last rank dies (std::_Exit) before
//                                    an all-reduce (check_fault.cmake)
//   comm_fault stopped-all-reduce    rank 1 stops (SIGSTOP) inside an
//   comm_fault stopped-split         all-reduce above 1 MiB, or a split,
//                                    once its contract went out: the others
//                                    are past the contracts' exchange, in a
//                                    blocking MPI call (Note [Blocking MPI
//                                    calls]; check_stopped.cmake)
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/comm/mpi_comm.h"

namespace {

int stopped_rank(zrt::World& w, const std::string& mode) {
  using namespace std::chrono_literals;
  w.comm->barrier();
  // Rank 1 enters first and stops while it waits for the others' contracts;
  // its own went out when it entered, so theirs completes the exchange.
  if (w.comm->rank() == 1)
    std::thread([] {
      std::this_thread::sleep_for(500ms);
      std::raise(SIGSTOP);
    }).detach();
  else
    std::this_thread::sleep_for(1500ms);
  const auto began = std::chrono::steady_clock::now();
  try {
    if (mode == "stopped-all-reduce") {
      zrt::Tensor t = zrt::Tensor::full({(1 << 18) + 3}, 1.0, zrt::DType::f32);  // > 1 MiB
      w.comm->all_reduce(t, zrt::ReduceOp::sum);
    } else {
      w.comm->split(0, w.comm->rank(), "child");
    }
    // Ending the job, mpirun wakes the stopped rank (SIGCONT before SIGTERM),
    // so the call may still complete then, past the guard's report window.
    // Only a return before the collective timeout means rank 1 never stopped.
    const auto took = std::chrono::steady_clock::now() - began;
    std::fprintf(
        stderr, "rank %d: %s returned %s after %lld ms\n", w.comm->rank(), mode.c_str(),
        took < 2s ? "without the stopped rank" : "once the job's end woke the stopped rank",
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  } catch (const zrt::CommError& e) {
    std::fprintf(stderr, "rank %d: %s\n", w.comm->rank(), e.what());
  }
  std::fflush(stderr);
  zrt::abort_mpi_job(2);  // the stopped rank never finalises
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  zrt::World w = zrt::init_world();
  const std::string mode = argc > 1 ? argv[1] : "dead";
  if (mode != "dead") return stopped_rank(w, mode);
  w.comm->barrier();
  if (w.comm->rank() == w.comm->size() - 1) std::_Exit(3);
  zrt::Tensor t = zrt::Tensor::full({16}, 1.0, zrt::DType::f32);
  try {
    w.comm->all_reduce(t, zrt::ReduceOp::sum);
    std::fprintf(stderr, "rank %d: all_reduce returned without the dead rank\n", w.comm->rank());
  } catch (const zrt::CommError& e) {
    std::fprintf(stderr, "rank %d: %s\n", w.comm->rank(), e.what());
  }
  std::fflush(stderr);
  std::_Exit(2);  // MPI_Finalize would wait for the dead rank
}
