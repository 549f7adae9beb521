// CUDA tensors through every backend: NCCL (a world of one GPU, its splits
// and the ZeRO groups made by splitting it), the local backend (2-4, 17 and
// 33 ranks sharing one GPU) and MPI (a singleton world, staged through host
// memory, in builds with MPI).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "tests/runtime/comm/collective_checks.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/mpi_comm.h"
#include "zrt/runtime/comm/nccl_comm.h"

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

// Note [Device reductions in batches]: more local ranks than one launch of
// the reduction reads (17: two launches, 33: three), the in-place
// reduce_scatter of the ranks past the first launch's included. Sums of
// inputs in [1, 11] stay exact in these dtypes.
BOOST_AUTO_TEST_CASE(more_local_ranks_than_one_reduction_launch_reads) {
  for (int n : {17, 33})
    BOOST_CHECK_NO_THROW(run_local_ranks(n, [](const CommPtr& c) {
      for (DType dtype : {DType::f32, DType::f64, DType::i32})
        test::check_all_collectives(*c, dtype, 5, 11, Device::cuda(0));
    }));
}

// Note [Local collectives on the device]: a rank that drops its group right
// after a collective leaves its events to the ranks still waiting on them
// (the group owns them). Ranks leave at different times; a use after free
// shows under compute-sanitizer or as a CUDA error here.
BOOST_AUTO_TEST_CASE(ranks_drop_split_groups_at_different_times) {
  BOOST_CHECK_NO_THROW(run_local_ranks(4, [](const CommPtr& c) {
    constexpr std::int64_t kNumel = 1 << 12;
    OwnedStream s(Device::cuda(0));
    Tensor t = Tensor::full({kNumel}, 1.0, DType::f32, Device::cuda(0));
    Tensor half = Tensor::full({kNumel / 2}, 0.0, DType::f32, Device::cuda(0));
    for (int i = 0; i < 20; ++i) {
      std::unique_ptr<Communicator> g = c->split(c->rank() % 2, c->rank());
      g->all_reduce(t, ReduceOp::max, s);
      g->reduce_scatter_tensor(half, t, ReduceOp::avg, s);  // of ones: one
      if (c->rank() >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(i % 3));
      g.reset();  // with work still queued on `s`
      s.get().synchronize();
    }
    // Boost.Test is not thread-safe: a rank throws, run_local_ranks rethrows.
    if (half.item(0) != 1.0 || half.item(kNumel / 2 - 1) != 1.0)
      throw std::runtime_error("the max and average of ones are not one");
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
