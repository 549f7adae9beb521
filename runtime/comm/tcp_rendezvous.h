// A small TCP rendezvous for torchrun-style launches (MASTER_ADDR,
// MASTER_PORT): enough bootstrap to share the NCCL unique id, with no MPI.
//
// Rank 0 listens on MASTER_PORT (all IPv4 interfaces); the other ranks
// connect to MASTER_ADDR:MASTER_PORT, retrying while rank 0 is not up yet.
// all_gather_bytes is a star: every rank sends its bytes to rank 0, which
// answers each with everyone's. Every step (connect, accept, send, receive)
// has the deadline of the timeout; when it expires the call throws CommError
// naming the address and the ranks that are missing, never hangs.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "zrt/runtime/comm/communicator.h"

namespace zrt {

class TcpRendezvous {
 public:
  // Rank 0 binds and listens here (port 0 picks a free port; see port()).
  // Throws InvalidArgument for a rank outside [0, size) or a bad port, and
  // CommError when rank 0 cannot listen (e.g. the port is taken).
  TcpRendezvous(std::string master_addr, int master_port, int rank, int size,
                std::chrono::milliseconds timeout = default_comm_timeout());
  ~TcpRendezvous();
  TcpRendezvous(const TcpRendezvous&) = delete;
  TcpRendezvous& operator=(const TcpRendezvous&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The port rank 0 listens on (the one it was given, or the one picked for 0).
  int port() const { return port_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Collective: every rank's bytes, in rank order, on every rank. Each call
  // is one round of connections; all ranks must call it the same number of
  // times.
  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte> mine);

 private:
  std::vector<std::vector<std::byte>> gather_as_root(std::span<const std::byte> mine);
  std::vector<std::vector<std::byte>> gather_as_peer(std::span<const std::byte> mine);
  std::string where() const;

  std::string addr_;
  int port_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  int listen_fd_ = -1;  // rank 0 only
  std::uint64_t round_ = 0;
};

}  // namespace zrt
