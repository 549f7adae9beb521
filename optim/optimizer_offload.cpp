#include "zrt/optim/optimizer_offload.h"

#include "zrt/runtime/error.h"
#include "zrt/runtime/io/scratch_file.h"

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

void check_optimizer_offload(const OptimizerOffload& offload, bool dry_run) {
  ZRT_CHECK_ARG(offload.str() != "?", "optimizer offload code ", static_cast<int>(offload.kind),
                " is none of none, host, disk");
  if (offload.kind != OptimizerOffload::Kind::disk) {
    ZRT_CHECK_ARG(offload.dir.empty(), "optimizer offload ", offload.str(),
                  " writes no files: dir '", offload.dir,
                  "' would be ignored (disk offload takes it)");
    return;
  }
  ZRT_CHECK_ARG(offload.chunk_elements > 0, "optimizer offload ", offload.str(), ": chunk of ",
                offload.chunk_elements, " elements (must be at least 1)");
  if (!dry_run) check_scratch_dir(offload.dir);
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
