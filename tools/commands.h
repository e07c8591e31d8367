#pragma once
// Subcommands of the wgnn CLI that are more than a few lines.
#include <cstdint>

#include "gpu/context.h"

namespace wgnn::tools {

struct BenchCopyOptions {
  uint64_t mib = 256;
  int iters = 20;
  int reps = 5;
  bool json = false;
};
int bench_copy(gpu::Context& ctx, const BenchCopyOptions& o);
int selfcheck(gpu::Context& ctx);

}  // namespace wgnn::tools
