#include "zrt/optim/consistency_check.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/quantize.h"
#include "zrt/runtime/comm/comm_watchdog.h"

namespace zrt::optim {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Σ mix(mix(i) ^ bits(x_i)) mod 2^64 over a host tensor whose first element
// is element `first` of the flat parameter (Note [Consistency check]).
std::uint64_t positional_sum(const Tensor& host, std::int64_t first) {
  const std::size_t size = dtype_size(host.dtype());
  const auto* p = static_cast<const unsigned char*>(host.data_ptr());
  std::uint64_t sum = 0;
  for (std::int64_t j = 0; j < host.numel(); ++j) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, p + static_cast<std::size_t>(j) * size, size);
    sum += mix(mix(static_cast<std::uint64_t>(first + j)) ^ bits);
  }
  return sum;
}

// `t` readable on the host, after the work issued to `stream`.
Tensor on_host(const Tensor& t, Stream stream) {
  if (t.device().is_cpu()) {
    stream.synchronize();
    return t;
  }
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  host.copy_(t, stream);
  stream.synchronize();
  return host;
}

// What the zero1 group gathers: the master cast to the compute dtype, or
// quantized (Note [Quantized parameter gather]).
Tensor gathered_form_of_master(const FlatParamHandle& h) {
  const FlatParamOptions& o = h.options();
  if (o.param_dtype == DType::f32 && !h.gathers_quantized()) return h.zero1_shard();
  // Where the master is (Note [Master in host memory]).
  const bool host = o.master_on_host;
  const Device device = host ? Device::cpu() : o.device;
  const AllocatorPtr& memory = host ? o.host_allocator : o.allocator;
  const std::int64_t n1 = h.zero1_shard().numel();
  if (h.gathers_quantized()) {
    Tensor q = Tensor::empty({h.gather_chunk_bytes()}, DType::u8, device, memory, o.stream);
    kernels::quantize_int8(q, h.zero1_shard(), n1, h.master_stream());
    return q;
  }
  Tensor cast = Tensor::empty({n1}, o.param_dtype, device, memory, o.stream);
  kernels::cast(cast, h.zero1_shard(), h.master_stream());
  return cast;
}

using Words = std::vector<std::uint64_t>;

// Every member's words, by group rank.
std::vector<Words> gather_words(Communicator& group, const Words& mine) {
  const auto all = group.all_gather_bytes(std::span<const std::byte>(
      reinterpret_cast<const std::byte*>(mine.data()), mine.size() * sizeof(std::uint64_t)));
  std::vector<Words> out;
  for (const auto& bytes : all) {
    Words w(bytes.size() / sizeof(std::uint64_t));
    std::memcpy(w.data(), bytes.data(), w.size() * sizeof(std::uint64_t));
    out.push_back(std::move(w));
  }
  return out;
}

std::string rank_list(const std::vector<std::uint64_t>& ranks) {
  std::ostringstream os;
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

// Replicas whose master differs from the most common one (Note [Consistency check]).
void check_replicas(const std::vector<const FlatParamHandle*>& handles, const Words& master_sums,
                    std::uint64_t me, Communicator& replica, std::vector<std::string>& findings) {
  Words mine = {me};
  mine.insert(mine.end(), master_sums.begin(), master_sums.end());
  const std::vector<Words> all = gather_words(replica, mine);
  for (std::size_t k = 0; k < handles.size(); ++k) {
    std::map<std::uint64_t, std::vector<std::uint64_t>> ranks_by_sum;
    for (const Words& w : all) ranks_by_sum[w.at(k + 1)].push_back(w.at(0));
    if (ranks_by_sum.size() < 2) continue;
    std::size_t most = 0;
    for (const auto& [sum, ranks] : ranks_by_sum) most = std::max(most, ranks.size());
    std::size_t holding_most = 0;
    for (const auto& [sum, ranks] : ranks_by_sum) holding_most += ranks.size() == most;
    std::vector<std::uint64_t> odd, agreeing;
    for (const auto& [sum, ranks] : ranks_by_sum) {
      std::vector<std::uint64_t>& into = ranks.size() == most && holding_most == 1 ? agreeing : odd;
      into.insert(into.end(), ranks.begin(), ranks.end());
    }
    std::sort(agreeing.begin(), agreeing.end());
    std::sort(odd.begin(), odd.end());
    std::ostringstream os;
    os << "handle '" << handles[k]->name() << "': the fp32 master of rank(s) " << rank_list(odd)
       << (agreeing.empty() ? " differ among themselves (no majority among the replicas)"
                            : " differs from its replica(s) on rank(s) " + rank_list(agreeing));
    findings.push_back(os.str());
  }
}

// Ranks whose zero3 slice differs from the gathered casts of the masters:
// the gather an unshard does, paid only when the sums disagreed.
void locate_zero3_differences(const FlatParamHandle& h, std::uint64_t me,
                              std::vector<std::string>& findings) {
  const FlatParamOptions& o = h.options();
  const ZeroGroups& g = h.groups();
  Tensor mine = gathered_form_of_master(h);
  if (mine.device() !=
      o.device) {  // a master in host memory (Note [Master in host memory]): up first
    Tensor up = Tensor::empty({mine.numel()}, mine.dtype(), o.device, o.allocator, o.stream);
    up.copy_(mine, o.stream);
    mine = up;
  }
  Tensor full = Tensor::empty({g.zero1->size() * mine.numel()}, mine.dtype(), o.device, o.allocator,
                              o.stream);
  g.zero1->all_gather_into_tensor(full, mine, o.stream);
  CommWatchdog({g.zero1, g.zero3, g.replica})
      .synchronize(o.stream, "gathering the masters to locate a difference");
  const std::int64_t n3 = h.zero3_shard().numel();
  const Tensor want = on_host(full.slice(g.zero3->rank() * n3, n3), o.stream);
  const Tensor got = on_host(h.zero3_shard(), o.stream);
  if (std::memcmp(want.data_ptr(), got.data_ptr(), got.nbytes()) != 0)
    findings.push_back("handle '" + h.name() + "': the zero3 shard of rank " + std::to_string(me) +
                       " differs from the cast of the zero1 masters it was cut from");
}

}  // namespace

