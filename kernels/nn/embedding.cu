#include <cub/device/device_radix_sort.cuh>

#include <climits>

#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/embedding.cuh"
#include "zrt/kernels/nn/embedding_math.h"
#include "zrt/kernels/nn/id_check.cuh"
#include "zrt/kernels/nn/id_check.h"

namespace zrt::kernels::cuda {
namespace {

// A bad id (possible only with a flag: the host checked otherwise) reads no
// table row: its output row is the position embedding alone.
template <class T, class I>
struct EmbeddingForwardBody {
  std::int64_t channels, seq, vocab;
  const I* ids;
  const T* wte;
  const T* wpe;
  T* out;
  unsigned long long* flag;
  __device__ void operator()(std::int64_t idx) const {
    const std::int64_t i = idx / channels, c = idx % channels;
    const std::int64_t id = static_cast<std::int64_t>(ids[i]);
    if (id < 0 || id >= vocab) {
      if (c == 0 && flag) record_bad_id(flag, i, id, unsigned(IdSource::token));
      using A = acc_t<T>;
      out[idx] = store<T>(wpe ? load<A>(wpe[(i % seq) * channels + c]) : A(0));
      return;
    }
    embedding_forward_element<T, I, acc_t<T>>(idx, channels, seq, ids, wte, wpe, out);
  }
};

// Records the bad ids of `ids` in `flag` (the simple backward's check).
template <class I>
struct CheckIdsBody {
  std::int64_t vocab;
  const I* ids;
  unsigned long long* flag;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t id = static_cast<std::int64_t>(ids[i]);
    if (id < 0 || id >= vocab) record_bad_id(flag, i, id, unsigned(IdSource::token));
  }
};

// The sort's input: key = the token (vocab for a bad id, a bucket past the
// table that no gradient row reads), value = the position.
template <class I>
struct TokenKeysBody {
  std::int64_t vocab;
  const I* ids;
  int* keys;
  std::int64_t* positions;
  unsigned long long* flag;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t id = static_cast<std::int64_t>(ids[i]);
    const bool bad = id < 0 || id >= vocab;
    if (bad && flag) record_bad_id(flag, i, id, unsigned(IdSource::token));
    keys[i] = static_cast<int>(bad ? vocab : id);
    positions[i] = i;
  }
};

// offsets[v] = the first index of the sorted keys not below v (v <= vocab).
struct TokenOffsetsBody {
  std::int64_t n;
  const int* sorted_keys;
  std::int64_t* offsets;
  __device__ void operator()(std::int64_t v) const {
    std::int64_t lo = 0, hi = n;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (sorted_keys[mid] < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    offsets[v] = lo;
  }
};

// The bits of a key in [0, vocab].
int key_bits(std::int64_t vocab) {
  int bits = 1;
  while (bits < 31 && (std::int64_t(1) << bits) <= vocab) ++bits;
  return bits;
}

constexpr std::size_t kScratchAlign = 256;
std::size_t aligned(std::size_t bytes) {
  return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

std::size_t sort_temp_bytes(std::int64_t n, std::int64_t vocab, cudaStream_t stream) {
  std::size_t bytes = 0;
  ZRT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const int*>(nullptr), static_cast<int*>(nullptr),
      static_cast<const std::int64_t*>(nullptr), static_cast<std::int64_t*>(nullptr),
      static_cast<int>(n), 0, key_bits(vocab), stream));
  return bytes;
}

template <class T>
struct TokenGradBody {
  std::int64_t channels;
  const std::int64_t* offsets;
  const std::int64_t* rows;
  const T* dout;
  T* dwte;
  bool accumulate;
  __device__ void operator()(std::int64_t idx) const {
    token_grad_element<T, acc_t<T>>(idx, channels, offsets, rows, dout, dwte, accumulate);
  }
};

template <class T>
struct PositionGradBody {
  std::int64_t channels, batch, seq;
  const T* dout;
  T* dwpe;
  bool accumulate;
  __device__ void operator()(std::int64_t idx) const {
    position_grad_element<T, acc_t<T>>(idx, channels, batch, seq, dout, dwpe, accumulate);
  }
};

}  // namespace

