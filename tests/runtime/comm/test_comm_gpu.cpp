// CUDA tensors through every backend: NCCL (a world of one GPU, its splits
// and the ZeRO groups made by splitting it), the local
// backend (2-4 ranks sharing one GPU) and MPI (a singleton world, staged
// through host memory, in builds with MPI).
#include <boost/test/unit_test.hpp>

#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/mpi_comm.h"
#include "zrt/runtime/comm/nccl_comm.h"
#include "tests/runtime/comm/collective_checks.h"

using namespace zrt;

BOOST_AUTO_TEST_SUITE(comm_gpu)

BOOST_AUTO_TEST_CASE(nccl_world_of_one) {
#ifdef ZRT_WITH_NCCL
  CommPtr boot = make_local_world(1)[0];
  CommPtr nccl = make_nccl_communicator(*boot, 0);
  BOOST_CHECK_EQUAL(nccl->size(), 1);
  for (DType dtype : kAllDTypes)
    for (std::int64_t n : {0, 1, 7})
      BOOST_CHECK_NO_THROW(test::check_all_collectives(*nccl, dtype, n, 5, Device::cuda(0)));
  BOOST_CHECK_NO_THROW(test::check_all_gather_bytes(*nccl, 5));
  // Note [Non-blocking communicator creation]: each split waits for its
  // child, and the parent takes collectives again after it.
  BOOST_CHECK_NO_THROW(test::check_split(*nccl, 5, Device::cuda(0)));
  BOOST_CHECK_NO_THROW(test::check_zero_groups(nccl, 1, 6, Device::cuda(0)));
  nccl->barrier();
  // The NCCL backend moves CUDA tensors only.
  Tensor cpu = Tensor::full({3}, 1.0, DType::f32);
  BOOST_CHECK_THROW(nccl->all_reduce(cpu, ReduceOp::sum), InvalidArgument);
#else
  BOOST_TEST_MESSAGE("no NCCL in this build (-DZRT_NCCL=OFF)");
#endif
}

BOOST_AUTO_TEST_CASE(local_ranks_on_one_gpu) {
  for (int n = 2; n <= 4; ++n)
    BOOST_CHECK_NO_THROW(run_local_ranks(n, [](const CommPtr& c) {
      for (DType dtype : kAllDTypes) test::check_all_collectives(*c, dtype, 7, 9, Device::cuda(0));
    }));
}

#ifdef ZRT_WITH_MPI
BOOST_AUTO_TEST_CASE(mpi_with_cuda_tensors) {
  CommPtr world = make_mpi_world();
  for (DType dtype : kAllDTypes)
    BOOST_CHECK_NO_THROW(test::check_all_collectives(*world, dtype, 7, 3, Device::cuda(0)));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
