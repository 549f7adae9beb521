// Expecting a typed error whose message names something: the check the
// Boost.Test suites share for "bad input gets a clear error".
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

namespace zrt::test {

// Expects `call` to throw E with `needle` in its message (a Boost.Test
// error otherwise; call it from the test's thread).
template <class E, class F>
void expect_throw(F&& call, const std::string& needle) {
  try {
    call();
    BOOST_ERROR("expected an error mentioning '" << needle << "'");
  } catch (const E& e) {
    BOOST_CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos,
                        "message '" << e.what() << "' lacks '" << needle << "'");
  }
}

}  // namespace zrt::test
