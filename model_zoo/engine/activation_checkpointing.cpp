#include "zrt/model_zoo/engine/activation_checkpointing.h"

#include <charconv>

#include "zrt/runtime/error.h"

namespace zrt::model_zoo {

std::string ActivationCheckpointing::str() const {
  if (every <= 0) return "none";
  if (every == 1) return "blocks";
  return "every:" + std::to_string(every);
}

ActivationCheckpointing parse_activation_checkpointing(const std::string& text) {
  if (text == "none") return {0};
  if (text == "blocks") return {1};
  const std::string prefix = "every:";
  if (text.starts_with(prefix)) {
    int n = 0;
    const char* first = text.data() + prefix.size();
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(first, last, n);
    if (ec == std::errc() && end == last && first != last && n >= 1) return {n};
  }
  ZRT_THROW(InvalidArgument, "activation checkpointing '", text,
            "' is not one of none, blocks, every:N (N >= 1: one block in N)");
}

}  // namespace zrt::model_zoo
