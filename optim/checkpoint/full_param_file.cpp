#include "zrt/optim/checkpoint/full_param_file.h"

#include <exception>
#include <optional>

#include "zrt/optim/checkpoint/checkpoint_agreement.h"
#include "zrt/runtime/io/safetensors_writer.h"

namespace zrt::optim {

namespace {

// One exchange of `failed`'s error: this rank rethrows its own (with its
// type), the others throw CheckpointError naming `what` and the first rank.
void agree_rethrowing(Communicator& world, const std::exception_ptr& failed,
                      const std::string& what) {
  const std::string error = error_of([&] {
    if (failed) std::rethrow_exception(failed);
  });
  if (!failed) return agree(world, error, what);
  exchange_texts(world, error);
  std::rethrow_exception(failed);
}

// The first name, in name order, of a parameter holding NaN or Inf on any rank.
std::optional<std::string> first_non_finite(ZeroModule& module) {
  std::string mine;
  for (const auto& h : module.handles())
    for (std::size_t i : h->non_finite_params())
      if (mine.empty() || h->fqn(i) < mine) mine = h->fqn(i);
  std::optional<std::string> first;
  for (const std::string& name : exchange_texts(*module.world(), mine)) {
    if (!name.empty() && (!first || name < *first)) first = name;
  }
  return first;
}

}  // namespace

std::size_t save_full_params(ZeroModule& module, const std::string& path, const std::string& what,
                             std::int64_t chunk_elements) {
  Communicator& world = *module.world();
  const bool lead = world.rank() == 0;
  if (const auto bad = first_non_finite(module))
    ZRT_THROW(ResourceError, what, ": parameter '", *bad,
              "' holds NaN or Inf values; a file of them would only resume to NaN losses, "
              "so it was not written");
  std::map<std::string, SafetensorsSpec> specs;
  for (const auto& h : module.handles())
    for (std::size_t i = 0; i < h->num_params(); ++i)
      specs[h->fqn(i)] = {DType::f32, h->layout().params()[i].shape};
  std::optional<SafetensorsWriter> out;
  std::exception_ptr failed;
  try {
    if (lead) out.emplace(path, specs);
  } catch (...) {
    failed = std::current_exception();
  }
  agree_rethrowing(world, failed, what);
  // A failed write on rank 0 stops its writing, not the gathers the other
  // ranks are in; the error is agreed on after the last one.
  for (const auto& h : module.handles())
    h->gather_full_params(
        [&](std::size_t i, std::int64_t first, std::int64_t count, const float* data) {
          if (!lead || failed) return;
          try {
            out->write_elements(h->fqn(i), first, count, data);
          } catch (...) {
            failed = std::current_exception();
          }
        },
        chunk_elements);
  try {
    if (lead && !failed) out->commit();
  } catch (...) {
    failed = std::current_exception();
  }
  out.reset();  // an uncommitted temporary goes before the error is thrown
  agree_rethrowing(world, failed, what);
  return specs.size();
}

}  // namespace zrt::optim
