#include "zrt/kernels/nn/id_check.h"

#include <string>

#include "zrt/kernels/ops/fill.h"

namespace zrt::kernels {

BadIds decode_id_flag(const std::int64_t* words) {
  BadIds b;
  b.count = words[0];
  if (b.count == 0) return b;
  const auto key = static_cast<std::uint64_t>(words[1]);
  b.position = std::int64_t(0x7fffffff) - static_cast<std::int64_t>(key >> 32);
  b.id = static_cast<std::int32_t>(static_cast<std::uint32_t>(key & 0xffffffffu));
  b.sources = static_cast<unsigned>(words[2]);
  return b;
}

BadIds combine_id_flags(const std::int64_t* words, int ranks) {
  BadIds all;
  std::uint64_t first_key = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t* w = words + std::int64_t(r) * kIdFlagWords;
    if (w[0] == 0) continue;
    all.count += w[0];
    all.sources |= static_cast<unsigned>(w[2]);
    const auto key = static_cast<std::uint64_t>(w[1]);
    if (key > first_key) {  // a larger key is a smaller position
      first_key = key;
      const BadIds b = decode_id_flag(w);
      all.position = b.position;
      all.id = b.id;
      all.rank = r;
    }
  }
  return all;
}

void throw_if_bad_ids(const Tensor& host_flags, std::int64_t vocab) {
  ZRT_CHECK_ARG(host_flags.device().is_cpu() && host_flags.dtype() == DType::i64 &&
                    host_flags.numel() > 0 && host_flags.numel() % kIdFlagWords == 0,
                "throw_if_bad_ids: ", host_flags.str(), " must hold host i64 id flags of ",
                kIdFlagWords, " words each");
  const int ranks = static_cast<int>(host_flags.numel() / kIdFlagWords);
  const BadIds b = combine_id_flags(host_flags.data<std::int64_t>(), ranks);
  if (b.count == 0) return;
  std::string kinds;
  if (b.sources & unsigned(IdSource::token)) kinds = "token ids";
  if (b.sources & unsigned(IdSource::target)) kinds += kinds.empty() ? "targets" : " and targets";
  ZRT_CHECK_ARG(false, "token id out of range [0, ", vocab, "): ", b.count, " failed checks in ",
                kinds.empty() ? "ids" : kinds, "; the first: id ", b.id, " at position ",
                b.position, " of its micro-batch",
                ranks > 1 ? " on rank " + std::to_string(b.rank) : std::string());
}

void check_id_flag(const char* op, const Tensor& flag, const Device& device) {
  ZRT_CHECK_ARG(flag.dtype() == DType::i64 && flag.numel() == kIdFlagWords, op, ": id flag ",
                flag.str(), " must be i64 with ", kIdFlagWords, " elements");
  ZRT_CHECK_ARG(device.is_cpu() || flag.device() == device, op, ": id flag ", flag.str(),
                " is not on ", device);
}

Tensor new_id_flag(const Device& device, AllocatorPtr allocator, Stream stream) {
  Tensor flag = Tensor::empty({kIdFlagWords}, DType::i64, device, std::move(allocator), stream);
  zero(flag, stream);
  return flag;
}

}  // namespace zrt::kernels
