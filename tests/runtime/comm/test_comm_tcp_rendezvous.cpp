// The TCP rendezvous of torchrun-style launches, with ranks as threads on
// 127.0.0.1 and a port the kernel picks: exchanges, timeouts when a peer
// never comes, and the launch error of a build without NCCL.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/comm/tcp_rendezvous.h"
#include "zrt/runtime/device.h"

using namespace zrt;
using namespace std::chrono_literals;

namespace {

using Bytes = std::vector<std::byte>;

// Random bytes of a rank-dependent odd length (rank 1 sends nothing).
Bytes payload(int rank, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 1000 + rank);
  const std::size_t len = rank == 1 ? 0 : std::size_t(rank) * 37 + (rank == 2 ? 1 << 16 : 3);
  Bytes b(len);
  for (auto& x : b) x = std::byte(rng() & 0xff);
  return b;
}

// A port that was free a moment ago (the kernel picked it for a listener
// that is closed again).
int unused_port() {
  TcpRendezvous probe("127.0.0.1", 0, 0, 2, 1s);
  return probe.port();
}

bool message_has(const std::exception& e, const std::string& text) {
  const bool found = std::string(e.what()).find(text) != std::string::npos;
  if (!found) BOOST_TEST_MESSAGE("message lacks '" << text << "': " << e.what());
  return found;
}

// Runs ranks 1..size-1 as threads against `root`; each does `rounds` exchanges
// and stores what it got (or its exception).
struct Peers {
  std::vector<std::vector<std::vector<Bytes>>> got;
  std::vector<std::exception_ptr> errors;
  std::vector<std::thread> threads;

