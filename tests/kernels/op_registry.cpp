// The harness of Note [One registration per op]: the paths an op runs on, the
// comparisons between them, and the helpers registrations share.
#include "tests/kernels/op_registry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/runtime/error.h"

namespace zrt::test {

namespace {

std::vector<unsigned char> host_bytes(const Tensor& t) {
  const Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  if (h.numel() == 0) return {};
  const auto* p = static_cast<const unsigned char*>(h.data_ptr());
  return std::vector<unsigned char>(p, p + h.nbytes());
}

std::string dims_str(const OpDims& d) {
  std::ostringstream os;
  for (std::size_t i = 0; i < d.size(); ++i) os << (i ? "x" : "") << d[i];
  return os.str();
}

// Holds a path's switches around one call.
class PathScope {
 public:
  explicit PathScope(const OpPath& p) : simple_(p.simple_kernels), attention_(p.attention) {
    if (p.cpu_threads > 0) kernels::set_cpu_threads(p.cpu_threads);
  }
  ~PathScope() { kernels::set_cpu_threads(0); }
  PathScope(const PathScope&) = delete;
  PathScope& operator=(const PathScope&) = delete;

 private:
  kernels::ScopedSimpleKernels simple_;
  kernels::ScopedAttentionPath attention_;
};

using Outputs = std::vector<std::pair<std::string, Tensor>>;

// "" when `got` matches `want` within `tol` (0: the same bits), else why not.
std::string compare(const Tensor& want, const Tensor& got, double tol) {
  if (want.shape() != got.shape() || want.dtype() != got.dtype())
    return "shape or dtype differs: " + want.str() + " vs " + got.str();
  if (tol == 0) {
    const auto a = host_bytes(want), b = host_bytes(got);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) {
        const auto e = static_cast<std::int64_t>(i / want.itemsize());
        std::ostringstream os;
        os << "bits differ first at element " << e << ": " << want.item(e) << " vs " << got.item(e);
        return os.str();
      }
    }
    return {};
  }
  const std::vector<double> a = want.to_doubles(), b = got.to_doubles();
  double err = 0, scale = 1;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    // An infinity matches the same infinity; a NaN on either side matches nothing.
    const double d = a[i] == b[i] ? 0.0 : std::abs(a[i] - b[i]);
    if (std::isnan(d) || d > err) err = std::isnan(d) ? INFINITY : d, worst = i;
    if (std::isfinite(a[i])) scale = std::max(scale, 1 + std::abs(a[i]));
  }
  if (err <= tol * scale) return {};
  std::ostringstream os;
  os << "max |difference| " << err << " > " << tol << " * " << scale << " at element " << worst
     << " (" << a[worst] << " vs " << b[worst] << ")";
  return os.str();
}

}  // namespace

OpRun::OpRun(std::vector<Tensor> inputs, const OpPath& path, bool misaligned, AllocatorPtr memory,
             Stream stream)
    : inputs_(std::move(inputs)),
      path_(path),
      device_(path.cuda ? Device::cuda(0) : Device::cpu()),
      misaligned_(misaligned),
      memory_(std::move(memory)),
      stream_(stream),
      on_device_(inputs_.size()) {}

Tensor OpRun::place(const Shape& shape, DType dtype) const {
  // At least one element of storage: an empty tensor's storage is freed.
  const std::int64_t n = shape_numel(shape), off = misaligned_ ? 1 : 0;
  return Tensor::empty({std::max<std::int64_t>(n, 1) + off}, dtype, device_, memory_)
      .slice(off, n)
      .view(shape);
}

const Tensor& OpRun::in(std::size_t i) {
  std::optional<Tensor>& d = on_device_.at(i);
  if (!d) {
    d = place(inputs_[i].shape(), inputs_[i].dtype());
    d->copy_(inputs_[i]);
  }
  return *d;
}

Tensor OpRun::out(const std::string& name, const Shape& shape, DType dtype) {
  if (next_out_ < outs_.size()) return outs_[next_out_++].second;
  Tensor host = Tensor::empty(shape, dtype);
  if (host.numel() > 0) std::memset(host.data_ptr(), 0xff, host.nbytes());
  Tensor t = place(shape, dtype);
  t.copy_(host);
  outs_.emplace_back(name, t);
  ++next_out_;
  return t;
}

Tensor OpRun::inout(const std::string& name, std::size_t i) {
  if (next_out_ < outs_.size()) return outs_[next_out_++].second;
  Tensor t = place(inputs_.at(i).shape(), inputs_[i].dtype());
  t.copy_(inputs_[i]);
  outs_.emplace_back(name, t);
  ++next_out_;
  return t;
}

void OpRun::record(const std::string& name, const Tensor& value) {
  if (next_out_ < outs_.size())
    outs_[next_out_] = {name, value};
  else
    outs_.emplace_back(name, value);
  ++next_out_;
}

std::vector<std::pair<std::string, Tensor>> OpRun::outputs() const {
  Outputs host;
  for (const auto& [name, t] : outs_)
    host.emplace_back(name, t.device().is_cpu() ? t : t.to(Device::cpu()));
  return host;
}

