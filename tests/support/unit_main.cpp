// Boost.Test's own main for `unit` suites.
#define BOOST_TEST_MODULE zrt
#include <boost/test/unit_test.hpp>
