#pragma once
// What `wgnn info --json` prints and `wgnn.get_device_info()` returns: the
// adapter, backend, driver, features and limits of a Context, as one JSON
// object (two-space indented).
#include <string>

#include "gpu/context.h"

namespace wgnn::gpu {

std::string describe_json(const Context& ctx);

}  // namespace wgnn::gpu
