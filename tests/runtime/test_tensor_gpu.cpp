// Tensor copies host <-> device in every dtype, with casting on the way.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/support/test_seed.h"
#include "zrt/kernels/ops/cast.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"

using namespace zrt;

BOOST_AUTO_TEST_SUITE(tensor_gpu)

BOOST_AUTO_TEST_CASE(host_device_round_trip_every_dtype_pair) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> dist(0, 120);
  std::vector<double> vals(4097);
  for (auto& x : vals) x = dist(gen);
  const Device gpu = Device::cuda(0);
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      Tensor host = Tensor::from_doubles(vals, a);
      Tensor dev = Tensor::full({4097}, 7.0, b, gpu);  // poisoned
      dev.copy_(host);
      Tensor dev2 = Tensor::empty({4097}, a, gpu);
      dev2.copy_(dev);
      BOOST_TEST(dev2.to(Device::cpu()).to_doubles() == vals, dtype_name(a)
                                                                  << "->" << dtype_name(b));
    }
  }
}

// Note [16-bit storage types]: a conversion to bf16 or f16 gives the same
// bits on the device (the hardware's rounding instruction, in the cast
// kernel) as on the CPU (integer arithmetic), for f32 values of every class:
// random bit patterns over every exponent, ties at the rounding bit of each
// format, zeros, subnormals, the largest finite values and the overflow
// boundaries, Inf, and NaN with payloads; through the kernel's 16-byte packs
// and, one element off, its scalar path. (Tensor::to would not do: a
// casting copy that touches a device converts on the host.)
BOOST_AUTO_TEST_CASE(f32_to_16_bits_match_the_cpu_bit_for_bit) {
  std::mt19937_64 gen(test::test_seed("f32_to_16_bits_match_the_cpu_bit_for_bit"));
  std::vector<std::uint32_t> bits;
  for (int i = 0; i < (1 << 20); ++i) bits.push_back(std::uint32_t(gen()));
  for (int i = 0; i < (1 << 16); ++i) {
    const std::uint32_t r = std::uint32_t(gen());
    bits.push_back((r & 0xffff0000u) | 0x8000u);  // a bf16 tie
    bits.push_back((r & 0xffffe000u) | 0x1000u);  // an f16 tie
    bits.push_back(r & 0x807fffffu);              // an f32 subnormal or zero
    // Around f16's subnormal range (2^-25 .. 2^-14) and its top (65504 .. 65536).
    bits.push_back((r & 0x80001fffu) | ((0x66u + (r >> 13) % 16) << 23));
    bits.push_back((r & 0x807fffffu) | (0x8eu << 23));
  }
  for (std::uint32_t special :
       {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
        0x7fbfffffu, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x7f7fffffu, 0xff7f8000u, 0x33000000u,
        0x33000001u, 0x387fe000u, 0x38800000u})
    bits.push_back(special);
  const auto n = static_cast<std::int64_t>(bits.size());
  Tensor host = Tensor::empty({n}, DType::f32, Device::cpu());
  std::memcpy(host.data_ptr(), bits.data(), bits.size() * sizeof(std::uint32_t));
  const Tensor dev = host.to(Device::cuda(0));
  for (DType d : {DType::bf16, DType::f16})
    for (std::int64_t skip : {0, 1}) {  // packs; one element off: the scalar path
      const std::int64_t m = n - skip;
      const Tensor on_cpu = Tensor::empty({m}, d, Device::cpu());
      kernels::cast(on_cpu, host.slice(skip, m));
      const Tensor dst = Tensor::empty({m + skip}, d, Device::cuda(0)).slice(skip, m);
      kernels::cast(dst, dev.slice(skip, m));
      const Tensor on_gpu = dst.to(Device::cpu());
      const auto* a = static_cast<const std::uint16_t*>(on_cpu.data_ptr());
      const auto* b = static_cast<const std::uint16_t*>(on_gpu.data_ptr());
      std::int64_t differ = 0, first = -1;
      for (std::int64_t i = 0; i < m; ++i) {
        if (a[i] != b[i] && differ++ == 0) first = i;
      }
      BOOST_TEST(differ == 0, dtype_name(d) << (skip ? " (scalar)" : " (packs)") << ": " << differ
                                            << " of " << m << " conversions differ; first f32 0x"
                                            << std::hex << (first < 0 ? 0u : bits[first + skip])
                                            << ": CPU 0x" << (first < 0 ? 0 : a[first])
                                            << ", GPU 0x" << (first < 0 ? 0 : b[first]));
    }
}

BOOST_AUTO_TEST_CASE(device_views_and_free) {
  Tensor t = Tensor::from_doubles({1, 2, 3, 4, 5}, DType::bf16, Device::cuda(0));
  Tensor v = t.slice(2, 3);
  BOOST_TEST(v.item(0) == 3.0);
  free_storage(t);
  BOOST_CHECK_THROW(v.item(0), InvalidState);
  alloc_storage(t);
  t.fill_(9.0);
  BOOST_TEST(v.item(2) == 9.0);
}

// An owned CPU stream's handle is a host queue, never a cudaStream_t: a
// device copy or a CUDA event given one is refused, not handed to CUDA.
BOOST_AUTO_TEST_CASE(an_owned_cpu_stream_cannot_order_device_work) {
  const OwnedStream queue(Device::cpu());
  Tensor dev = Tensor::zeros({5}, DType::f32, Device::cuda(0));
  Tensor host = Tensor::from_doubles({1, 2, 3, 4, 5}, DType::f32);
  BOOST_CHECK_THROW(dev.copy_(host, queue), InvalidArgument);
  BOOST_CHECK_THROW(host.copy_(dev, queue), InvalidArgument);
  Event event(Device::cuda(0));
  BOOST_CHECK_THROW(event.record(queue), InvalidArgument);
  event.record(Stream());  // the device's legacy default stream
  BOOST_CHECK_THROW(event.wait(queue), InvalidArgument);
  BOOST_TEST(dev.to(Device::cpu()).to_doubles() == std::vector<double>(5, 0.0));
}

BOOST_AUTO_TEST_SUITE_END()
