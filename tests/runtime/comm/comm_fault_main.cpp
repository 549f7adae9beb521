// A rank dies (std::_Exit) while the others enter a collective: the job must
// end promptly with a non-zero status and a clear message, never hang.
// Registered through check_fault.cmake, which asserts exactly that.
#include <cstdio>
#include <cstdlib>

#include "zrt/runtime/comm/launched_world.h"

int main() {
  zrt::World w = zrt::init_world();
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
