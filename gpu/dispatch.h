#pragma once
// Folding a flat count of workgroups into a dispatch grid. A WebGPU dispatch
// allows at most maxComputeWorkgroupsPerDimension (65535 by default) in each
// dimension, so large counts spread over y (and z); kernels decode the flat
// index as wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y and skip the
// surplus workgroups of the last row.
#include <cstdint>

namespace wgnn::gpu {

struct Grid {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

// A grid of at least `workgroups` workgroups with every dimension within
// `max_per_dim`. Throws wgnn::Error if even x*y*z cannot hold it.
Grid RowDispatchGrid(uint64_t workgroups, uint32_t max_per_dim);

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace wgnn::gpu
