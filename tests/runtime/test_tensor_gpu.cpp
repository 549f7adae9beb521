// Tensor copies host <-> device in every dtype, with casting on the way.
#include <boost/test/unit_test.hpp>
#include <random>

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
