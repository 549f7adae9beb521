// Data sets zrt generates itself, deterministically from a seed, so training
// runs and tests need no data files.
#pragma once

#include <cstdint>
#include <string>

#include "zrt/model_zoo/data/dataset.h"

namespace zrt::model_zoo {

// English-like text from a fixed word list and a small sentence grammar
// (Note [Synthetic text]): at least min_bytes bytes.
std::string synthetic_text(std::uint64_t seed = 0, std::size_t min_bytes = 32 * 1024);

// synthetic_text as byte tokens (vocab 256).
Dataset synthetic_text_dataset(std::uint64_t seed = 0, std::size_t min_bytes = 32 * 1024);

// Gaussian clusters: n_classes centres drawn from normal(0, 1.5²) per
// coordinate; each row picks a class and adds normal(0, 1) noise to its
// centre. Learnable, with overlap so the loss does not reach zero at once.
Dataset synthetic_cluster_dataset(std::uint64_t seed = 0, std::int64_t n = 4096,
                                  std::int64_t d_in = 16, std::int64_t n_classes = 8);

}  // namespace zrt::model_zoo
