// Every kernel registered once with its sizes, dtypes and tolerances, and the
// harness that runs each registration on every path it has: the CUDA kernels
// against their CPU twins, the fast paths against their simple references
// (Note [One registration per op]). test_op_registry checks them;
// `zrt-bench ops` times them against a baseline measured in the same run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "zrt/kernels/nn/attention_path.h"
#include "zrt/runtime/allocator.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"

namespace zrt::test {

// Note [One registration per op]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each kernel (kernels/ops and kernels/nn, forward and backward) is written
// down once, as an OpRegistration in its folder's op_registrations.cpp: the
// sizes it is tried at (odd ones, and ones the fast kernels' packs and tiles
// divide), its dtypes, how to draw its inputs from a seeded generator, how to
// call it through an OpRun, and its tolerances. The harness, not the
// registration, decides where it runs:
//   - on the CPU serially (one kernel thread): the reference every other run
//     is compared with, and the CPU's simple path;
//   - on the CPU with three kernel threads, and on any op-specific path
//     (attention's GEMM path on the CPU);
//   - on CUDA, when the build has it and a device is present, with the
//     simple kernels (ZRT_SIMPLE_KERNELS=all), then with the fast ones and
//     any op-specific path (attention forced to tiled, gemm, flash).
// Each run gets fresh copies of the inputs on its device, at an aligned
// address and one element off (so the 16-byte packs and their scalar
// fallback both run), and every output is filled with 0xFF bytes (NaN)
// before the call, so an element the kernel forgot fails. A run is compared
// with its device's simple path (`paths` tolerance) and with the CPU
// reference (`twin`); 0 means the same bits, otherwise max |diff| <= tol ·
// (1 + max |finite reference|), an infinity equal to the reference's and a
// NaN never within a tolerance. The fast runs are repeated and must repeat
// bit for bit, and an op must leave its inputs unchanged. The seed of each op's
// inputs is printed and ZRT_TEST_SEED replays it. The same registrations
// drive `zrt-bench ops`, which times each at its perf size against a plain
// copy of the bytes it moves (memory-bound ops) or a square GEMM of the same
// FLOPs (GEMM-like ops). A new kernel therefore needs one registration to be
// checked on every device and path and to be timed; only what a call and its
// outputs cannot show (streams, allocators, id flags, host emulations of a
// device's summation order) keeps a hand-written test.

// The sizes of one case, read by the registration (a length, m/n/k, ...).
using OpDims = std::vector<std::int64_t>;

// Tolerances relative to 1 + max |reference|; 0: the same bits.
struct OpTolerance {
  double twin = 0;   // a CUDA run against the CPU reference
  double paths = 0;  // a run against the simple path of its own device
};

// Where a run goes: its device and the switches held around the call.
struct OpPath {
  std::string name{};
  bool cuda = false;
  unsigned simple_kernels = 0;                        // ScopedSimpleKernels bits
  std::optional<kernels::AttentionPath> attention{};  // ScopedAttentionPath
  int cpu_threads = 0;                                // set_cpu_threads; 0: unchanged
};

// One call of an op on one path: its inputs copied there, its outputs made
// there. `in`, `out` and `inout` hand out the same tensors again after
// rewind(), so the perf mode can call the op repeatedly.
class OpRun {
 public:
  OpRun(std::vector<Tensor> inputs, const OpPath& path, bool misaligned, AllocatorPtr memory = {},
        Stream stream = {});

  const OpPath& path() const { return path_; }
  Device device() const { return device_; }
  Stream stream() const { return stream_; }
  const Tensor& input_on_host(std::size_t i) const { return inputs_.at(i); }

  // Input i on this run's device (an op must not write it).
  const Tensor& in(std::size_t i);
  // An output whose every byte is 0xFF (NaN) before the op.
  Tensor out(const std::string& name, const Shape& shape, DType dtype);
  // Input i on this run's device as an output the op updates in place.
  Tensor inout(const std::string& name, std::size_t i);
  // A value the op returns on the host (recorded as an output).
  void record(const std::string& name, const Tensor& value);

  void rewind() { next_out_ = 0; }
  // The outputs in the order they were made, on the host.
  std::vector<std::pair<std::string, Tensor>> outputs() const;
  // Names of inputs whose device copies no longer hold their values.
  std::vector<std::string> written_inputs() const;

 private:
  Tensor place(const Shape& shape, DType dtype) const;

  std::vector<Tensor> inputs_;
  OpPath path_;
  Device device_;
  bool misaligned_;
  AllocatorPtr memory_;
  Stream stream_;
  std::vector<std::optional<Tensor>> on_device_;
  std::vector<std::pair<std::string, Tensor>> outs_;
  std::size_t next_out_ = 0;
};

// What one call moves and computes, for the perf mode.
struct OpCost {
  double bytes = 0;  // read and written
  double flops = 0;  // > 0: GEMM-like, timed against a GEMM of as many FLOPs
};

struct OpRegistration {
  std::string name{};
  std::vector<OpDims> dims{};  // the cases, each run in every dtype
  std::vector<DType> dtypes{};
  // Fresh inputs of one case, on the host.
  std::function<std::vector<Tensor>(const OpDims&, DType, std::mt19937_64&)> make_inputs{};
  // Calls the op through `run` (its in/out/inout tensors, its stream).
  std::function<void(OpRun&, const OpDims&, DType)> run{};
  // Tolerance for an output of the given dtype.
  std::function<OpTolerance(DType)> tolerance = [](DType) { return OpTolerance{}; };
  std::vector<OpPath> extra_paths{};  // op-specific paths (CPU and CUDA)
  bool cuda_misaligned = true;        // also one element off on CUDA
  // A property of one run's outputs that must hold (empty string: it does).
  std::function<std::string(const std::vector<std::pair<std::string, Tensor>>&, const OpDims&,
                            DType)>
      invariant{};
  std::function<OpCost(const OpDims&, DType)> cost{};
  OpDims perf_dims{};  // the perf mode's case (its first dtype)
  // What the perf mode times when not `run` (which may also read results
  // back to the host, a fixed cost that would swamp the kernel's time).
  std::function<void(OpRun&, const OpDims&, DType)> perf_run{};
};

// The registrations of each folder, and all of them (ops first).
std::vector<OpRegistration> ops_registrations();
std::vector<OpRegistration> nn_registrations();
const std::vector<OpRegistration>& all_registrations();
const OpRegistration& find_registration(const std::string& name);

// Runs every case of `r` on the CPU paths, and on the CUDA paths too when
// `cuda`; returns a message per failed check (none: it passed).
std::vector<std::string> check_op(const OpRegistration& r, std::uint64_t seed, bool cuda);

// The usual tolerances: the runtime ops' bit-exact rule, and the model-zoo
// ops' 1e-4 (f32, f64) or 1e-2 (bf16, f16) for twins and paths alike.
OpTolerance exact_tolerance(DType);
OpTolerance nn_tolerance(DType t);

// Uniform values in [lo, hi) of `dtype`, on the host.
Tensor uniform(const Shape& shape, DType dtype, std::mt19937_64& gen, double lo = -2.0,
               double hi = 2.0);
// Whole numbers in [lo, hi] of an id dtype, on the host.
Tensor integers(const Shape& shape, DType dtype, std::mt19937_64& gen, std::int64_t lo,
                std::int64_t hi);

}  // namespace zrt::test
