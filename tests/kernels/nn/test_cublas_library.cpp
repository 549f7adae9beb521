// cuBLAS loaded on first use (Note [cuBLAS loaded on first use]), in a CUDA
// build on any machine (no GPU needed): the process starts without either
// library mapped and the first call maps both; a library that cannot be
// found, or lacks a function, is an error naming it and what to do, without
// a source location.
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <iterator>
#include <string>

#include "zrt/kernels/nn/cublas_library.cuh"
#include "zrt/runtime/error.h"

using namespace zrt;
using namespace zrt::kernels::cuda;

namespace {

std::string mapped_files() {
  std::ifstream maps("/proc/self/maps");
  return {std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>()};
}

std::string load_error(const CublasSonames& names) {
  try {
    load_cublas(names);
  } catch (const ResourceError& e) {
    return e.what();
  }
  BOOST_FAIL("load_cublas(" << names.cublas << ", " << names.cublas_lt << ") did not throw");
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cublas_library)

// First in this program: nothing before it has made a cuBLAS call.
BOOST_AUTO_TEST_CASE(the_first_call_loads_cublas_and_not_the_start) {
  const CublasSonames names = cublas_sonames();
  BOOST_TEST_MESSAGE("sonames " << names.cublas << ", " << names.cublas_lt << "; toolkit "
                                << names.toolkit_dir);
  BOOST_TEST(mapped_files().find("libcublas") == std::string::npos,
             "cuBLAS is mapped before the first call");
  const CublasLibrary& library = cublas();
  BOOST_TEST(&library == &cublas());
  const std::string maps = mapped_files();
  BOOST_TEST(maps.find(std::string("/") + names.cublas) != std::string::npos);
  BOOST_TEST(maps.find(std::string("/") + names.cublas_lt) != std::string::npos);
  BOOST_TEST(std::string(library.status_name(CUBLAS_STATUS_NOT_SUPPORTED)) ==
             "CUBLAS_STATUS_NOT_SUPPORTED");
  BOOST_TEST((library.gemm_ex && library.gemm_strided_batched_ex && library.lt_matmul &&
              library.lt_matmul_algo_get_heuristic && library.destroy && library.lt_destroy));
}

BOOST_AUTO_TEST_CASE(a_missing_library_is_named) {
  const std::string what =
      load_error({"libcublas.so.0-not-here", "libcublasLt.so.0-not-here", "/no/toolkit"});
  BOOST_TEST_MESSAGE(what);
  BOOST_TEST(what.find("cannot load libcublasLt.so.0-not-here") != std::string::npos);
  BOOST_TEST(what.find("LD_LIBRARY_PATH") != std::string::npos);
  BOOST_TEST(what.find("/no/toolkit") != std::string::npos);
  BOOST_TEST(what.find(".cu") == std::string::npos, "a source location in: " << what);
}

BOOST_AUTO_TEST_CASE(a_library_without_a_function_is_named) {
  // libm loads, and has no cublasCreate_v2.
  const CublasSonames real = cublas_sonames();
  const std::string what = load_error({"libm.so.6", real.cublas_lt, real.toolkit_dir});
  BOOST_TEST_MESSAGE(what);
  BOOST_TEST(what.find("libm.so.6 has no function cublasCreate_v2") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
