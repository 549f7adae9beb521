// Main for `mpi` suites: MPI is initialised (with thread support) around the
// whole Boost.Test run; every rank runs every test case.
#define BOOST_TEST_MODULE zrt_mpi
#define BOOST_TEST_NO_MAIN
#include <mpi.h>
#include <boost/test/unit_test.hpp>

int main(int argc, char* argv[]) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
  // A failure on any rank fails the whole run.
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
