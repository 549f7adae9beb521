// Where a tensor lives: the host (`cpu`) or one CUDA device (`cuda:N`).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace zrt {

struct Device {
  enum class Kind : unsigned char { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;  // CUDA ordinal; always 0 for cpu

  static constexpr Device cpu() { return {Kind::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {Kind::cuda, i}; }
  constexpr bool is_cpu() const { return kind == Kind::cpu; }
  constexpr bool is_cuda() const { return kind == Kind::cuda; }
  friend constexpr bool operator==(Device, Device) = default;

  std::string str() const;
  // "cpu", "cuda", "cuda:N"; throws InvalidArgument for anything else.
  static Device parse(std::string_view s);
};

std::ostream& operator<<(std::ostream& os, Device d);

// Whether this build has CUDA and a usable device is present.
bool cuda_available();
// The number of usable CUDA devices (0 in a build without CUDA).
int cuda_device_count();
// `device`'s compute capability as 10 * major + minor (90 for sm_90); 0 for
// the cpu, or where the device cannot be asked.
int cuda_compute_capability(Device device);
// Makes `device` the calling thread's current CUDA device (a no-op for cpu):
// each rank calls it once, so no other device gets a context.
void set_current_device(Device device);

}  // namespace zrt
