#include "zrt/model_zoo/models/model_config.h"

#include "zrt/runtime/error.h"

namespace zrt::model_zoo {
namespace {

void check_kind(const ModelConfig& c, const char* kind) {
  ZRT_CHECK_ARG(c.kind == kind, "model config: kind '", c.kind, "' is not '", kind, "'");
}

// Every dimension is an int32 (tokens are int32), so the products of two fit
// in 64 bits and a padded vocabulary cannot overflow.
void check_positive(const char* field, std::int64_t v) {
  ZRT_CHECK_ARG(v > 0, "model config: ", field, " must be positive, got ", v);
  ZRT_CHECK_ARG(v <= std::int64_t{2147483647}, "model config: ", field, " ", v,
                " is above 2147483647, the largest a dimension may be");
}

// A model past 2^48 parameters (about 281 trillion) is a typo, and its
// tensors' element counts could overflow 64 bits: refused by its sizes.
void check_parameter_count(long double params, const char* fields) {
  constexpr long double kMost = 281474976710656.0L;  // 2^48
  ZRT_CHECK_ARG(params <= kMost, "model config: ", fields, " make about ",
                static_cast<double>(params), " parameters, more than 2^48 (about 2.8e14)");
}

}  // namespace

GptDims resolve_gpt_dims(const ModelConfig& c) {
  check_kind(c, "gpt");
  GptDims d;
  if (c.preset == "tiny")
    d = {2, 2, 32, 256, 64};
  else if (c.preset == "small")
    d = {4, 4, 128, 256, 256};
  else if (c.preset == "gpt2-124m")
    d = {12, 12, 768, 50257, 1024};
  else
    ZRT_THROW(InvalidArgument, "model config: unknown gpt preset '", c.preset,
              "' (tiny, small, gpt2-124m)");
  d.n_layer = c.n_layer.value_or(d.n_layer);
  d.n_head = c.n_head.value_or(d.n_head);
  d.n_embd = c.n_embd.value_or(d.n_embd);
  d.vocab_size = c.vocab_size.value_or(d.vocab_size);
  d.block_size = c.block_size.value_or(d.block_size);
  check_positive("n_layer", d.n_layer);
  check_positive("n_head", d.n_head);
  check_positive("n_embd", d.n_embd);
  check_positive("vocab_size", d.vocab_size);
  check_positive("block_size", d.block_size);
  ZRT_CHECK_ARG(c.vocab_align >= 1 && c.vocab_align <= (std::int64_t{1} << 20),
                "model config: vocab_align ", c.vocab_align, " is not in [1, 2^20]");
  d.padded_vocab_size = (d.vocab_size + c.vocab_align - 1) / c.vocab_align * c.vocab_align;
  ZRT_CHECK_ARG(d.n_embd % d.n_head == 0, "model config: n_embd ", d.n_embd,
                " is not divisible by n_head ", d.n_head);
  // Counted in long double: the sizes' products may overflow 64 bits.
  const long double width = static_cast<long double>(d.n_embd);
  check_parameter_count(12.0L * static_cast<long double>(d.n_layer) * width * width +
                            static_cast<long double>(d.padded_vocab_size + d.block_size) * width,
                        "n_layer, n_embd, vocab_size and block_size");
  return d;
}

MlpDims resolve_mlp_dims(const ModelConfig& c) {
  check_kind(c, "mlp");
  MlpDims d;
  if (c.preset == "tiny")
    d = {16, {64, 64}, 8, "gelu"};
  else
    ZRT_THROW(InvalidArgument, "model config: unknown mlp preset '", c.preset, "' (tiny)");
  d.d_in = c.d_in.value_or(d.d_in);
  d.hidden = c.hidden.value_or(d.hidden);
  d.n_classes = c.n_classes.value_or(d.n_classes);
  d.activation = c.activation.value_or(d.activation);
  check_positive("d_in", d.d_in);
  for (std::int64_t h : d.hidden) check_positive("hidden width", h);
  check_positive("n_classes", d.n_classes);
  ZRT_CHECK_ARG(d.activation == "gelu" || d.activation == "relu", "model config: activation '",
                d.activation, "' is not gelu or relu");
  long double params = 0, in = static_cast<long double>(d.d_in);
  for (std::int64_t h : d.hidden) {
    params += (in + 1) * static_cast<long double>(h);
    in = static_cast<long double>(h);
  }
  params += (in + 1) * static_cast<long double>(d.n_classes);
  check_parameter_count(params, "d_in, hidden width and n_classes");
  return d;
}

void validate_model_config(const ModelConfig& c) {
  ZRT_CHECK_ARG(c.kind == "gpt" || c.kind == "mlp", "model config: unknown kind '", c.kind,
                "' (gpt, mlp)");
  ZRT_CHECK_ARG(is_floating(c.dtype), "model config: compute dtype ", dtype_name(c.dtype),
                " is not a floating type");
  ZRT_CHECK_ARG(!c.head_unit || c.kind == "gpt", "model config: a head unit is a gpt layout, not ",
                c.kind, "'s");
  if (c.kind == "gpt")
    resolve_gpt_dims(c);
  else
    resolve_mlp_dims(c);
}

}  // namespace zrt::model_zoo