void launch_embedding_forward(DType dtype, std::int64_t n, std::int64_t channels, std::int64_t seq,
                              std::int64_t vocab, const void* ids, DType ids_dtype, const void* wte,
                              const void* wpe, void* out, unsigned long long* flag,
                              cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "embedding_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch<IdTypes>(ids_dtype, "embedding_forward", [&](auto id_tag) {
      using I = typename decltype(id_tag)::type;
      for_each_index(
          n * channels,
          EmbeddingForwardBody<T, I>{channels, seq, vocab, static_cast<const I*>(ids),
                                     static_cast<const T*>(wte), static_cast<const T*>(wpe),
                                     static_cast<T*>(out), flag},
          stream);
    });
  });
}

void launch_embedding_check_ids(std::int64_t n, std::int64_t vocab, const void* ids,
                                DType ids_dtype, unsigned long long* flag, cudaStream_t stream) {
  dispatch<IdTypes>(ids_dtype, "embedding_backward", [&](auto id_tag) {
    using I = typename decltype(id_tag)::type;
    for_each_index(n, CheckIdsBody<I>{vocab, static_cast<const I*>(ids), flag}, stream);
  });
}

std::size_t embedding_group_scratch_bytes(std::int64_t n, std::int64_t vocab, cudaStream_t stream) {
  const auto un = static_cast<std::size_t>(n);
  return 2 * aligned(un * sizeof(int)) + 2 * aligned(un * sizeof(std::int64_t)) +
         aligned((static_cast<std::size_t>(vocab) + 1) * sizeof(std::int64_t)) +
         aligned(sort_temp_bytes(n, vocab, stream));
}

TokenGroupsDev launch_embedding_group_tokens(std::int64_t n, std::int64_t vocab, const void* ids,
                                             DType ids_dtype, void* scratch,
                                             std::size_t scratch_bytes, unsigned long long* flag,
                                             cudaStream_t stream) {
  const auto un = static_cast<std::size_t>(n);
  char* p = static_cast<char*>(scratch);
  auto carve = [&](std::size_t bytes) {
    char* q = p;
    p += aligned(bytes);
    return q;
  };
  int* keys_in = reinterpret_cast<int*>(carve(un * sizeof(int)));
  int* keys_out = reinterpret_cast<int*>(carve(un * sizeof(int)));
  auto* pos_in = reinterpret_cast<std::int64_t*>(carve(un * sizeof(std::int64_t)));
  auto* pos_out = reinterpret_cast<std::int64_t*>(carve(un * sizeof(std::int64_t)));
  auto* offsets = reinterpret_cast<std::int64_t*>(
      carve((static_cast<std::size_t>(vocab) + 1) * sizeof(std::int64_t)));
  std::size_t temp_bytes = sort_temp_bytes(n, vocab, stream);
  void* temp = carve(temp_bytes);
  ZRT_CHECK_ARG(static_cast<std::size_t>(p - static_cast<char*>(scratch)) <= scratch_bytes,
                "embedding_backward: the grouping scratch of ", scratch_bytes,
                " bytes is too small");
  dispatch<IdTypes>(ids_dtype, "embedding_backward", [&](auto id_tag) {
    using I = typename decltype(id_tag)::type;
    for_each_index(n, TokenKeysBody<I>{vocab, static_cast<const I*>(ids), keys_in, pos_in, flag},
                   stream);
  });
  // Stable: equal tokens keep their positions ascending (Note [Deterministic
  // embedding gradient]).
  if (n > 0) {
    ZRT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, pos_in,
                                                   pos_out, static_cast<int>(n), 0, key_bits(vocab),
                                                   stream));
  }
  for_each_index(vocab + 1, TokenOffsetsBody{n, keys_out, offsets}, stream);
  return {offsets, pos_out};
}

void launch_embedding_backward(DType dtype, std::int64_t vocab, std::int64_t positions,
                               std::int64_t batch, std::int64_t seq, std::int64_t channels,
                               const std::int64_t* offsets, const std::int64_t* rows,
                               const void* dout, void* dwte, void* dwpe, bool accumulate,
                               cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "embedding_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_index(vocab * channels,
                   TokenGradBody<T>{channels, offsets, rows, static_cast<const T*>(dout),
                                    static_cast<T*>(dwte), accumulate},
                   stream);
    if (dwpe) {
      for_each_index(positions * channels,
                     PositionGradBody<T>{channels, batch, seq, static_cast<const T*>(dout),
                                         static_cast<T*>(dwpe), accumulate},
                     stream);
    }
  });
}

}  // namespace zrt::kernels::cuda
