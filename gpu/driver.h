#pragma once
// Choosing the Vulkan driver before Dawn starts, with no variable set by the
// user: the machine's GPU driver when one exists, otherwise the lavapipe
// (Mesa's Vulkan on the CPU) that scripts/setup placed in .deps/lavapipe.
#include <string>

#include "util/settings.h"

namespace wgnn::gpu {

struct DriverChoice {
  std::string mode;         // "gpu", "lavapipe" or "environment"
  std::string description;  // for `wgnn info`
};

// Resolves `requested` ("", "auto", "gpu", "lavapipe"; "" is "auto") and
// prepares the process for it (for lavapipe: VK_DRIVER_FILES and the bundled
// libdrm). `settings`: VK_DRIVER_FILES (or VK_ICD_FILENAMES) the user chose,
// WGNN_DEPS_DIR. Throws wgnn::Error for an unknown mode or a missing driver.
DriverChoice choose_vulkan_driver(const std::string& requested, const Settings& settings,
                                  bool retry_with_lavapipe = false);

// Folder where scripts/setup put Dawn and lavapipe (WGNN_DEPS_DIR in
// `settings`, else found beside the library); "" if none found.
std::string deps_dir(const Settings& settings);

}  // namespace wgnn::gpu
