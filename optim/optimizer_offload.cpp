#include "zrt/optim/optimizer_offload.h"

#include "zrt/runtime/error.h"

namespace zrt::optim {

std::string OptimizerOffload::str() const {
  switch (kind) {
    case Kind::none:
      return "none";
    case Kind::host:
      return "host";
    case Kind::disk:
      return "disk:" + dir;
  }
  return "?";
}

OptimizerOffload parse_optimizer_offload(const std::string& text) {
  OptimizerOffload o;
  if (text == "none") return o;
  if (text == "host") {
    o.kind = OptimizerOffload::Kind::host;
    return o;
  }
  if (text.starts_with("disk:") && text.size() > 5) {
    o.kind = OptimizerOffload::Kind::disk;
    o.dir = text.substr(5);
    return o;
  }
  ZRT_THROW(InvalidArgument, "optimizer offload '", text, "' is not one of none, host, disk:DIR");
}

}  // namespace zrt::optim
