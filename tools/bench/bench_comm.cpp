// zrt-bench comm: one collective through zrt's Communicator against the raw
// backend call on the same buffers, in the same run.
//
//   zrt-bench comm --op all_gather|reduce_scatter|all_reduce --size BYTES
//                  [--ranks N] [--backend local|mpi] [--reps R] [--json]
//
// BYTES is the size of the whole (gathered / unscattered / reduced) f32
// buffer. algbw = BYTES / time; busbw = algbw * (n-1)/n for all-gather and
// reduce-scatter, 2(n-1)/n for all-reduce (the nccl-tests convention). The
// raw call is MPI_Allgather / MPI_Reduce_scatter_block / MPI_Allreduce for
// mpi, and for local the same copies and reduction (host_reduce) between
// threads synchronised by std::barrier, without zrt's validation and
// rendezvous. ratio = zrt time / raw time.
#include <barrier>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "tools/train/train_options.h"
#include "zrt/runtime/comm/host_reduce.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/mpi_comm.h"

#ifdef ZRT_WITH_MPI
#include <mpi.h>
#endif

namespace zrt::bench {

namespace {

struct Options {
  std::string op = "all_reduce";
  std::string backend = "local";
  std::int64_t bytes = 64 << 20;
  int ranks = 2;
  int reps = 10;
  bool json = false;
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: zrt-bench comm --op all_gather|reduce_scatter|all_reduce --size BYTES\n"
               "                      [--ranks N (local threads)] [--backend local|mpi]\n"
               "                      [--reps R] [--json]\n");
}

Options parse(int argc, char** argv) {
  Options o;
  OptionParser("comm", "zrt-bench comm: collectives against the raw backend call")
      .value("--op", o.op)
      .value("--backend", o.backend)
      .value("--size", o.bytes)
      .value("--ranks", o.ranks)
      .runs(o.reps, o.json)
      .parse(argc, argv);
  ZRT_CHECK_ARG(o.op == "all_gather" || o.op == "reduce_scatter" || o.op == "all_reduce", "--op '",
                o.op, "' is not one of all_gather, reduce_scatter, all_reduce");
  ZRT_CHECK_ARG(o.backend == "local" || o.backend == "mpi", "--backend '", o.backend,
                "' is not one of local, mpi");
  ZRT_CHECK_ARG(o.backend == "mpi" || (o.ranks >= 1 && o.ranks <= train::kMaxLocalRanks),
                "--ranks must be from 1 to ", train::kMaxLocalRanks, " (got ", o.ranks, ")");
  ZRT_CHECK_ARG(o.bytes >= 0, "--size must not be negative (got ", o.bytes, ")");
  return o;
}

// The buffers of one rank: `whole` holds all n chunks, `chunk` one.
struct Buffers {
  Tensor whole, chunk;
  Buffers(std::int64_t chunk_numel, int n)
      : whole(Tensor::full({chunk_numel * n}, 1.0, DType::f32)),
        chunk(Tensor::full({chunk_numel}, 1.0, DType::f32)) {}
};

void run_zrt(Communicator& c, const Options& o, Buffers& b) {
  if (o.op == "all_gather")
    c.all_gather_into_tensor(b.whole, b.chunk);
  else if (o.op == "reduce_scatter")
    c.reduce_scatter_tensor(b.chunk, b.whole, ReduceOp::sum);
  else
    c.all_reduce(b.whole, ReduceOp::sum);
}

struct Timing {
  double zrt_s = 0, raw_s = 0;
};

// Local backend: zrt's communicators vs the same data movement between
// threads synchronised by std::barrier.
Timing time_local(const Options& o, std::int64_t chunk_numel) {
  const int n = o.ranks;
  auto comms = make_local_world(n);
  std::vector<Buffers> bufs;
  for (int r = 0; r < n; ++r) bufs.emplace_back(chunk_numel, n);
  Tensor scratch = Tensor::empty({chunk_numel * n}, DType::f32);
  std::barrier sync(n);
  Timing t;
  auto raw_step = [&](int r) {
    const std::size_t cb = static_cast<std::size_t>(chunk_numel) * sizeof(float);
    std::vector<const void*> srcs(n);
    sync.arrive_and_wait();
    if (o.op == "all_gather") {
      for (int k = 0; k < n; ++k)
        std::memcpy(static_cast<std::byte*>(bufs[r].whole.data_ptr()) + k * cb,
                    bufs[k].chunk.data_ptr(), cb);
    } else {
      for (int k = 0; k < n; ++k)
        srcs[k] = static_cast<const std::byte*>(bufs[k].whole.data_ptr()) + r * cb;
      void* dst = o.op == "reduce_scatter"
                      ? bufs[r].chunk.data_ptr()
                      : static_cast<void*>(static_cast<std::byte*>(scratch.data_ptr()) + r * cb);
      host_reduce(dst, srcs, chunk_numel, DType::f32, ReduceOp::sum);
      if (o.op == "all_reduce") {
        sync.arrive_and_wait();
        std::memcpy(bufs[r].whole.data_ptr(), scratch.data_ptr(), cb * n);
      }
    }
    sync.arrive_and_wait();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      // In turn, every rank in the same order: the ratio holds under load.
      const std::vector<double> m = interleaved_median_seconds(
          {[&] { run_zrt(*comms[r], o, bufs[r]); }, [&] { raw_step(r); }}, 2, o.reps);
      if (r == 0) t = {m[0], m[1]};
    });
  for (auto& th : threads) th.join();
  return t;
}

