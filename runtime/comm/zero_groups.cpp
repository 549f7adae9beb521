#include "zrt/runtime/comm/zero_groups.h"

#include "zrt/runtime/error.h"

namespace zrt {

ZeroGroups make_zero_groups(const CommPtr& world, int zero3_size) {
  ZRT_CHECK_ARG(world != nullptr, "make_zero_groups: no world communicator");
  const int w = world->size();
  ZRT_CHECK_ARG(zero3_size >= 1 && w % zero3_size == 0, "make_zero_groups: zero3 size ", zero3_size,
                " does not divide the size ", w, " of group ", world->name());
  const int r = world->rank();
  ZeroGroups g;
  g.zero1 = world;
  g.zero3 = world->split(r / zero3_size, r,
                         detail::concat(world->name(), "/zero3(", r / zero3_size, ")"));
  g.replica = world->split(r % zero3_size, r,
                           detail::concat(world->name(), "/replica(", r % zero3_size, ")"));
  return g;
}

}  // namespace zrt
