// A modelled network link for host ranks: each collective lasts at least
// latency + bytes on the link / bandwidth.
//
// Note [Link model]
// ~~~~~~~~~~~~~~~~~
// Local ranks share memory and MPI ranks on one host share its memory bus,
// so their collectives cost next to nothing, and a CPU run says little about
// how a strategy or a prefetch depth would fare between machines. A link
// model makes the host backends (local, mpi) hold each tensor collective
// until
//     latency + max(sent, received) / bandwidth
// has passed since the collective started to run on its stream (or on the
// calling thread), with sent and received this rank's bytes on the link
// (Note [Bytes on the link]): a full-duplex link of `gbps` gigabits per
// second (10^9 bits) and `latency_us` per collective (not per ring step).
// A collective that took longer on its own is not held further, and one in
// a group of one rank, which crosses no link, is not held at all. It only
// waits, so results are bit for bit those without the model. The wait is in
// slices that notice an aborted group. barrier, split and all_gather_bytes
// are not held; NCCL is never held (its collectives run on the device), and
// the local backend's collectives of CUDA tensors on a CUDA stream are held
// on the host once queued (the issuing thread waits, not the device).
// The setting lives in the communicator (set_link_model, inherited by the
// groups split afterwards); make_local_world, run_local_ranks and
// make_mpi_world start from ZRT_LINK_GBPS and ZRT_LINK_US, so every program
// gets it from the environment; zrt-bench train --link-gbps sets it per run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace zrt {

struct LinkModel {
  double gbps = 0;        // bandwidth in Gb/s; 0: unlimited
  double latency_us = 0;  // per collective, in microseconds
  bool enabled() const { return gbps > 0 || latency_us > 0; }
  // latency + bytes / bandwidth (zero when disabled).
  std::chrono::nanoseconds time(std::uint64_t bytes) const;
  // "none", "100 Gb/s", "100 Gb/s + 5 us", "5 us".
  std::string str() const;
};

// The bounds check_link_model enforces.
inline constexpr double kMinLinkGbps = 1e-3, kMaxLinkGbps = 1e6;
inline constexpr double kMaxLinkLatencyUs = 1e6;

// InvalidArgument naming the setting (`gbps_name`, `us_name`: a flag or a
// variable) and its value unless gbps is 0 or in [kMinLinkGbps,
// kMaxLinkGbps] and latency_us in [0, kMaxLinkLatencyUs].
void check_link_model(const LinkModel& model, const char* gbps_name = "the link bandwidth",
                      const char* us_name = "the link latency");

// ZRT_LINK_GBPS and ZRT_LINK_US (unset or empty: 0); InvalidArgument naming
// the variable and its value when it is not 0 or a number in the range
// check_link_model takes.
LinkModel link_model_from_env();

// Waits until `start` + model.time(bytes), in slices of at most 10 ms,
// returning early once `stop()` is true.
void hold_for_link(const LinkModel& model, std::chrono::steady_clock::time_point start,
                   std::uint64_t bytes, const std::function<bool()>& stop);

}  // namespace zrt
