// Flatten is a composition of the cast and fill kernels over views of the
// flat buffer: one launch per part and per gap, no kernel of its own.
#include "zrt/kernels/ops/flatten.h"

#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/op_checks.h"

namespace zrt::kernels {
namespace {

// Checks the layout: as many offsets as parts, increasing, non-overlapping,
// inside `flat`, everything on one device.
void check_layout(const char* op, const Tensor& flat, std::span<const Tensor> parts,
                  std::span<const std::int64_t> offsets, Stream stream) {
  ZRT_CHECK_ARG(parts.size() == offsets.size(), op, ": ", parts.size(), " parts but ",
                offsets.size(), " offsets");
  check_operands(op, {flat}, stream);
  std::int64_t end = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    check_operands(op, {flat, parts[k]}, stream);
    ZRT_CHECK_ARG(offsets[k] >= 0, op, ": part ", k, " (", parts[k].str(), ") at negative offset ",
                  offsets[k]);
    ZRT_CHECK_ARG(offsets[k] >= end, op, ": part ", k, " (", parts[k].str(), ") at offset ",
                  offsets[k], " overlaps the previous part, which ends at ", end);
    end = offsets[k] + parts[k].numel();
    ZRT_CHECK_ARG(end <= flat.numel(), op, ": part ", k, " (", parts[k].str(), ") at offset ",
                  offsets[k], " runs past the end of ", flat.str());
  }
}

}  // namespace

void flatten_into(const Tensor& flat, std::span<const Tensor> parts,
                  std::span<const std::int64_t> offsets, Stream stream) {
  check_layout("flatten_into", flat, parts, offsets, stream);
  const Tensor flat1d = flat.flatten();
  std::int64_t pos = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (offsets[k] > pos) zero(flat1d.slice(pos, offsets[k] - pos), stream);
    cast(flat1d.slice(offsets[k], parts[k].numel()), parts[k], stream);
    pos = offsets[k] + parts[k].numel();
  }
  if (flat1d.numel() > pos) zero(flat1d.slice(pos, flat1d.numel() - pos), stream);
}

void unflatten_from(std::span<const Tensor> parts, const Tensor& flat,
                    std::span<const std::int64_t> offsets, Stream stream) {
  check_layout("unflatten_from", flat, parts, offsets, stream);
  const Tensor flat1d = flat.flatten();
  for (std::size_t k = 0; k < parts.size(); ++k)
    cast(parts[k], flat1d.slice(offsets[k], parts[k].numel()), stream);
}

}  // namespace zrt::kernels
