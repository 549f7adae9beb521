#include "zrt/runtime/device.h"

#include <charconv>
#include <ostream>

#include "zrt/runtime/error.h"
#ifdef ZRT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace zrt {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(std::string_view s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.starts_with("cuda:")) {
    auto digits = s.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && !digits.empty())
      return cuda(index);
  }
  ZRT_THROW(InvalidArgument, "unknown device '", s, "' (expected cpu, cuda or cuda:N)");
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

int cuda_device_count() {
#ifdef ZRT_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" status
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

bool cuda_available() { return cuda_device_count() > 0; }

int cuda_compute_capability(Device device) {
#ifdef ZRT_WITH_CUDA
  int major = 0, minor = 0;
  if (device.is_cpu() ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.index) !=
          cudaSuccess) {
    cudaGetLastError();  // clear what the failed query left
    return 0;
  }
  return 10 * major + minor;
#else
  (void)device;
  return 0;
#endif
}

void set_current_device(Device device) {
  if (device.is_cpu()) return;
#ifdef ZRT_WITH_CUDA
  cudaError_t st = cudaSetDevice(device.index);
  if (st == cudaSuccess) return;
  // No GPU, no driver or too old a one, or an index past the GPUs: the
  // machine's, said without zrt's source place (Note [User errors and
  // internal errors]).
  if (st == cudaErrorNoDevice || st == cudaErrorInsufficientDriver ||
      st == cudaErrorInvalidDevice || st == cudaErrorDevicesUnavailable ||
      st == cudaErrorSystemDriverMismatch || st == cudaErrorCompatNotSupportedOnDevice) {
    cudaGetLastError();  // clear the status for the next caller
    const int visible = cuda_device_count();
    const char* hint = st == cudaErrorDevicesUnavailable
                           ? "; the GPU is busy: another process holds it in exclusive-process mode"
                       : visible == 0
                           ? "; run on a machine with a GPU and its driver, or on the cpu device"
                           : "; CUDA_VISIBLE_DEVICES may hide others";
    ZRT_THROW(ResourceError, "cannot use ", device.str(), ": ", cudaGetErrorString(st), " (",
              visible, " CUDA device(s) visible here", hint, ")");
  }
  ZRT_CHECK_AS(CudaError, false, "cannot use ", device.str(), ": ", cudaGetErrorString(st));
#else
  ZRT_THROW(InvalidArgument, "device ", device.str(), ": this build of zrt has no CUDA support");
#endif
}

}  // namespace zrt
