#include <boost/test/unit_test.hpp>
#include <string>

#include "zrt/runtime/error.h"

using namespace zrt;

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(check_macro_captures_expression_file_line) {
  int n = 3;
  try {
    ZRT_CHECK_ARG(n == 4, "n is ", n);
    BOOST_FAIL("no throw");
  } catch (const InvalidArgument& e) {
    std::string w = e.what();
    BOOST_TEST(w.find("n is 3") != std::string::npos);
    BOOST_TEST(w.find("n == 4") != std::string::npos);
    BOOST_TEST(w.find("test_errors.cpp") != std::string::npos);
    BOOST_TEST(e.line() > 0);
  }
}

BOOST_AUTO_TEST_CASE(hierarchy) {
  BOOST_CHECK_THROW(ZRT_THROW(NcclError, "x"), CommError);
  BOOST_CHECK_THROW(ZRT_THROW(MpiError, "x"), CommError);
  BOOST_CHECK_THROW(ZRT_THROW(CublasError, "x"), CudaError);
  BOOST_CHECK_THROW(ZRT_CHECK_STATE(false, "s"), InvalidState);
  BOOST_CHECK_THROW(ZRT_THROW(CheckpointError, "x"), Error);
  OutOfMemory oom("oom", {.requested = 10, .allocated = 20, .reserved = 30, .free = 1, .cap = 40});
  BOOST_TEST(oom.numbers().cap == 40u);
  BOOST_TEST(oom.numbers().requested == 10u);
}

BOOST_AUTO_TEST_SUITE_END()
