#include "zrt/model_zoo/data/synthetic_data.h"

#include <algorithm>
#include <array>
#include <random>
#include <string_view>

#include "zrt/model_zoo/models/param_init.h"

namespace zrt::model_zoo {
namespace {

// Note [Synthetic text]
// ~~~~~~~~~~~~~~~~~~~~~
// sentence  := Subject Verb Object [Place] "."   (capitalised)
// Subject   := Det [Adj] Noun | Name
// Object    := Det [Adj] Noun
// Place     := Prep Det Noun
// paragraph := 3..6 sentences, then a newline.
// Choices are gen() % n of one std::mt19937_64 (whose sequence the standard
// fixes), so the text is the same on every platform. The small vocabulary
// and fixed structure give a byte-level model a loss that falls quickly.
constexpr std::array<std::string_view, 5> kDets = {"the", "a", "one", "every", "that"};
constexpr std::array<std::string_view, 12> kAdjs = {"small",  "quiet", "red",    "old",
                                                    "bright", "slow",  "clever", "green",
                                                    "tired",  "happy", "tall",   "cold"};
constexpr std::array<std::string_view, 16> kNouns = {
    "cat",   "river", "teacher", "garden", "boat",  "bird",  "window", "farmer",
    "apple", "road",  "child",   "lamp",   "horse", "stone", "letter", "baker"};
constexpr std::array<std::string_view, 6> kNames = {"Anna", "Tom", "Mira", "Leo", "Sara", "Ben"};
constexpr std::array<std::string_view, 12> kVerbs = {"sees",    "finds",   "carries", "paints",
                                                     "follows", "watches", "likes",   "opens",
                                                     "cleans",  "draws",   "visits",  "holds"};
constexpr std::array<std::string_view, 6> kPreps = {"near",   "under",  "behind",
                                                    "beside", "across", "above"};

template <std::size_t N>
std::string_view pick(std::mt19937_64& gen, const std::array<std::string_view, N>& words) {
  return words[gen() % N];
}

void append_noun_phrase(std::string& out, std::mt19937_64& gen) {
  out += pick(gen, kDets);
  out += ' ';
  if (gen() % 2) {
    out += pick(gen, kAdjs);
    out += ' ';
  }
  out += pick(gen, kNouns);
}

void append_sentence(std::string& out, std::mt19937_64& gen) {
  const std::size_t begin = out.size();
  if (gen() % 4 == 0)
    out += pick(gen, kNames);
  else
    append_noun_phrase(out, gen);
  out += ' ';
  out += pick(gen, kVerbs);
  out += ' ';
  append_noun_phrase(out, gen);
  if (gen() % 3 == 0) {
    out += ' ';
    out += pick(gen, kPreps);
    out += ' ';
    out += pick(gen, kDets);
    out += ' ';
    out += pick(gen, kNouns);
  }
  out += '.';
  if (out[begin] >= 'a' && out[begin] <= 'z')
    out[begin] = static_cast<char>(out[begin] - 'a' + 'A');
}

}  // namespace

std::string synthetic_text(std::uint64_t seed, std::size_t min_bytes) {
  std::mt19937_64 gen(seed);
  std::string out;
  out.reserve(min_bytes + 512);
  while (out.size() < min_bytes) {
    const std::uint64_t sentences = 3 + gen() % 4;
    for (std::uint64_t i = 0; i < sentences; ++i) {
      if (i) out += ' ';
      append_sentence(out, gen);
    }
    out += '\n';
  }
  return out;
}

Dataset synthetic_text_dataset(std::uint64_t seed, std::size_t min_bytes) {
  const std::string text = synthetic_text(seed, min_bytes);
  Dataset d;
  d.kind = Dataset::Kind::tokens;
  d.tokens = Tensor::empty({static_cast<std::int64_t>(text.size())}, DType::i32);
  std::transform(text.begin(), text.end(), d.tokens.data<std::int32_t>(),
                 [](char c) { return static_cast<std::int32_t>(static_cast<unsigned char>(c)); });
  // Its tokens are < vocab_size: the largest byte it holds, plus one.
  d.vocab_size = *std::max_element(d.tokens.data<std::int32_t>(),
                                   d.tokens.data<std::int32_t>() + d.tokens.numel()) +
                 1;
  d.source = "synthetic text (seed " + std::to_string(seed) + ")";
  return d;
}

Dataset synthetic_cluster_dataset(std::uint64_t seed, std::int64_t n, std::int64_t d_in,
                                  std::int64_t n_classes) {
  ZRT_CHECK_ARG(n > 0 && d_in > 0 && n_classes > 0, "synthetic clusters: n ", n, ", d_in ", d_in,
                " and n_classes ", n_classes, " must be positive");
  ParamInitStream rng(seed);  // Note [Parameter init stream]: platform-independent normals
  Tensor centres = rng.normal_tensor({n_classes, d_in}, 1.5);
  Dataset d;
  d.kind = Dataset::Kind::rows;
  d.x = Tensor::empty({n, d_in}, DType::f32);
  d.y = Tensor::empty({n}, DType::i64);
  const float* c = centres.data<float>();
  float* x = d.x.data<float>();
  std::int64_t* y = d.y.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::int64_t>(rng.uniform01() * static_cast<double>(n_classes));
    y[i] = std::min(k, n_classes - 1);
    for (std::int64_t j = 0; j < d_in; ++j)
      x[i * d_in + j] = static_cast<float>(c[y[i] * d_in + j] + rng.normal());
  }
  d.n_classes = n_classes;
  d.source = "synthetic clusters (seed " + std::to_string(seed) + ")";
  return d;
}

}  // namespace zrt::model_zoo
