#include "gpu/dispatch.h"

#include <fmt/format.h>

#include "gpu/error.h"

namespace wgnn::gpu {

Grid RowDispatchGrid(uint64_t workgroups, uint32_t max_per_dim) {
  if (workgroups == 0) return Grid{0, 1, 1};
  const uint64_t m = max_per_dim;
  if (workgroups <= m) return Grid{uint32_t(workgroups), 1, 1};
  const uint64_t y = ceil_div(workgroups, m);
  if (y <= m) {
    // Keep x as small as possible for the given y so few workgroups idle.
    return Grid{uint32_t(ceil_div(workgroups, y)), uint32_t(y), 1};
  }
  const uint64_t z = ceil_div(workgroups, m * m);
  if (z > m) {
    throw Error(fmt::format("dispatch of {} workgroups exceeds the device's grid of {}^3", workgroups, m));
  }
  return Grid{uint32_t(m), uint32_t(m), uint32_t(z)};
}

}  // namespace wgnn::gpu