std::vector<std::string> check_consistency(const ZeroModule& module) {
  std::vector<const FlatParamHandle*> handles;
  for (const auto& h : module.handles()) handles.push_back(h.get());
  if (handles.empty()) return {};
  module.synchronize();
  Communicator& world = *module.world();
  const ZeroGroups& g = handles.front()->groups();
  const auto me = static_cast<std::uint64_t>(world.rank());

  Words master_sums, cast_sums, zero3_sums;
  std::vector<bool> zero3_checked;
  for (const FlatParamHandle* h : handles) {
    const Stream s = h->options().stream;
    master_sums.push_back(
        positional_sum(on_host(h->zero1_shard(), s), g.zero1->rank() * h->zero1_shard().numel()));
    // A zero3 shard that is the master, or stale until the next gather, is not checked.
    const bool checked =
        h->zero3_shard().storage_ptr() != h->zero1_shard().storage_ptr() && !h->needs_param_sync();
    zero3_checked.push_back(checked);
    // Positions count the gathered form's elements (bytes when quantized).
    const Tensor form = checked ? gathered_form_of_master(*h) : Tensor();
    cast_sums.push_back(checked ? positional_sum(on_host(form, s), g.zero1->rank() * form.numel())
                                : 0);
    zero3_sums.push_back(checked ? positional_sum(on_host(h->zero3_shard(), s),
                                                  g.zero3->rank() * h->zero3_shard().numel())
                                 : 0);
  }

  std::vector<std::string> findings;
  if (g.replica && g.replica->size() > 1)
    check_replicas(handles, master_sums, me, *g.replica, findings);

  // The zero1 group's sum of casts against this zero3 group's sum of shards.
  Words cast_total(handles.size(), 0), zero3_total(handles.size(), 0);
  for (const Words& w : gather_words(*g.zero1, cast_sums))
    for (std::size_t k = 0; k < handles.size(); ++k) cast_total[k] += w.at(k);
  for (const Words& w : gather_words(*g.zero3, zero3_sums))
    for (std::size_t k = 0; k < handles.size(); ++k) zero3_total[k] += w.at(k);
  Words suspect(handles.size(), 0);
  for (std::size_t k = 0; k < handles.size(); ++k)
    suspect[k] = zero3_checked[k] && cast_total[k] != zero3_total[k];
  // Every rank joins the gathers of every handle some rank suspects.
  Words any(handles.size(), 0);
  for (const Words& w : gather_words(world, suspect))
    for (std::size_t k = 0; k < handles.size(); ++k) any[k] |= w.at(k);
  for (std::size_t k = 0; k < handles.size(); ++k)
    if (any[k]) locate_zero3_differences(*handles[k], me, findings);

  // One list on every rank: each rank's findings, merged in order.
  std::string mine;
  for (const std::string& f : findings) mine += f + '\n';
  std::set<std::string> merged;
  for (const auto& bytes : world.all_gather_bytes(std::span<const std::byte>(
           reinterpret_cast<const std::byte*>(mine.data()), mine.size()))) {
    std::istringstream lines(
        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    for (std::string line; std::getline(lines, line);) merged.insert(line);
  }
  return {merged.begin(), merged.end()};
}

}  // namespace zrt::optim