#ifdef ZRT_WITH_MPI
Timing time_mpi(const Options& o, std::int64_t chunk_numel, const CommPtr& world) {
  Buffers b(chunk_numel, world->size());
  const int cn = static_cast<int>(chunk_numel);
  auto raw = [&] {
    if (o.op == "all_gather")
      MPI_Allgather(b.chunk.data_ptr(), cn, MPI_FLOAT, b.whole.data_ptr(), cn, MPI_FLOAT,
                    MPI_COMM_WORLD);
    else if (o.op == "reduce_scatter")
      MPI_Reduce_scatter_block(b.whole.data_ptr(), b.chunk.data_ptr(), cn, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
    else
      MPI_Allreduce(MPI_IN_PLACE, b.whole.data_ptr(), cn * world->size(), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
  };
  Timing t;
  // Interleave the two so drift on a shared machine hits both alike.
  double z1 = median_seconds([&] { run_zrt(*world, o, b); }, 2, o.reps);
  double r1 = median_seconds(raw, 2, o.reps);
  double z2 = median_seconds([&] { run_zrt(*world, o, b); }, 0, o.reps);
  double r2 = median_seconds(raw, 0, o.reps);
  t.zrt_s = std::min(z1, z2);
  t.raw_s = std::min(r1, r2);
  // Rank 0 reports the slowest rank's times.
  MPI_Allreduce(MPI_IN_PLACE, &t.zrt_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &t.raw_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}
#endif

}  // namespace

int bench_comm(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  Options o = parse(argc, argv);
  CommPtr world;
  int n = o.ranks;
  if (o.backend == "mpi") {
    world = make_mpi_world();
    n = world->size();
  }
  const std::int64_t chunk_numel = o.bytes / static_cast<std::int64_t>(sizeof(float)) / n;
  ZRT_CHECK_ARG(chunk_numel > 0, "--size ", o.bytes, " is less than one fp32 element a rank (",
                sizeof(float) * static_cast<std::size_t>(n), " bytes on ", n, " ranks)");
  const double bytes = static_cast<double>(chunk_numel * n * sizeof(float));
  Timing t;
  if (o.backend == "local") {
    t = time_local(o, chunk_numel);
  } else {
#ifdef ZRT_WITH_MPI
    t = time_mpi(o, chunk_numel, world);
#endif
  }
  if (world && world->rank() != 0) return 0;
  const double factor = o.op == "all_reduce" ? 2.0 * (n - 1) / n : double(n - 1) / n;
  auto gbps = [&](double s) { return s > 0 ? bytes / s / 1e9 : 0.0; };
  Table table({"backend", "op", "ranks", "bytes", "zrt_us", "zrt_algbw_GBps", "zrt_busbw_GBps",
               "raw_us", "raw_algbw_GBps", "raw_busbw_GBps", "ratio"});
  table.add({o.backend, o.op, std::to_string(n), std::to_string(static_cast<std::int64_t>(bytes)),
             Table::num(t.zrt_s * 1e6, 1), Table::num(gbps(t.zrt_s)),
             Table::num(gbps(t.zrt_s) * factor), Table::num(t.raw_s * 1e6, 1),
             Table::num(gbps(t.raw_s)), Table::num(gbps(t.raw_s) * factor),
             Table::num(t.raw_s > 0 ? t.zrt_s / t.raw_s : 0.0)});
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
