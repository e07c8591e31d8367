#pragma once
// Choosing the Vulkan driver before Dawn starts, with no variable set by the
// user: the machine's GPU driver when one exists, otherwise the lavapipe
// (Mesa's Vulkan on the CPU) that scripts/setup placed in .deps/lavapipe.
#include <string>

namespace wgnn::gpu {

struct DriverChoice {
  std::string mode;         // "gpu", "lavapipe" or "environment"
  std::string description;  // for `wgnn info`
};

// Resolves `requested` ("", "auto", "gpu", "lavapipe"; "" reads WGNN_ADAPTER)
// and prepares the process for it (for lavapipe: VK_DRIVER_FILES and the
// bundled libdrm). Throws wgnn::Error for an unknown mode or a missing driver.
DriverChoice choose_vulkan_driver(const std::string& requested, bool retry_with_lavapipe = false);

// Folder where scripts/setup put Dawn and lavapipe; "" if none found.
std::string deps_dir();

}  // namespace wgnn::gpu