  Peers(const TcpRendezvous& root, int size, int rounds, std::chrono::milliseconds timeout)
      : got(size), errors(size) {
    for (int r = 1; r < size; ++r)
      threads.emplace_back([this, r, size, rounds, timeout, port = root.port()] {
        try {
          TcpRendezvous me("127.0.0.1", port, r, size, timeout);
          for (int k = 0; k < rounds; ++k) got[r].push_back(me.all_gather_bytes(payload(r, k)));
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
  }
  void join() {
    for (auto& t : threads) t.join();
    threads.clear();
  }
  ~Peers() { join(); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_tcp_rendezvous)

BOOST_AUTO_TEST_CASE(every_rank_gets_every_rank_bytes) {
  for (int size : {1, 2, 4}) {
    BOOST_TEST_CONTEXT("size " << size) {
      TcpRendezvous root("127.0.0.1", 0, 0, size, 20s);
      if (size > 1) BOOST_CHECK_GT(root.port(), 0);  // a world of one needs no listener
      Peers peers(root, size, 3, 20s);
      std::vector<std::vector<Bytes>> mine;
      for (int k = 0; k < 3; ++k) mine.push_back(root.all_gather_bytes(payload(0, k)));
      peers.join();
      peers.got[0] = mine;
      for (int r = 0; r < size; ++r) {
        if (peers.errors[r]) std::rethrow_exception(peers.errors[r]);
        BOOST_REQUIRE_EQUAL(peers.got[r].size(), 3u);
        for (int k = 0; k < 3; ++k) {
          BOOST_REQUIRE_EQUAL(peers.got[r][k].size(), std::size_t(size));
          for (int q = 0; q < size; ++q) BOOST_CHECK(peers.got[r][k][q] == payload(q, k));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(peers_retry_until_rank0_listens) {
  // The peer starts first, then rank 0 on the port it was told.
  const int port = unused_port();
  std::vector<Bytes> got;
  std::exception_ptr error;
  std::thread peer([&] {
    try {
      TcpRendezvous me("127.0.0.1", port, 1, 2, 20s);
      got = me.all_gather_bytes(payload(1, 9));
    } catch (...) {
      error = std::current_exception();
    }
  });
  std::this_thread::sleep_for(150ms);
  TcpRendezvous root("127.0.0.1", port, 0, 2, 20s);
  auto mine = root.all_gather_bytes(payload(0, 9));
  peer.join();
  if (error) std::rethrow_exception(error);
  BOOST_REQUIRE_EQUAL(got.size(), 2u);
  BOOST_CHECK(got == mine);
  BOOST_CHECK(got[0] == payload(0, 9));
}

BOOST_AUTO_TEST_CASE(a_peer_with_another_world_size_is_rejected) {
  TcpRendezvous root("127.0.0.1", 0, 0, 3, 5s);
  Peers peers(root, 2, 1, 5s);  // rank 1 believes in a world of 2
  BOOST_CHECK_EXCEPTION(root.all_gather_bytes(payload(0, 0)), CommError, [](const CommError& e) {
    return message_has(e, "rank 1 says the world has 2 ranks");
  });
  peers.join();
  BOOST_REQUIRE(peers.errors[1]);
  BOOST_CHECK_THROW(std::rethrow_exception(peers.errors[1]), CommError);
}

BOOST_AUTO_TEST_CASE(rank0_times_out_and_the_present_peer_fails_too) {
  TcpRendezvous root("127.0.0.1", 0, 0, 3, 400ms);
  std::exception_ptr peer_error;
  std::thread peer([&] {
    try {
      TcpRendezvous me("127.0.0.1", root.port(), 1, 3, 5s);
      me.all_gather_bytes(payload(1, 0));
    } catch (...) {
      peer_error = std::current_exception();
    }
  });
  const auto start = std::chrono::steady_clock::now();
  BOOST_CHECK_EXCEPTION(root.all_gather_bytes(payload(0, 0)), CommError, [](const CommError& e) {
    return message_has(e, "rank(s) 2 to connect") && message_has(e, "400 ms");
  });
  BOOST_CHECK_LT(std::chrono::steady_clock::now() - start, 3s);
  peer.join();
  // Rank 0 gave up and closed the connection: rank 1 is told, well before its own 5 s.
  BOOST_REQUIRE(peer_error);
  BOOST_CHECK_EXCEPTION(std::rethrow_exception(peer_error), CommError,
                        [](const CommError& e) { return message_has(e, "closed the connection"); });
  BOOST_CHECK_LT(std::chrono::steady_clock::now() - start, 4s);
}

BOOST_AUTO_TEST_CASE(peer_times_out_when_rank0_never_listens) {
  const int port = unused_port();  // nobody will listen there
  TcpRendezvous me("127.0.0.1", port, 1, 2, 300ms);
  const auto start = std::chrono::steady_clock::now();
  BOOST_CHECK_EXCEPTION(me.all_gather_bytes(payload(1, 0)), CommError, [](const CommError& e) {
    return message_has(e, "could not reach rank 0");
  });
  BOOST_CHECK_LT(std::chrono::steady_clock::now() - start, 3s);
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_named) {
  BOOST_CHECK_EXCEPTION(TcpRendezvous("127.0.0.1", 1234, 3, 3), InvalidArgument,
                        [](const InvalidArgument& e) { return message_has(e, "rank 3"); });
  BOOST_CHECK_EXCEPTION(
      TcpRendezvous("127.0.0.1", 70000, 1, 2), InvalidArgument,
      [](const InvalidArgument& e) { return message_has(e, "MASTER_PORT 70000"); });
  BOOST_CHECK_THROW(TcpRendezvous("127.0.0.1", 0, 1, 2), InvalidArgument);  // peers need a port
  BOOST_CHECK_THROW(TcpRendezvous("", 1234, 1, 2), InvalidArgument);        // and an address
  // A port already taken by another listener.
  TcpRendezvous first("127.0.0.1", 0, 0, 2, 1s);
  BOOST_CHECK_EXCEPTION(TcpRendezvous("127.0.0.1", first.port(), 0, 2, 1s), CommError,
                        [](const CommError& e) { return message_has(e, "cannot listen"); });
}

#ifdef ZRT_WITH_NCCL
// A build with NCCL on a machine without a usable GPU: the launch is named,
// not the CUDA error of the first device call.
BOOST_AUTO_TEST_CASE(torchrun_launch_without_a_gpu_names_the_launch) {
  if (cuda_device_count() > 0) return;  // the launch would rendezvous for real
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  BOOST_CHECK_EXCEPTION(init_world(200ms), InvalidArgument, [](const InvalidArgument& e) {
    return message_has(e,
                       "a torchrun-style launch of 2 ranks (RANK, WORLD_SIZE, MASTER_ADDR "
                       "set) has an NCCL world on the GPUs, but no CUDA device is usable "
                       "here: cpu ranks launch with mpirun or srun");
  });
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
}
#else
BOOST_AUTO_TEST_CASE(torchrun_launch_without_nccl_is_a_typed_error) {
  // This test process owns its environment; the variables are removed again.
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  BOOST_CHECK_EXCEPTION(init_world(200ms), InvalidArgument, [](const InvalidArgument& e) {
    return message_has(e, "torchrun") && message_has(e, "needs a zrt built with CUDA and NCCL") &&
           message_has(e, "mpirun");
  });
  // cpu tensors said so are refused first, whatever the build.
  BOOST_CHECK_EXCEPTION(init_world(200ms, Device::cpu()), InvalidArgument,
                        [](const InvalidArgument& e) {
                          return message_has(e, "cpu ranks launch with mpirun or srun");
                        });
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