std::vector<std::string> OpRun::written_inputs() const {
  std::vector<std::string> written;
  for (std::size_t i = 0; i < on_device_.size(); ++i)
    if (on_device_[i] && host_bytes(*on_device_[i]) != host_bytes(inputs_[i]))
      written.push_back("input " + std::to_string(i));
  return written;
}

OpTolerance exact_tolerance(DType) { return {}; }

OpTolerance nn_tolerance(DType t) {
  const double tol = t == DType::f32 || t == DType::f64 ? 1e-4 : 1e-2;
  return {tol, tol};
}

Tensor uniform(const Shape& shape, DType dtype, std::mt19937_64& gen, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, dtype, Device::cpu(), shape);
}

Tensor integers(const Shape& shape, DType dtype, std::mt19937_64& gen, std::int64_t lo,
                std::int64_t hi) {
  std::uniform_int_distribution<std::int64_t> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = static_cast<double>(dist(gen));
  return Tensor::from_doubles(v, dtype, Device::cpu(), shape);
}

const std::vector<OpRegistration>& all_registrations() {
  static const std::vector<OpRegistration> all = [] {
    std::vector<OpRegistration> r = ops_registrations();
    for (OpRegistration& n : nn_registrations()) r.push_back(std::move(n));
    return r;
  }();
  return all;
}

const OpRegistration& find_registration(const std::string& name) {
  for (const OpRegistration& r : all_registrations())
    if (r.name == name) return r;
  ZRT_THROW(InvalidArgument, "no op registered as '", name, "'");
}

std::vector<std::string> check_op(const OpRegistration& r, std::uint64_t seed, bool cuda) {
  std::vector<std::string> failures;
  std::mt19937_64 gen(seed);
  // Each device's paths, its simple one first.
  std::vector<std::vector<OpPath>> devices = {
      {{"cpu serial", false, 0, std::nullopt, 1}, {"cpu threads", false, 0, std::nullopt, 3}}};
  if (cuda) devices.push_back({{"cuda simple", true, ~0u}, {"cuda", true}});
  for (const OpPath& p : r.extra_paths)
    if (!p.cuda || cuda) devices[p.cuda ? 1 : 0].push_back(p);

  for (const OpDims& dims : r.dims) {
    for (DType dt : r.dtypes) {
      const std::string label = r.name + " [" + dims_str(dims) + "] " + dtype_name(dt);
      const std::vector<Tensor> inputs = r.make_inputs(dims, dt, gen);
      auto fail = [&](const std::string& where, const std::string& why) {
        failures.push_back(label + " " + where + ": " + why);
      };
      // One call on `p`, its outputs on the host; nullopt when it failed.
      auto execute = [&](const OpPath& p, bool misaligned) -> std::optional<Outputs> {
        const std::string where = p.name + (misaligned ? " (one element off)" : "");
        try {
          PathScope scope(p);
          OpRun run(inputs, p, misaligned);
          r.run(run, dims, dt);
          Outputs outs = run.outputs();
          for (const std::string& w : run.written_inputs()) fail(where, w + " was written");
          if (r.invariant) {
            const std::string why = r.invariant(outs, dims, dt);
            if (!why.empty()) fail(where, why);
          }
          return outs;
        } catch (const std::exception& e) {
          fail(where, std::string("threw: ") + e.what());
          return std::nullopt;
        }
      };
      auto check = [&](const std::string& what, const Outputs& want, const Outputs& got,
                       double OpTolerance::*tol) {
        if (want.size() != got.size()) return fail(what, "a different number of outputs");
        for (std::size_t k = 0; k < want.size(); ++k) {
          const std::string why =
              compare(want[k].second, got[k].second, r.tolerance(want[k].second.dtype()).*tol);
          if (!why.empty()) fail(what + ", output " + want[k].first, why);
        }
      };

      const std::optional<Outputs> reference = execute(devices[0][0], false);
      if (!reference) continue;
      for (const std::vector<OpPath>& paths : devices) {
        const bool on_cuda = paths[0].cuda;
        std::optional<Outputs> simple = reference;
        if (on_cuda) {
          simple = execute(paths[0], false);
          if (!simple) continue;
          check(paths[0].name + " vs cpu", *reference, *simple, &OpTolerance::twin);
        }
        for (std::size_t i = 0; i < paths.size(); ++i) {
          const OpPath& p = paths[i];
          for (const bool misaligned : {false, true}) {
            if ((i == 0 && !misaligned) || (misaligned && on_cuda && !r.cuda_misaligned)) continue;
            const std::string where = p.name + (misaligned ? " (one element off)" : "");
            const std::optional<Outputs> got = execute(p, misaligned);
            if (!got) continue;
            check(where + " vs " + paths[0].name, *simple, *got, &OpTolerance::paths);
            if (on_cuda) check(where + " vs cpu", *reference, *got, &OpTolerance::twin);
            if (i > 0 && !misaligned) {  // a fast path repeats itself bit for bit
              const std::optional<Outputs> again = execute(p, false);
              if (!again) continue;
              for (std::size_t k = 0; k < got->size() && k < again->size(); ++k) {
                const std::string why = compare((*got)[k].second, (*again)[k].second, 0);
                if (!why.empty()) fail(where + " run twice, output " + (*got)[k].first, why);
              }
            }
          }
        }
      }
    }
  }
  return failures;
}

}  // namespace zrt::test
