#include "zrt/model_zoo/data/micro_batch.h"

#include <numeric>

namespace zrt::model_zoo {

void check_batch_geometry(const Dataset& data, const BatchGeometry& g) {
  ZRT_CHECK_ARG(g.batch > 0 && g.world > 0 && g.micro > 0, "batch size ", g.batch, ", world ",
                g.world, " and micro-batch count ", g.micro, " must be positive");
  ZRT_CHECK_ARG(g.batch % (static_cast<std::int64_t>(g.world) * g.micro) == 0, "batch size ",
                g.batch, " is not divisible by world size ", g.world, " × micro-batches ", g.micro);
  if (data.kind == Dataset::Kind::tokens) {
    ZRT_CHECK_ARG(g.seq_len > 0, "sequence length ", g.seq_len, " must be positive");
    ZRT_CHECK_ARG(data.tokens.numel() >= g.seq_len + 1, "sequence length ", g.seq_len,
                  " is too long for data ", data.source, " of ", data.tokens.numel(),
                  " tokens (needs at least seq_len + 1)");
  } else {
    ZRT_CHECK_ARG(data.y.numel() > 0, "data ", data.source, " has no rows");
  }
}

std::int64_t sequence_start(std::int64_t step, std::int64_t j, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t data_len) {
  const std::int64_t span = data_len - seq_len;  // the windows of T inputs and T targets
  // (s·B + j)·T mod span, reduced stepwise so large steps do not overflow.
  const std::int64_t seq = ((step % span) * (batch % span) + j) % span;
  return static_cast<std::int64_t>((static_cast<__int128>(seq) * seq_len) % span);
}

std::int64_t tail_never_a_target(std::int64_t seq_len, std::int64_t data_len) {
  return std::gcd(seq_len, data_len) - 1;  // starts step by the gcd, which divides len − T
}

Batch make_micro_batch(const Dataset& data, std::int64_t step, const BatchGeometry& g, int rank,
                       int micro_index, Device device) {
  check_batch_geometry(data, g);
  ZRT_CHECK_ARG(step >= 0, "step ", step, " must be non-negative");
  ZRT_CHECK_ARG(rank >= 0 && rank < g.world, "rank ", rank, " is not in [0, ", g.world, ")");
  ZRT_CHECK_ARG(micro_index >= 0 && micro_index < g.micro, "micro-batch ", micro_index,
                " is not in [0, ", g.micro, ")");
  const std::int64_t b = g.batch / (static_cast<std::int64_t>(g.world) * g.micro);
  const std::int64_t first = rank * (g.batch / g.world) + micro_index * b;
  Batch out;
  if (data.kind == Dataset::Kind::tokens) {
    const std::int64_t T = g.seq_len, len = data.tokens.numel();
    Tensor in = Tensor::empty({b, T}, DType::i32), tg = Tensor::empty({b, T}, DType::i32);
    const std::int32_t* tok = data.tokens.data<std::int32_t>();
    for (std::int64_t i = 0; i < b; ++i) {
      const std::int64_t start = sequence_start(step, first + i, g.batch, T, len);
      for (std::int64_t t = 0; t < T; ++t) {
        in.data<std::int32_t>()[i * T + t] = tok[start + t];
        tg.data<std::int32_t>()[i * T + t] = tok[start + t + 1];
      }
    }
    out.inputs = in.to(device);
    out.targets = tg.to(device);
    out.normaliser = static_cast<double>(g.batch * T);
  } else {
    const std::int64_t n = data.y.numel(), d_in = data.x.size(1);
    Tensor in = Tensor::empty({b, d_in}, DType::f32), tg = Tensor::empty({b}, DType::i64);
    for (std::int64_t i = 0; i < b; ++i) {
      const std::int64_t row = ((step % n) * (g.batch % n) + first + i) % n;
      in.narrow(i, 1).copy_(data.x.narrow(row, 1));
      tg.data<std::int64_t>()[i] = data.y.data<std::int64_t>()[row];
    }
    out.inputs = in.to(device);
    out.targets = tg.to(device);
    out.normaliser = static_cast<double>(g.batch);
  }
  return out;
}

Batch make_micro_batch(const Dataset& data, std::int64_t step, std::int64_t batch,
                       std::int64_t seq_len, int world, int rank, int micro, int micro_index,
                       Device device) {
  return make_micro_batch(data, step, BatchGeometry{batch, seq_len, world, micro}, rank,
                          micro_index, device);
}

}  // namespace zrt::model_zoo
