#include "gpu/driver.h"

#include <dlfcn.h>
#include <glob.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include <webgpu/webgpu.h>

#include "gpu/error.h"

// The install's library folder relative to its prefix (GNUInstallDirs'
// CMAKE_INSTALL_LIBDIR), where bin/wgnn finds lib/wgnn/lavapipe.
#ifndef WGNN_INSTALL_LIBDIR
#define WGNN_INSTALL_LIBDIR "lib"
#endif

namespace fs = std::filesystem;

namespace wgnn::gpu {
namespace {

bool exists_glob(const char* pattern) {
  glob_t g{};
  const bool found = glob(pattern, 0, nullptr, &g) == 0 && g.gl_pathc > 0;
  globfree(&g);
  return found;
}

bool has_gpu_device_node() { return exists_glob("/dev/nvidia[0-9]*") || exists_glob("/dev/dri/renderD*"); }

// Whether the bundled lavapipe loads in this process: "" if so, else why
// not (dlerror). The backported lavapipe needs a newer libdrm than the
// system's; loading the bundled copies first (RTLD_GLOBAL) satisfies its
// DT_NEEDED entries by soname, so no LD_LIBRARY_PATH is needed. A wheel
// tagged for an older glibc than lavapipe's own (docs/INSTALL.md, "Wheel")
// carries a lavapipe that cannot load there: that is found here, not in
// the middle of Dawn's start.
const std::string& lavapipe_load_error(const std::string& deps) {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [&] {
    const std::string lib = deps + "/lavapipe/root/usr/lib/x86_64-linux-gnu/";
    for (const char* so : {"libdrm.so.2", "libdrm_amdgpu.so.1"}) {
      const std::string path = lib + so;
      if (fs::exists(path)) dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    const std::string lvp = lib + "libvulkan_lvp.so";
    if (!fs::exists(lvp)) {
      error = lvp + " is missing";
    } else if (void* h = dlopen(lvp.c_str(), RTLD_NOW | RTLD_LOCAL); !h) {
      const char* e = dlerror();
      error = e ? e : "dlopen failed without a message";
    }
  });
  return error;
}

// Points the Vulkan loader at the bundled lavapipe (which must load:
// lavapipe_load_error).
void use_bundled_lavapipe(const std::string& deps) {
  static std::once_flag once;
  const std::string icd = deps + "/lavapipe/lvp_icd.json";
  std::call_once(once, [&] {
    // lavapipe's window-system code looks for a Wayland socket and complains
    // on stderr when XDG_RUNTIME_DIR is unset; compute needs no display.
    setenv("XDG_RUNTIME_DIR", "/tmp", /*overwrite=*/0);
    setenv("VK_DRIVER_FILES", icd.c_str(), 1);
    setenv("VK_ICD_FILENAMES", icd.c_str(), 1);
  });
}

// The file `symbol` was loaded from: libwgnn.so, the executable that carries
// libwgnn.a, or Dawn's library.
fs::path module_of(void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) != 0 && info.dli_fname && info.dli_fname[0] == '/') return fs::path(info.dli_fname);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

}  // namespace

std::string deps_dir(const Settings& settings) {
  std::vector<fs::path> candidates;
  if (auto e = settings.value("WGNN_DEPS_DIR"); !e.empty()) candidates.emplace_back(e);
  std::error_code ec;
  // An install keeps lavapipe in lib/wgnn, beside libwgnn.so and Dawn: found
  // from either (a program linked to libwgnn.a has only Dawn's location), or
  // from bin/wgnn. A build folder inside the checkout: build/wgnn,
  // build/tests/wgnn_tests, with Dawn in .deps/dawn.
  for (void* symbol : {reinterpret_cast<void*>(&choose_vulkan_driver), reinterpret_cast<void*>(&wgpuCreateInstance)}) {
    const fs::path module = fs::canonical(module_of(symbol), ec);
    if (ec || module.empty()) continue;
    const fs::path dir = module.parent_path();
    candidates.push_back(dir / "wgnn");
    candidates.push_back(dir.parent_path() / WGNN_INSTALL_LIBDIR / "wgnn");
    candidates.push_back(dir.parent_path() / ".deps");
    candidates.push_back(dir.parent_path().parent_path() / ".deps");
  }
  for (const auto& c : candidates) {
    if (fs::is_directory(c, ec)) return fs::weakly_canonical(c).string();
  }
  return {};
}

DriverChoice choose_vulkan_driver(const std::string& requested, const Settings& settings, bool retry_with_lavapipe) {
  std::string mode = requested.empty() ? "auto" : requested;
  if (mode != "auto" && mode != "gpu" && mode != "lavapipe") {
    throw Error(fmt::format("unknown adapter choice '{}': accepted are auto, gpu, lavapipe", mode));
  }
  const std::string user_icd = !settings.value("VK_DRIVER_FILES").empty() ? settings.value("VK_DRIVER_FILES")
                                                                         : settings.value("VK_ICD_FILENAMES");
  const std::string deps = deps_dir(settings);
  const bool bundled = !deps.empty() && fs::exists(deps + "/lavapipe/lvp_icd.json");

  if (mode == "lavapipe" || (mode == "auto" && retry_with_lavapipe)) {
    if (!bundled) {
      throw Error(fmt::format(
          "the bundled lavapipe driver was requested but {}/lavapipe/lvp_icd.json is missing: run scripts/setup (it "
          "fetches lavapipe on machines without a GPU driver; WGNN_FORCE_LAVAPIPE=1 fetches it anyway)",
          deps.empty() ? std::string("(no deps folder found)") : deps));
    }
    if (const std::string& e = lavapipe_load_error(deps); !e.empty()) {
      throw Error(fmt::format("the bundled lavapipe (Mesa, Vulkan on the CPU) does not load on this system: {}. "
                              "Install the distribution's Mesa Vulkan drivers (mesa-vulkan-drivers) and use "
                              "--adapter gpu",
                              e));
    }
    use_bundled_lavapipe(deps);
    return {"lavapipe", fmt::format("bundled lavapipe (Mesa, Vulkan on the CPU) from {}/lavapipe", deps)};
  }
  if (mode == "auto" && !user_icd.empty()) {
    return {"environment", fmt::format("Vulkan driver named by the environment ({})", user_icd)};
  }
  if (mode == "auto" && !has_gpu_device_node() && bundled) {
    if (const std::string& e = lavapipe_load_error(deps); !e.empty()) {
      return {"gpu", fmt::format("the machine's Vulkan drivers (no GPU device; the bundled lavapipe does not load "
                                 "here: {})",
                                 e)};
    }
    use_bundled_lavapipe(deps);
    return {"lavapipe",
            fmt::format("no GPU device on this machine: bundled lavapipe (Mesa, Vulkan on the CPU) from {}/lavapipe",
                        deps)};
  }
  return {"gpu", "the machine's Vulkan driver"};
}

}  // namespace wgnn::gpu
