#pragma once
// One Context for the whole test binary: creating a device on lavapipe takes
// a moment, and the pipeline cache is per Context.
#include "gpu/context.h"

namespace wgnn::test {

inline gpu::Context& ctx() {
  static gpu::Context* c = new gpu::Context();  // lives for the process
  return *c;
}

}  // namespace wgnn::test
