// Main for `gpu` suites: exits 77 (registered as SKIP_RETURN_CODE) and says why
// when this build or machine has no usable CUDA device.
#define BOOST_TEST_MODULE zrt_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>
#include <cstdio>

#include "zrt/runtime/device.h"

int main([[maybe_unused]] int argc, [[maybe_unused]] char* argv[]) {
#ifndef ZRT_WITH_CUDA
  std::puts("SKIP: this build of zrt has no CUDA support (configure with ZRT_CUDA=ON)");
  return 77;
#else
  if (!zrt::cuda_available()) {
    std::puts("SKIP: no usable CUDA device on this machine");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
#endif
}
