#include <boost/test/unit_test.hpp>
#include <string>

#include "zrt/runtime/error.h"

using namespace zrt;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(errors)

// Note [User errors and internal errors]: a user error's message is the
// problem in the user's words; the check's expression, file and line stay in
// the object.
BOOST_AUTO_TEST_CASE(user_error_keeps_its_location_out_of_the_message) {
  int n = 3;
  try {
    ZRT_CHECK_ARG(n == 4, "n is ", n);
    BOOST_FAIL("no throw");
  } catch (const InvalidArgument& e) {
    BOOST_TEST(std::string(e.what()) == "n is 3");
    BOOST_TEST(std::string(e.expr()) == "n == 4");
    BOOST_TEST(has(e.file(), "test_errors.cpp"));
    BOOST_TEST(e.line() > 0);
    BOOST_TEST(has(e.where(), "check `n == 4` failed at "));
    BOOST_TEST(has(e.where(), "test_errors.cpp:" + std::to_string(e.line())));
  }
  try {
    ZRT_THROW(CheckpointError, "step-000010: missing");
  } catch (const UserError& e) {
    BOOST_TEST(std::string(e.what()) == "step-000010: missing");
    BOOST_TEST(has(e.where(), "at "));
    BOOST_TEST(!has(e.where(), "check `"));
  }
}

// A call out of order is the caller's to mend: an InvalidState in its
// terms, the location kept in the object only.
BOOST_AUTO_TEST_CASE(a_call_out_of_order_keeps_its_location_out_of_the_message) {
  const bool stepped = true;
  try {
    ZRT_CHECK_CALL(!stepped, "step() twice with no backward in between");
    BOOST_FAIL("no throw");
  } catch (const InvalidState& e) {
    BOOST_TEST(std::string(e.what()) == "step() twice with no backward in between");
    BOOST_TEST(has(e.where(), "check `!stepped` failed at "));
  }
  try {
    ZRT_THROW_CALL("a view read outside its scope");
  } catch (const InvalidState& e) {
    BOOST_TEST(std::string(e.what()) == "a view read outside its scope");
    BOOST_TEST(has(e.where(), "test_errors.cpp:" + std::to_string(e.line())));
  }
}

BOOST_AUTO_TEST_CASE(internal_error_names_its_location_in_the_message) {
  const bool open = true;
  try {
    ZRT_CHECK_STATE(!open, "handle is open");
    BOOST_FAIL("no throw");
  } catch (const InvalidState& e) {
    const std::string w = e.what();
    BOOST_TEST(has(w, "handle is open [check `!open` failed at "));
    BOOST_TEST(has(w, "test_errors.cpp:" + std::to_string(e.line()) + "]"));
    BOOST_TEST(has(w, e.where()));
  }
  try {
    ZRT_THROW(CudaError, "launch failed");
  } catch (const Error& e) {
    BOOST_TEST(has(e.what(), "launch failed [at "));
  }
}

// Which errors are user errors, and the rest of the hierarchy.
BOOST_AUTO_TEST_CASE(hierarchy) {
  BOOST_CHECK_THROW(ZRT_THROW(InvalidArgument, "x"), UserError);
  BOOST_CHECK_THROW(ZRT_THROW(CheckpointError, "x"), UserError);
  BOOST_CHECK_THROW(ZRT_THROW(ResourceError, "x"), UserError);
  BOOST_CHECK_THROW(ZRT_THROW(ConsistencyError, "x"), UserError);
  BOOST_CHECK_THROW(ZRT_THROW(NcclError, "x"), CommError);
  BOOST_CHECK_THROW(ZRT_THROW(MpiError, "x"), CommError);
  BOOST_CHECK_THROW(ZRT_THROW(CommError, "x"), UserError);
  BOOST_CHECK_THROW(ZRT_THROW(CublasError, "x"), CudaError);
  for (auto raise : {+[] { ZRT_THROW(InvalidState, "x"); }, +[] { ZRT_THROW(CublasError, "x"); },
                     +[] { ZRT_THROW(Error, "x"); }}) {
    try {
      raise();
    } catch (const UserError&) {
      BOOST_FAIL("an internal error was a user error");
    } catch (const Error& e) {
      BOOST_TEST(has(e.what(), "test_errors.cpp:"));
    }
  }
  OutOfMemory oom("oom", {.requested = 10, .allocated = 20, .reserved = 30, .free = 1, .cap = 40});
  BOOST_TEST(oom.numbers().cap == 40u);
  BOOST_TEST(oom.numbers().requested == 10u);
  BOOST_CHECK_THROW(throw oom, UserError);
}

BOOST_AUTO_TEST_SUITE_END()
