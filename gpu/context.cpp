#include "gpu/context.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gpu/adapter_enum.h"
#include "gpu/context_impl.h"
#include "gpu/dawn_values.h"
#include "gpu/driver.h"
#include "gpu/shaders.h"
#include "util/file.h"

#if WGNN_DAWN_NODE
// gpu/dawn_node/shim.cpp: why dawn.node could not be loaded, or "";
// the threads of Dawn's worker pool, before the first call loads it.
extern "C" const char* wgnn_dawn_node_error();
extern "C" void wgnn_dawn_node_set_workers(unsigned n);
#endif

namespace wgnn::gpu {
namespace {

void on_uncaptured_error(WGPUDevice const*, WGPUErrorType type, WGPUStringView message, void* userdata1, void*) {
  auto* impl = static_cast<Context::Impl*>(userdata1);
  std::lock_guard<std::mutex> lock(impl->error_mutex);
  if (impl->pending_error.empty()) {
    const char* kind = type == WGPUErrorType_OutOfMemory ? "out of memory"
                       : type == WGPUErrorType_Validation ? "validation error"
                       : type == WGPUErrorType_Internal   ? "internal error"
                                                          : "error";
    impl->pending_error = fmt::format("WebGPU {}: {}", kind, str(message));
  }
}

void on_device_lost(WGPUDevice const*, WGPUDeviceLostReason reason, WGPUStringView message, void* userdata1, void*) {
  if (reason == WGPUDeviceLostReason_Destroyed || reason == WGPUDeviceLostReason_CallbackCancelled) return;
  auto* impl = static_cast<Context::Impl*>(userdata1);
  std::lock_guard<std::mutex> lock(impl->error_mutex);
  impl->lost = true;
  impl->lost_message = str(message);
}

Limits to_limits(const WGPULimits& l) {
  Limits o;
  o.max_buffer_size = l.maxBufferSize;
  o.max_storage_buffer_binding_size = l.maxStorageBufferBindingSize;
  o.max_uniform_buffer_binding_size = l.maxUniformBufferBindingSize;
  o.max_storage_buffers_per_shader_stage = l.maxStorageBuffersPerShaderStage;
  o.max_bind_groups = l.maxBindGroups;
  o.max_bindings_per_bind_group = l.maxBindingsPerBindGroup;
  o.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
  o.min_uniform_buffer_offset_alignment = l.minUniformBufferOffsetAlignment;
  o.max_compute_workgroup_storage_size = l.maxComputeWorkgroupStorageSize;
  o.max_compute_invocations_per_workgroup = l.maxComputeInvocationsPerWorkgroup;
  o.max_compute_workgroup_size_x = l.maxComputeWorkgroupSizeX;
  o.max_compute_workgroup_size_y = l.maxComputeWorkgroupSizeY;
  o.max_compute_workgroup_size_z = l.maxComputeWorkgroupSizeZ;
  o.max_compute_workgroups_per_dimension = l.maxComputeWorkgroupsPerDimension;
  return o;
}

#if !WGNN_DAWN_NPM
const char* component_type_name(WGPUSubgroupMatrixComponentType t) {
  switch (t) {
    case WGPUSubgroupMatrixComponentType_F32: return "f32";
    case WGPUSubgroupMatrixComponentType_F16: return "f16";
    case WGPUSubgroupMatrixComponentType_U32: return "u32";
    case WGPUSubgroupMatrixComponentType_I32: return "i32";
    case WGPUSubgroupMatrixComponentType_U8: return "u8";
    case WGPUSubgroupMatrixComponentType_I8: return "i8";
    default: return "unknown";
  }
}
#endif

std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{} bytes ({:.2f} GiB)", b, double(b) / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{} bytes ({:.2f} MiB)", b, double(b) / double(1ull << 20));
  return fmt::format("{} bytes", b);
}

// WGNN_GPU_TIMEOUT_S: a number of seconds above 0 (fractions allowed), in
// nanoseconds; anything else is an error, not the default.
uint64_t parse_timeout_s(const char* text) {
  const std::string t(text);
  char* end = nullptr;
  errno = 0;
  const bool decimal = !t.empty() && t.find_first_not_of("0123456789.eE+-") == std::string::npos;
  const double v = decimal ? std::strtod(t.c_str(), &end) : 0.0;
  if (!decimal || end != t.c_str() + t.size() || errno != 0 || !std::isfinite(v) || v < 0.001 || v > 1e7) {
    throw Error(fmt::format("WGNN_GPU_TIMEOUT_S='{}': give the GPU wait limit in seconds, a number from 0.001 to "
                            "10000000 (default 600)",
                            t));
  }
  return uint64_t(v * 1e9);
}

// Dawn and the Vulkan driver do not all survive a failed host allocation:
// under an address-space limit (ulimit -v) a failed mmap inside them is a
// null pointer written through (SIGSEGV), not an error. Where such a limit
// is set, wgnn checks the room left before it starts the driver and before
// each buffer (on a CPU driver, GPU memory is host memory) and reports "out
// of host memory" itself. Without a limit, nothing is checked.
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kDriverRoom = 1024 * kMiB;  // to start Dawn and the driver (they reserve ~700 MiB)
constexpr uint64_t kBufferRoom = 256 * kMiB;   // kept free beside every buffer

void check_address_space(uint64_t need, const std::string& what) {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
  uint64_t pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1) pages = v;
    std::fclose(f);
  }
  const uint64_t used = pages * uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t limit = r.rlim_cur;
  if (used + need > limit) {
    throw HostOutOfMemory(fmt::format(
        "{}: the address-space limit (ulimit -v) is {} MiB, {} MiB are in use and {} MiB more are needed (Dawn and "
        "the Vulkan driver cannot be trusted to fail cleanly past the limit); raise the limit",
        what, limit / kMiB, used / kMiB, need / kMiB));
  }
}

// A CPU driver (lavapipe) keeps GPU memory, descriptor pools included, in
// memory files, which a file size limit (ulimit -f) also caps: past it the
// driver's writes are SIGBUS. With such a limit, a CPU adapter needs
// kDriverFileRoom to start and no buffer may come near the limit.
constexpr uint64_t kDriverFileRoom = 256 * kMiB;

void check_file_size_limit(uint64_t need, const std::string& what) {
  rlimit r{};
  if (getrlimit(RLIMIT_FSIZE, &r) != 0 || r.rlim_cur == RLIM_INFINITY || need <= r.rlim_cur) return;
  throw Error(fmt::format(
      "{}: the file size limit (ulimit -f) is {} KiB; the CPU Vulkan driver keeps GPU memory in memory files that "
      "the limit also caps ({} KiB needed); raise the limit",
      what, uint64_t(r.rlim_cur) / 1024, need / 1024));
}

using steady = std::chrono::steady_clock;
double ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A function's address as a data pointer (for dladdr), without the
// conditionally-supported cast.
template <typename F>
const void* address_of(F* f) {
  const void* p = nullptr;
  static_assert(sizeof p == sizeof f);
  std::memcpy(&p, &f, sizeof p);
  return p;
}

// What identifies the loaded binary holding `address`: its GNU build ID
// (a new build of it has another), else its path, size and modification
// time.
std::string module_identity(const void* address) {
  Dl_info dl{};
  if (dladdr(address, &dl) == 0 || !dl.dli_fname) return "unknown module";
  struct Query {
    uintptr_t address;
    std::string build_id;
  } q{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* query = static_cast<Query*>(data);
        bool contains = false;
        for (int i = 0; i < info->dlpi_phnum && !contains; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          contains = ph.p_type == PT_LOAD && query->address >= start && query->address < start + ph.p_memsz;
        }
        if (!contains) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
          const unsigned char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            ElfW(Nhdr) n;
            std::memcpy(&n, p, sizeof n);
            const unsigned char* name = p + sizeof n;
            const unsigned char* desc = name + ((n.n_namesz + 3) & ~3u);
            if (desc + n.n_descsz > end) break;
            if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              for (uint32_t k = 0; k < n.n_descsz; ++k) query->build_id += fmt::format("{:02x}", desc[k]);
              return 1;
            }
            p = desc + ((n.n_descsz + 3) & ~3u);
          }
        }
        return 1;
      },
      &q);
  const std::string file = std::filesystem::path(dl.dli_fname).filename().string();
  if (!q.build_id.empty()) return fmt::format("{} build-id {}", file, q.build_id);
  struct stat st{};
  if (::stat(dl.dli_fname, &st) != 0) return fmt::format("{} (no build id, not found)", dl.dli_fname);
  return fmt::format("{} ({} bytes, modified {})", dl.dli_fname, uint64_t(st.st_size), int64_t(st.st_mtime));
}

// The pipeline cache on disk, or why there is none. An invalid setting is
// an error; a missing folder is not (it is made on the first store).
void setup_disk_cache(Context::Impl& s, const ContextOptions& options) {
  bool on = options.pipeline_cache;
  if (const char* e = options.settings.get("WGNN_PIPELINE_CACHE"); e && *e) {
    const std::string v(e);
    if (v != "0" && v != "1") {
      throw Error(fmt::format("WGNN_PIPELINE_CACHE='{}': 1 (the default) keeps compiled pipelines on disk, 0 "
                              "turns that off",
                              v));
    }
    if (v == "0") {
      on = false;
      s.disk_cache_off = "off (WGNN_PIPELINE_CACHE=0)";
    }
  }
  if (!options.pipeline_cache) s.disk_cache_off = "off (ContextOptions::pipeline_cache)";
  uint64_t max_bytes = options.pipeline_cache_max_bytes;
  if (max_bytes == 0) {
    const char* m = options.settings.get("WGNN_PIPELINE_CACHE_MAX_MB");
    max_bytes = m && *m ? parse_cache_max_mb(m) : 256ull << 20;
  }
  if (!on) return;
  const std::string root = options.cache_dir.empty() ? util::cache_dir(options.settings) : options.cache_dir;
  if (root.empty()) {
    s.disk_cache_off = "off (no cache folder: WGNN_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset)";
    return;
  }
  // Everything that can make a stored value stale: a new Dawn, another
  // adapter or driver, another wgnn binary (each build has its own folder;
  // old folders age out under the size bound).
  // (Dawn's own address of one of its functions: the executable's may be a
  // PLT stub.)
  const WGPUProc dawn_proc = wgpuGetProcAddress(sv("wgpuCreateInstance"));
  const AdapterInfo& a = s.info;
  const std::string description = fmt::format(
      "wgnn pipeline cache (Dawn's blob cache), format 1\n"
      "dawn: {} ({})\n"
      "adapter: {} | vendor {} 0x{:x} | device 0x{:x} | architecture {} | backend {} | driver {}\n"
      "wgnn: {}\n",
      module_identity(dawn_proc ? address_of(dawn_proc) : address_of(&wgpuCreateInstance)), WGNN_DAWN_NPM ? "npm" : WGNN_DAWN_NODE ? "dawn-node" : "source", a.name,
      a.vendor, a.vendor_id, a.device_id, a.architecture, a.backend, a.description,
      module_identity(address_of(&setup_disk_cache)));
  s.disk_cache = std::make_unique<DiskCache>(root, scope_name(description), description, max_bytes);
}

}  // namespace

namespace {
// Whether Dawn's allow_unsafe_apis toggle goes on (ContextOptions says how).
bool unsafe_apis_wanted(const ContextOptions& options) {
  if (options.allow_unsafe_apis) return *options.allow_unsafe_apis;
  if (const char* v = options.settings.get("WGNN_ALLOW_UNSAFE_APIS"); v && *v) {
    const std::string s(v);
    if (s == "1") return true;
    if (s == "0") return false;
    throw Error("WGNN_ALLOW_UNSAFE_APIS must be 1 or 0, not '" + s + "'");
  }
  return !WGNN_DAWN_NPM;
}
}  // namespace

namespace {
// Dawn's blob-cache hooks on the device descriptor: plain functions with one
// userdata (the Dawn of source builds), or callback infos (newer Dawns: the
// dawn-node one).
template <typename D>
void set_cache_functions(D& d, DiskCache* cache) {
  if constexpr (requires { d.loadDataFunction; }) {
    d.loadDataFunction = [](const void* key, size_t key_size, void* value, size_t value_size, void* userdata) -> size_t {
      return static_cast<DiskCache*>(userdata)->load(key, key_size, value, value_size);
    };
    d.storeDataFunction = [](const void* key, size_t key_size, const void* value, size_t value_size, void* userdata) {
      static_cast<DiskCache*>(userdata)->store(key, key_size, value, value_size);
    };
    d.functionUserdata = cache;
  } else {
    d.dawnLoadCacheDataCallbackInfo.callback = [](size_t key_size, const uint8_t* key, size_t value_size,
                                                  uint8_t* value, void* userdata, void*) -> size_t {
      return static_cast<DiskCache*>(userdata)->load(key, key_size, value, value_size);
    };
    d.dawnLoadCacheDataCallbackInfo.userdata1 = cache;
    d.dawnStoreCacheDataCallbackInfo.callback = [](size_t key_size, const uint8_t* key, size_t value_size,
                                                   const uint8_t* value, void* userdata, void*) {
      static_cast<DiskCache*>(userdata)->store(key, key_size, value, value_size);
    };
    d.dawnStoreCacheDataCallbackInfo.userdata1 = cache;
  }
}
}  // namespace

namespace {
// Dawn prints a few lines of its own on stderr while it starts an instance,
// lists adapters and makes a device, outside any callback: on lavapipe, "Warning:
// maxDynamicUniformBuffersPerPipelineLayout artificially reduced from
// 1000000 to 16 to fit dynamic offset allocation limit." (and the same for
// storage buffers). They tell a user nothing, and `remove-bg --quiet` must
// print nothing. For its lifetime this holds stderr in a memory file; at
// its end such lines are dropped and everything else is written out.
class QuietDawnStartup {
 public:
  QuietDawnStartup() {
    std::fflush(stderr);
    fd_ = memfd_create("wgnn-dawn-stderr", MFD_CLOEXEC);
    if (fd_ < 0) return;
    saved_ = dup(STDERR_FILENO);
    if (saved_ < 0 || dup2(fd_, STDERR_FILENO) < 0) {
      if (saved_ >= 0) close(saved_);
      close(fd_);
      fd_ = saved_ = -1;
    }
  }
  ~QuietDawnStartup() {
    if (fd_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    const off_t n = lseek(fd_, 0, SEEK_END);
    std::string text(n > 0 ? size_t(n) : 0, '\0');
    if (n > 0 && pread(fd_, text.data(), text.size(), 0) != n) text.clear();
    close(fd_);
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      end = end == std::string::npos ? text.size() : end + 1;
      const std::string_view line(text.data() + start, end - start);
      // Mesa's window-system code on lavapipe adds "error: XDG_RUNTIME_DIR is
      // invalid or not set in the environment." (no display here, and none
      // needed for compute).
      const bool noise = (line.rfind("Warning: max", 0) == 0 && line.find("artificially reduced from") != line.npos) ||
                         line.rfind("error: XDG_RUNTIME_DIR is invalid or not set", 0) == 0;
      if (!noise) {
        for (size_t done = 0; done < line.size();) {
          const ssize_t w = write(STDERR_FILENO, line.data() + done, line.size() - done);
          if (w <= 0) break;
          done += size_t(w);
        }
      }
      start = end;
    }
  }
  QuietDawnStartup(const QuietDawnStartup&) = delete;
  QuietDawnStartup& operator=(const QuietDawnStartup&) = delete;

 private:
  int fd_ = -1, saved_ = -1;
};
}  // namespace

namespace {
// Every adapter `instance` offers with `toggles` (the adapter request's
// toggles decide which experimental features an adapter lists).
std::vector<FoundAdapter> adapters_with(WGPUInstance instance, const std::vector<const char*>& toggles) {
  WGPUDawnTogglesDescriptor t{};
  t.chain.sType = static_cast<WGPUSType>(dawn::kSTypeTogglesDescriptor);
  t.enabledToggleCount = toggles.size();
  t.enabledToggles = toggles.data();
  WGPURequestAdapterOptions opts = WGPU_REQUEST_ADAPTER_OPTIONS_INIT;
  opts.nextInChain = &t.chain;
  opts.powerPreference = WGPUPowerPreference_HighPerformance;
  return enumerate_adapters(instance, &opts);
}

void release_all(std::vector<FoundAdapter>& found) {
  for (auto& f : found)
    if (f.handle) wgpuAdapterRelease(std::exchange(f.handle, nullptr));
}

struct OpenedAdapters {
  WGPUInstance instance = nullptr;  // owned by the caller
  std::vector<FoundAdapter> found;  // never empty
  DriverChoice driver;
};

// Chooses the Vulkan driver for `mode` ("auto", "gpu", "lavapipe"), starts a
// Dawn instance with `toggles` and lists its adapters. In "auto", a machine
// whose GPU driver offers nothing falls back to the bundled lavapipe once.
OpenedAdapters open_adapters(const std::string& mode, const std::vector<const char*>& toggles,
                              const Settings& settings) {
  OpenedAdapters o;
#if WGNN_DAWN_NODE
  // Dawn's pool compiles the pipelines asked for asynchronously; its own
  // default is 2 threads. One per core, at most 16, unless
  // WGNN_DAWN_WORKERS says; set once, when the first call loads Dawn.
  {
    unsigned workers = std::clamp(std::thread::hardware_concurrency(), 2u, 16u);
    if (const char* w = settings.get("WGNN_DAWN_WORKERS")) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(w, &end, 10);
      if (!*w || *end || v < 1 || v > 256) {
        throw Error(fmt::format("WGNN_DAWN_WORKERS must be a number of threads from 1 to 256, not '{}'", w));
      }
      workers = unsigned(v);
    }
    wgnn_dawn_node_set_workers(workers);
  }
#endif
  o.driver = choose_vulkan_driver(mode, settings);
  WGPUDawnTogglesDescriptor instance_toggles{};
  instance_toggles.chain.sType = static_cast<WGPUSType>(dawn::kSTypeTogglesDescriptor);
  instance_toggles.enabledToggleCount = toggles.size();
  instance_toggles.enabledToggles = toggles.data();
  for (int attempt = 0; attempt < 2; ++attempt) {
    WGPUInstanceFeatureName instance_features[] = {WGPUInstanceFeatureName_TimedWaitAny};
    WGPUInstanceDescriptor idesc = WGPU_INSTANCE_DESCRIPTOR_INIT;
    idesc.nextInChain = &instance_toggles.chain;
    idesc.requiredFeatureCount = 1;
    idesc.requiredFeatures = instance_features;
    QuietDawnStartup quiet;
    o.instance = wgpuCreateInstance(&idesc);
    if (!o.instance) {
#if WGNN_DAWN_NODE
      if (const char* why = wgnn_dawn_node_error(); why && *why) {
        throw GpuError(std::string("could not load Dawn (dawn.node, docs/DAWN.md): ") + why);
      }
#endif
      throw GpuError("could not create a WebGPU instance (Dawn)");
    }
    // Dawn's Null backend (which computes nothing) is left out of the list:
    // when no real driver loads a device, it is empty.
    o.found = adapters_with(o.instance, toggles);
    if (!o.found.empty()) return o;
    wgpuInstanceRelease(std::exchange(o.instance, nullptr));
    if (attempt == 0 && o.driver.mode == "gpu" && mode == "auto") {
      try {
        o.driver = choose_vulkan_driver("auto", settings, /*retry_with_lavapipe=*/true);
        o.driver.description = "the machine's Vulkan driver offered no adapter: " + o.driver.description;
        continue;
      } catch (const Error&) {
      }
    }
    break;
  }
  throw GpuError(fmt::format("no WebGPU adapter found (Dawn lists none; driver: {}). On a machine without a GPU, "
                             "scripts/setup fetches lavapipe.",
                             o.driver.description));
}
}  // namespace

WGPUAdapter Context::Impl::request_adapter(std::string* message) {
  std::vector<FoundAdapter> found = adapters_with(instance, adapter_toggles);
  WGPUAdapter chosen = nullptr;
  if (adapter_index >= 0 && size_t(adapter_index) < found.size()) {
    chosen = std::exchange(found[size_t(adapter_index)].handle, nullptr);
  } else {
    *message = fmt::format("Dawn lists {} adapter(s), none at index {}", found.size(), adapter_index);
  }
  release_all(found);
  return chosen;
}

void Context::Impl::keep_until_called(std::shared_ptr<CallbackState> state) {
  std::lock_guard<std::mutex> lock(callback_mutex);
  uncalled.push_back(std::move(state));
}

void Context::Impl::wait(WGPUFuture future, const char* what) { wait(future, what, timeout_ns); }

void Context::Impl::wait(WGPUFuture future, const char* what, uint64_t limit_ns) {
  WGPUFutureWaitInfo wi{future, false};
  // Polling first: a blocking wait returns some tens of microseconds after
  // the GPU is done (the driver's interrupt and the thread's wake-up), a
  // poll within a few (docs/BENCHMARKS.md).
  // Only while at most half the machine's cores are polling in this
  // process (many sessions waiting at once, as under `wgnn serve`, block
  // instead), as CUDA's default schedule spins only while the contexts are
  // fewer than the cores.
  uint64_t spun_ns = 0;
  static std::atomic<unsigned> polling{0};
  static const unsigned max_polling = std::max(1u, std::thread::hardware_concurrency() / 2);
  struct Count {
    bool on;
    explicit Count(bool want) : on(want && polling.fetch_add(1) < max_polling) {
      if (want && !on) polling.fetch_sub(1);
    }
    ~Count() {
      if (on) polling.fetch_sub(1);
    }
  };
  const Count poll(spin_ns > 0);
  if (poll.on) {
    const auto t0 = std::chrono::steady_clock::now();
    while (true) {
      const WGPUWaitStatus st = wgpuInstanceWaitAny(instance, 1, &wi, 0);
      if (st == WGPUWaitStatus_Success && wi.completed) return;
      if (st != WGPUWaitStatus_Success && st != WGPUWaitStatus_TimedOut) break;  // reported below
      spun_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
      if (spun_ns >= spin_ns || spun_ns >= limit_ns) break;
      std::this_thread::yield();
    }
  }
  const WGPUWaitStatus status = wgpuInstanceWaitAny(instance, 1, &wi, limit_ns - std::min(spun_ns, limit_ns));
  if (status == WGPUWaitStatus_TimedOut) {
    throw GpuError(fmt::format("{}: the GPU did not finish within {:g} s (WGNN_GPU_TIMEOUT_S sets the limit)", what,
                               double(limit_ns) / 1e9));
  }
  if (status != WGPUWaitStatus_Success || !wi.completed) {
    throw GpuError(fmt::format("{}: waiting for the GPU failed", what));
  }
}

std::string Context::Impl::pop_scope() {
  struct R : CallbackState {
    std::string message;
  };
  Pending<R> r(*this);
  WGPUPopErrorScopeCallbackInfo cb = WGPU_POP_ERROR_SCOPE_CALLBACK_INFO_INIT;
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView msg, void* ud, void*) {
    auto* rr = arrived<R>(ud);
    if (status == WGPUPopErrorScopeStatus_Success && type != WGPUErrorType_NoError) {
      rr->message = str(msg);
      if (rr->message.empty()) rr->message = "unspecified error";
    }
  };
  cb.userdata1 = r.userdata();
  wait(wgpuDevicePopErrorScope(device, cb), "reading a WebGPU error scope");
  return r->message;
}

void Context::Impl::throw_pending() {
  std::string msg;
  bool was_lost = false;
  {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (lost) {
      was_lost = true;
      msg = lost_message;
    } else {
      msg.swap(pending_error);
    }
  }
  if (was_lost) throw DeviceLost("the WebGPU device was lost: " + msg);
  if (!msg.empty()) throw GpuError(msg);
}

namespace {
// Context creation and destruction, one at a time: the driver choice sets
// environment variables and loads libraries.
std::mutex& lifetime_mutex() {
  static std::mutex m;
  return m;
}

// The contexts alive now (under lifetime_mutex).
std::set<Context::Impl*>& live_contexts() {
  static auto* s = new std::set<Context::Impl*>();
  return *s;
}

// At exit, pipeline creations of contexts never destroyed (a static one, a
// leaked one) are finished before the process tears down. Registered once
// the first device exists, so it runs before the exit handlers that Dawn
// and the Vulkan driver registered while loading (docs/DAWN.md).
void finish_at_exit() {
  std::lock_guard<std::mutex> lifetime(lifetime_mutex());
  for (Context::Impl* s : live_contexts()) Context::finish_pending_pipelines(*s, "finishing a compute pipeline at exit");
}
}  // namespace

std::vector<AdapterDesc> Context::list_adapters(const ContextOptions& options) {
  std::lock_guard<std::mutex> lifetime(lifetime_mutex());
  std::string requested = options.adapter;
  if (requested.empty()) {
    const char* e = options.settings.get("WGNN_ADAPTER");
    requested = e ? e : "";
  }
  const std::string mode = is_driver_choice(requested) && !requested.empty() ? requested : "auto";
  std::vector<const char*> toggles = {"vulkan_enable_f16_on_nvidia"};
  if (unsafe_apis_wanted(options)) toggles.push_back("allow_unsafe_apis");
  OpenedAdapters opened = open_adapters(mode, toggles, options.settings);
  std::vector<AdapterDesc> out;
  for (const auto& f : opened.found) out.push_back(f.desc);
  release_all(opened.found);
  wgpuInstanceRelease(opened.instance);
  return out;
}

Context::Context(const ContextOptions& options) : impl_(std::make_unique<Impl>()) {
  std::lock_guard<std::mutex> lifetime(lifetime_mutex());
  Impl& s = *impl_;
  s.settings = options.settings;
  if (const char* t = options.settings.get("WGNN_GPU_TIMEOUT_S")) s.timeout_ns = parse_timeout_s(t);
  bool spin_set = false;
  if (const char* t = options.settings.get("WGNN_SPIN_WAIT_US")) {
    spin_set = true;
    const std::string v(t);
    char* end = nullptr;
    const long us = v.empty() ? -1 : std::strtol(v.c_str(), &end, 10);
    if (us < 0 || us > 1000000 || *end)
      throw Error(fmt::format("WGNN_SPIN_WAIT_US='{}': give how long a GPU wait polls before it blocks, in "
                              "microseconds from 0 to 1000000",
                              v));
    s.spin_ns = uint64_t(us) * 1000;
  }
  if (const char* a = options.settings.get("WGNN_ASYNC_PIPELINES")) {
    const std::string v(a);
    if (v != "0" && v != "1") throw Error(fmt::format("WGNN_ASYNC_PIPELINES='{}': give 1 (the default) or 0", v));
    s.async_pipelines = v == "1";
  }
  if (const char* a = options.settings.get("WGNN_STAGED_WRITES")) {
    const std::string v(a);
    if (v != "0" && v != "1") throw Error(fmt::format("WGNN_STAGED_WRITES='{}': give 1 (the default) or 0", v));
    s.staged_writes = v == "1";
  }
  check_address_space(kDriverRoom, "starting the GPU driver");
  s.limits_mode = options.limits;
  if (s.limits_mode.empty()) {
    const char* l = options.settings.get("WGNN_LIMITS");
    s.limits_mode = l && *l ? l : "adapter";
  }
  if (s.limits_mode != "adapter" && s.limits_mode != "default") {
    throw Error(fmt::format("limits must be 'adapter' or 'default' (WGNN_LIMITS), not '{}'", s.limits_mode));
  }
  // ContextOptions::adapter (else WGNN_ADAPTER) chooses a Vulkan driver or
  // names one adapter (gpu/adapters.h), which the automatic choice looks for.
  std::string requested = options.adapter;
  if (requested.empty()) {
    const char* e = options.settings.get("WGNN_ADAPTER");
    requested = e ? e : "";
  }
  const bool driver_only = is_driver_choice(requested);
  const std::string mode = driver_only && !requested.empty() ? requested : "auto";
  // Dawn offers ShaderF16 on NVIDIA's Vulkan driver only with
  // vulkan_enable_f16_on_nvidia, given to the instance and the adapter
  // request (and the device, below). allow_unsafe_apis goes the same three
  // ways: the adapter's toggles decide which experimental features (subgroup
  // matrices) and configurations it lists.
  const bool allow_unsafe = unsafe_apis_wanted(options);
  s.features.unsafe_apis = allow_unsafe;
  s.adapter_toggles = {"vulkan_enable_f16_on_nvidia"};
  if (allow_unsafe) s.adapter_toggles.push_back("allow_unsafe_apis");
  OpenedAdapters opened = open_adapters(mode, s.adapter_toggles, options.settings);
  s.instance = opened.instance;
  std::vector<FoundAdapter>& found = opened.found;
  const DriverChoice& driver = opened.driver;
  // Which one: the one named, else the one CUDA_VISIBLE_DEVICES names (as
  // Ray hands an actor its GPU), else Dawn's first (its high-performance
  // choice, what wgpuInstanceRequestAdapter returns).
  std::vector<AdapterDesc> descs;
  for (const auto& f : found) descs.push_back(f.desc);
  std::string selected_by = "Dawn's first high-performance adapter";
  try {
    if (!driver_only) {
      s.adapter_index = select_adapter(descs, requested);
      selected_by = fmt::format("adapter '{}'", requested);
    } else if (options.follow_cuda_visible_devices) {
      const char* cvd = options.settings.get("CUDA_VISIBLE_DEVICES");
      if (auto i = cuda_visible_adapter(descs, cvd ? std::optional<std::string>(cvd) : std::nullopt)) {
        s.adapter_index = *i;
        selected_by = fmt::format("CUDA_VISIBLE_DEVICES={}", cvd);
      }
    }
  } catch (...) {
    release_all(found);
    wgpuInstanceRelease(std::exchange(s.instance, nullptr));
    throw;
  }
  s.adapter = std::exchange(found[size_t(s.adapter_index)].handle, nullptr);
  release_all(found);
  s.info.index = s.adapter_index;
  s.info.uuid = descs[size_t(s.adapter_index)].uuid;
  s.info.pci_bus = descs[size_t(s.adapter_index)].pci_bus;
  s.info.selected_by = selected_by;
  s.info.driver_source = driver.description;

  {
    Guarded<WGPUAdapterInfo> gi;
    if (wgpuAdapterGetInfo(s.adapter, &gi.value) != WGPUStatus_Success) throw GpuError("wgpuAdapterGetInfo failed");
    const WGPUAdapterInfo& ai = gi.value;
    s.info.name = str(ai.device);
    s.info.vendor = str(ai.vendor);
    s.info.architecture = str(ai.architecture);
    s.info.description = str(ai.description);
    s.info.backend = backend_name(ai.backendType);
    s.info.adapter_type = adapter_type_name(ai.adapterType);
    // A GPU's waits poll first (as CUDA's default schedule spins while
    // the process has fewer contexts than cores); a CPU adapter's do not:
    // there the polling thread would take a core from the device's work.
    if (!spin_set && ai.adapterType != WGPUAdapterType_CPU) s.spin_ns = Impl::kDefaultSpinNs;
    s.info.vendor_id = ai.vendorID;
    s.info.device_id = ai.deviceID;
    s.info.subgroup_min_size = ai.subgroupMinSize;
    s.info.subgroup_max_size = ai.subgroupMaxSize;
    wgpuAdapterInfoFreeMembers(ai);
  }
  if (s.info.adapter_type == "CPU") check_file_size_limit(kDriverFileRoom, "starting the CPU Vulkan driver");

  Guarded<WGPULimits> adapter_limits;
  if (wgpuAdapterGetLimits(s.adapter, &adapter_limits.value) != WGPUStatus_Success) {
    throw GpuError("wgpuAdapterGetLimits failed");
  }
  {
    WGPUSupportedFeatures sf{};
    wgpuAdapterGetFeatures(s.adapter, &sf);
    for (size_t i = 0; i < sf.featureCount; ++i) s.features.adapter_features.push_back(dawn::feature_name(sf.features[i]));
    wgpuSupportedFeaturesFreeMembers(sf);
  }
  std::vector<WGPUFeatureName> wanted;
  std::vector<uint32_t> candidates = {dawn::kFeatureShaderF16, dawn::kFeatureSubgroups, dawn::kFeatureTimestampQuery};
  if (allow_unsafe) candidates.push_back(dawn::kFeatureSubgroupMatrix);
  if (s.limits_mode == "default") candidates = {dawn::kFeatureTimestampQuery};
  // Dawn's device lock on every call (but encoding): lets a BufferBatch make
  // buffers on a thread of its own (an uncontended lock per call otherwise).
  // Not a capability of the GPU: asked for with either limits.
  if (options.thread_safe_device) candidates.push_back(dawn::kFeatureImplicitDeviceSynchronization);
  for (uint32_t f : candidates) {
    if (wgpuAdapterHasFeature(s.adapter, static_cast<WGPUFeatureName>(f))) wanted.push_back(static_cast<WGPUFeatureName>(f));
  }

  // Timestamps are quantized by default (a browser's defence against timing
  // attacks); a native runtime wants them exact for profiling.
  std::vector<const char*> enabled = s.adapter_toggles;
  for (const auto& t : options.enable_toggles) enabled.push_back(t.c_str());
  // Dawn's robustness transform (every array index clamped in the generated
  // shaders) is off unless asked for (ContextOptions::robustness,
  // WGNN_ROBUSTNESS=1): every wgnn kernel checks its own bounds, ONNX
  // Runtime's WebGPU provider turns it off the same way, and it costs up to
  // 4x on the tensor-core GEMM (docs/DAWN.md).
  const char* rob = options.settings.get("WGNN_ROBUSTNESS");
  if (!options.robustness && !(rob && std::string(rob) == "1")) enabled.push_back("disable_robustness");
  // WGNN_SKIP_VALIDATION=1: Dawn skips its validation of API calls (bind
  // groups, dispatches, copies, submits), which cuts the host time of
  // encoding (docs/BENCHMARKS.md, "Host time per run"). A wrong call then is
  // undefined behaviour instead of an error: for measured, tested models only.
  if (const char* r = options.settings.get("WGNN_SKIP_VALIDATION"); r && std::string(r) == "1") {
    enabled.push_back("skip_validation");
  }
  // WGNN_DAWN_TOGGLES=a,b: more Dawn device toggles by name (measuring one,
  // e.g. disable_workgroup_init; Dawn warns of a name it does not know).
  std::vector<std::string> env_toggles;
  if (const char* t = options.settings.get("WGNN_DAWN_TOGGLES")) {
    std::string_view rest(t);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      if (!name.empty()) env_toggles.emplace_back(name);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  for (const auto& t : env_toggles) enabled.push_back(t.c_str());
  const char* disabled[] = {"timestamp_quantization"};
  WGPUDawnTogglesDescriptor toggles{};
  toggles.chain.sType = static_cast<WGPUSType>(dawn::kSTypeTogglesDescriptor);
  toggles.enabledToggleCount = enabled.size();
  toggles.enabledToggles = enabled.data();
  toggles.disabledToggleCount = 1;
  toggles.disabledToggles = disabled;

  // The blob cache: Dawn asks it before compiling a shader or creating a
  // pipeline and hands it what it compiled.
  setup_disk_cache(s, options);
  WGPUDawnCacheDeviceDescriptor cache_desc{};
  if (s.disk_cache) {
    cache_desc.chain.sType = static_cast<WGPUSType>(dawn::kSTypeCacheDeviceDescriptor);
    set_cache_functions(cache_desc, s.disk_cache.get());
    toggles.chain.next = &cache_desc.chain;
  }

  WGPUDeviceDescriptor ddesc = WGPU_DEVICE_DESCRIPTOR_INIT;
  ddesc.nextInChain = &toggles.chain;
  ddesc.label = sv("wgnn");
  ddesc.requiredFeatureCount = wanted.size();
  ddesc.requiredFeatures = wanted.data();
  // "default": no required limits, so the device gets WebGPU's defaults.
  ddesc.requiredLimits = s.limits_mode == "default" ? nullptr : &adapter_limits.value;
  ddesc.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  ddesc.deviceLostCallbackInfo.callback = on_device_lost;
  ddesc.deviceLostCallbackInfo.userdata1 = &s;
  ddesc.uncapturedErrorCallbackInfo.callback = on_uncaptured_error;
  ddesc.uncapturedErrorCallbackInfo.userdata1 = &s;

  struct DevResult : CallbackState {
    WGPUDevice device = nullptr;
    std::string message;
  };
  Pending<DevResult> dr(s);
  WGPURequestDeviceCallbackInfo dcb = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
  dcb.mode = WGPUCallbackMode_WaitAnyOnly;
  dcb.callback = [](WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView msg, void* ud, void*) {
    auto* r = arrived<DevResult>(ud);
    if (status == WGPURequestDeviceStatus_Success) r->device = device;
    r->message = str(msg);
  };
  dcb.userdata1 = dr.userdata();
  {
    QuietDawnStartup quiet;
    s.wait(wgpuAdapterRequestDevice(s.adapter, &ddesc, dcb), "requesting a WebGPU device");
  }
  if (!dr->device) throw GpuError("could not create a WebGPU device on " + s.info.name + ": " + dr->message);
  s.device = dr->device;
  s.queue = wgpuDeviceGetQueue(s.device);

  Guarded<WGPULimits> device_limits;
  wgpuDeviceGetLimits(s.device, &device_limits.value);
  s.limits = to_limits(device_limits.value);
  if (options.max_storage_buffer_binding_size > 0) {
    s.limits.max_storage_buffer_binding_size =
        std::min(s.limits.max_storage_buffer_binding_size, options.max_storage_buffer_binding_size);
  }
  if (options.max_buffer_size > 0) s.limits.max_buffer_size = std::min(s.limits.max_buffer_size, options.max_buffer_size);
  auto has = [&](uint32_t f) { return wgpuDeviceHasFeature(s.device, static_cast<WGPUFeatureName>(f)) != 0; };
  s.features.shader_f16 = has(dawn::kFeatureShaderF16);
  s.features.subgroups = has(dawn::kFeatureSubgroups);
  s.features.timestamp_query = has(dawn::kFeatureTimestampQuery);
  s.features.subgroup_matrix = has(dawn::kFeatureSubgroupMatrix);
  s.features.thread_safe = has(dawn::kFeatureImplicitDeviceSynchronization);
  s.features.packed_4x8_dot =
      wgpuInstanceHasWGSLLanguageFeature(
          s.instance, static_cast<WGPUWGSLLanguageFeatureName>(dawn::kWgslPacked4x8IntegerDotProduct)) != 0;
#if !WGNN_DAWN_NPM
  // The shapes and types on offer. (The npm Dawn numbers this sType
  // differently and cannot use subgroup matrices on Vulkan anyway.)
  if (s.features.subgroup_matrix) {
    Guarded<WGPUAdapterPropertiesSubgroupMatrixConfigs> configs;
    configs.value = WGPU_ADAPTER_PROPERTIES_SUBGROUP_MATRIX_CONFIGS_INIT;
    Guarded<WGPUAdapterInfo> ai;
    ai.value = WGPU_ADAPTER_INFO_INIT;
    ai.value.nextInChain = &configs.value.chain;
    if (wgpuAdapterGetInfo(s.adapter, &ai.value) == WGPUStatus_Success) {
      // Each config read at the binary's stride (dawn_values.h).
      const auto* bytes = reinterpret_cast<const unsigned char*>(configs.value.configs);
      for (size_t i = 0; bytes && i < configs.value.configCount; ++i) {
        WGPUSubgroupMatrixConfig c;
        std::memcpy(&c, bytes + i * dawn::kSubgroupMatrixConfigStride, sizeof(c));
        s.features.subgroup_matrix_configs.push_back(
            {component_type_name(c.componentType), component_type_name(c.resultComponentType), c.M, c.N, c.K});
      }
      wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers(configs.value);
      wgpuAdapterInfoFreeMembers(ai.value);
    }
  }
#endif
  // Registered last: a constructor that threw leaves nothing behind.
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(finish_at_exit); });
  live_contexts().insert(impl_.get());
}


const Settings& Context::settings() const { return impl_->settings; }
Settings& Context::mutable_settings() { return impl_->settings; }

const AdapterInfo& Context::adapter() const { return impl_->info; }
const Limits& Context::limits() const { return impl_->limits; }
const std::string& Context::limits_mode() const { return impl_->limits_mode; }
const Features& Context::features() const { return impl_->features; }
WGPUDeviceImpl* Context::device() const { return impl_->device; }
WGPUQueueImpl* Context::queue() const { return impl_->queue; }
WGPUInstanceImpl* Context::instance() const { return impl_->instance; }
uint64_t Context::pipeline_cache_hits() const { return impl_->cache_hits; }
uint64_t Context::pipeline_cache_misses() const { return impl_->cache_misses; }
uint64_t Context::buffers_created() const { return impl_->buffers_created; }

CreationStats Context::creation_stats() const {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.stats_mutex);
  CreationStats c = s.stats;
  c.pipeline_hits = s.cache_hits;
  c.pipelines_created = s.cache_misses;
  c.pipeline_requests = s.cache_hits + s.cache_misses;
  c.bind_groups = s.bind_groups_created;
  c.buffers = s.buffers_created;
  return c;
}

CreationStats operator-(const CreationStats& a, const CreationStats& b) {
  CreationStats d;
  d.pipeline_requests = a.pipeline_requests - b.pipeline_requests;
  d.pipeline_hits = a.pipeline_hits - b.pipeline_hits;
  d.pipelines_created = a.pipelines_created - b.pipelines_created;
  d.pipelines_from_disk = a.pipelines_from_disk - b.pipelines_from_disk;
  d.wgsl_ms = a.wgsl_ms - b.wgsl_ms;
  d.shader_module_ms = a.shader_module_ms - b.shader_module_ms;
  d.pipeline_ms = a.pipeline_ms - b.pipeline_ms;
  d.bind_groups = a.bind_groups - b.bind_groups;
  d.bind_group_ms = a.bind_group_ms - b.bind_group_ms;
  d.buffers = a.buffers - b.buffers;
  d.buffer_ms = a.buffer_ms - b.buffer_ms;
  d.writes = a.writes - b.writes;
  d.bytes_written = a.bytes_written - b.bytes_written;
  d.write_ms = a.write_ms - b.write_ms;
  return d;
}

DiskCacheStats Context::disk_cache_stats() const {
  const Impl& s = *impl_;
  DiskCacheStats d;
  if (!s.disk_cache) {
    d.why_off = s.disk_cache_off;
    return d;
  }
  const DiskCacheCounters c = s.disk_cache->counters();
  d.enabled = true;
  d.folder = s.disk_cache->folder();
  d.max_bytes = s.disk_cache->max_bytes();
  d.loads = c.loads;
  d.hits = c.hits;
  d.misses = c.misses;
  d.corrupt = c.corrupt;
  d.stores = c.stores;
  d.store_failures = c.store_failures;
  d.evicted = c.evicted;
  d.loaded_bytes = c.loaded_bytes;
  d.stored_bytes = c.stored_bytes;
  return d;
}

void Context::add_wgsl_time(double ms) {
  std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  impl_->stats.wgsl_ms += ms;
}
uint64_t Context::bind_groups_created() const { return impl_->bind_groups_created; }

void Context::check() { impl_->throw_pending(); }

std::unique_lock<std::mutex> Context::exclusive() { return std::unique_lock<std::mutex>(impl_->use_mutex); }

void Context::force_device_loss(std::string_view message) {
  wgpuDeviceForceLoss(impl_->device, WGPUDeviceLostReason_Unknown, WGPUStringView{message.data(), message.size()});
  wgpuInstanceProcessEvents(impl_->instance);
}

void Context::inject_out_of_memory(std::string_view message) {
  wgpuDeviceInjectError(impl_->device, WGPUErrorType_OutOfMemory, WGPUStringView{message.data(), message.size()});
  wgpuInstanceProcessEvents(impl_->instance);
}

Buffer Context::create_buffer(uint64_t bytes, uint64_t usage, std::string_view label) {
  return create_buffer(bytes, usage, label, true);
}

Buffer Context::create_buffer(uint64_t bytes, uint64_t usage, std::string_view label, bool counted) {
  Impl& s = *impl_;
  s.throw_pending();
  const uint64_t size = std::max<uint64_t>(16, (bytes + 15) / 16 * 16);
  const std::string name = label.empty() ? std::string("buffer") : std::string(label);
  if (size > s.limits.max_buffer_size) {
    throw Error(fmt::format("buffer '{}' of {} exceeds this device's maxBufferSize of {}", name, human_bytes(bytes),
                            human_bytes(s.limits.max_buffer_size)));
  }
  check_address_space(size + kBufferRoom, fmt::format("creating buffer '{}' of {}", name, human_bytes(size)));
  if (s.info.adapter_type == "CPU") {
    check_file_size_limit(size + kDriverFileRoom, fmt::format("creating buffer '{}' of {}", name, human_bytes(size)));
  }
  WGPUBufferDescriptor desc = WGPU_BUFFER_DESCRIPTOR_INIT;
  desc.label = sv(name);
  desc.size = size;
  desc.usage = usage;
  const auto t0 = steady::now();
  WGPUBuffer b = s.scoped(fmt::format("creating buffer '{}' of {}", name, human_bytes(size)),
                          [&] { return wgpuDeviceCreateBuffer(s.device, &desc); });
  if (!b) throw GpuError(fmt::format("creating buffer '{}' of {} failed", name, human_bytes(size)));
  if (counted) {
    ++s.buffers_created;
    // WGNN_LOG_BUFFERS=1: each counted buffer on stderr (what buffers_created counts).
    if (s.settings.is("WGNN_LOG_BUFFERS", "1")) fmt::print(stderr, "wgnn: buffer {} '{}' {} bytes usage {:#x}\n", s.buffers_created, name, size, usage);
    std::lock_guard<std::mutex> lock(s.stats_mutex);
    s.stats.buffer_ms += ms_between(t0, steady::now());
  }
  Buffer out;
  out.handle_ = std::shared_ptr<WGPUBufferImpl>(b, [](WGPUBuffer p) {
    wgpuBufferDestroy(p);
    wgpuBufferRelease(p);
  });
  out.label_ = std::make_shared<const std::string>(name);
  out.size_ = size;
  out.usage_ = usage;
  return out;
}

void Context::write(const Buffer& dst, const void* data, uint64_t bytes, uint64_t offset) {
  Impl& s = *impl_;
  if (offset + bytes > dst.size()) {
    throw Error(fmt::format("write of {} bytes at offset {} overruns buffer '{}' of {} bytes", bytes, offset,
                            dst.label(), dst.size()));
  }
  if (offset % 4 != 0) throw Error(fmt::format("write offset {} into '{}' is not a multiple of 4", offset, dst.label()));
  if (bytes == 0) return;
  const auto t0 = steady::now();
  const uint64_t whole = bytes / 4 * 4;
  if (s.staged_writes && bytes >= kStagedWriteMin && offset + (bytes + 3) / 4 * 4 <= dst.size() &&
      (dst.usage() & kCopyDst)) {
    // Through the two kept staging buffers, in parts of at most their
    // size, each copied by a command submitted at once (so the queue orders
    // it as a queue write: before any later submit). Dawn's own queue write
    // puts a build's megabytes of weights into new staging buffers, 4 MiB
    // each or one per write over that, mapped for the first time: page
    // faults on every page (a warm first run's weights crossed at 2.2 GB/s
    // on the H200, 7-9 GB/s through kept buffers: docs/results/coldstart_h200.md).
    std::lock_guard<std::mutex> lock(s.staged_mutex);
    const auto* src = static_cast<const unsigned char*>(data);
    // Parts within maxBufferSize (a lowered limit, in tests, may be below 4 MiB).
    const uint64_t chunk = std::min<uint64_t>(kStagedWriteChunk, s.limits.max_buffer_size / 16 * 16);
    for (uint64_t done = 0; done < bytes;) {
      const uint64_t n = std::min<uint64_t>(chunk, bytes - done);
      const uint64_t padded = (n + 3) / 4 * 4;
      Buffer& st = s.staged[s.staged_next];
      s.staged_next ^= 1;
      if (!st.valid()) st = create_buffer(chunk, kMapWrite | kCopySrc, "upload staging");
      auto* p = static_cast<unsigned char*>(map_for_write(st, padded));  // waits for its last copy
      std::memcpy(p, src + done, n);
      std::memset(p + n, 0, size_t(padded - n));
      unmap(st);
      WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(s.device, nullptr);
      wgpuCommandEncoderCopyBufferToBuffer(enc, st.handle(), 0, dst.handle(), offset + done, padded);
      WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, nullptr);
      wgpuQueueSubmit(s.queue, 1, &cmd);
      wgpuCommandBufferRelease(cmd);
      wgpuCommandEncoderRelease(enc);
      done += n;
    }
  } else {
    if (whole) wgpuQueueWriteBuffer(s.queue, dst.handle(), offset, data, whole);
    if (whole != bytes) {  // WriteBuffer moves whole words; pad the tail with zeros
      unsigned char tail[4] = {0, 0, 0, 0};
      std::memcpy(tail, static_cast<const unsigned char*>(data) + whole, bytes - whole);
      wgpuQueueWriteBuffer(s.queue, dst.handle(), offset + whole, tail, 4);
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.stats_mutex);
    s.stats.write_ms += ms_between(t0, steady::now());
    s.stats.writes += 1;
    s.stats.bytes_written += bytes;
  }
  s.throw_pending();
}

void Context::read(const Buffer& src, void* data, uint64_t bytes, uint64_t offset) {
  Impl& s = *impl_;
  if (offset + bytes > src.size()) {
    throw Error(fmt::format("read of {} bytes at offset {} overruns buffer '{}' of {} bytes", bytes, offset,
                            src.label(), src.size()));
  }
  if (offset % 4 != 0) throw Error(fmt::format("read offset {} from '{}' is not a multiple of 4", offset, src.label()));
  if (bytes == 0) return;
  const uint64_t padded = (bytes + 3) / 4 * 4;
  Buffer staging = create_buffer(padded, kMapRead | kCopyDst, fmt::format("readback of {}", src.label()));
  WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(s.device, nullptr);
  wgpuCommandEncoderCopyBufferToBuffer(enc, src.handle(), offset, staging.handle(), 0, padded);
  WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, nullptr);
  wgpuQueueSubmit(s.queue, 1, &cmd);
  wgpuCommandBufferRelease(cmd);
  wgpuCommandEncoderRelease(enc);

  map_for_read({&staging});
  std::memcpy(data, mapped(staging, bytes), bytes);
  unmap(staging);
}

namespace {

// What a buffer map reports (map_for_read, map_for_write).
struct MapResult : CallbackState {
  WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error;
  std::string message;
};

// Starts mapping all of `b` with `mode`, reporting into `result`.
WGPUFuture map_async(const Buffer& b, WGPUMapMode mode, Pending<MapResult>& result) {
  WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView msg, void* ud, void*) {
    auto* r = arrived<MapResult>(ud);
    r->status = status;
    r->message = str(msg);
  };
  cb.userdata1 = result.userdata();
  return wgpuBufferMapAsync(b.handle(), mode, 0, b.size(), cb);
}

}  // namespace

void Context::map_for_read(const std::vector<const Buffer*>& staging) {
  Impl& s = *impl_;
  // Heap-owned states: when a wait times out, the maps still pending call
  // back later, from ~Context at the latest.
  std::vector<Pending<MapResult>> results;
  results.reserve(staging.size());
  std::vector<WGPUFutureWaitInfo> futures(staging.size());
  for (size_t i = 0; i < staging.size(); ++i) {
    const Buffer& b = *staging[i];
    if (!(b.usage() & kMapRead)) {
      throw Error(fmt::format("map_for_read: buffer '{}' was not created with MapRead usage", b.label()));
    }
    results.emplace_back(s);
    futures[i] = WGPUFutureWaitInfo{map_async(b, WGPUMapMode_Read, results.back()), false};
  }
  // The maps complete in submission order; wait for each (a completed one
  // returns at once).
  for (size_t i = 0; i < staging.size(); ++i) s.wait(futures[i].future, "mapping a readback buffer");
  s.throw_pending();
  for (size_t i = 0; i < staging.size(); ++i) {
    if (results[i]->status != WGPUMapAsyncStatus_Success) {
      // Leave none mapped: a later run copies into them again.
      for (size_t k = 0; k < staging.size(); ++k) {
        if (results[k]->status == WGPUMapAsyncStatus_Success) wgpuBufferUnmap(staging[k]->handle());
      }
      throw GpuError(fmt::format("mapping the readback buffer '{}' failed: {}", staging[i]->label(),
                                 results[i]->message));
    }
  }
}

const void* Context::mapped(const Buffer& staging, uint64_t bytes) {
  if (bytes > staging.size()) {
    throw Error(fmt::format("mapped: {} bytes of the {}-byte buffer '{}'", bytes, staging.size(), staging.label()));
  }
  const void* p = wgpuBufferGetConstMappedRange(staging.handle(), 0, (bytes + 3) / 4 * 4);
  if (!p) throw GpuError(fmt::format("the mapped range of '{}' is null (not mapped for reading?)", staging.label()));
  return p;
}

void Context::unmap(const Buffer& staging) { wgpuBufferUnmap(staging.handle()); }

void* Context::map_for_write(const Buffer& staging, uint64_t bytes) {
  Impl& s = *impl_;
  if (!(staging.usage() & kMapWrite)) {
    throw Error(fmt::format("map_for_write: buffer '{}' was not created with MapWrite usage", staging.label()));
  }
  const uint64_t padded = (bytes + 3) / 4 * 4;
  if (padded > staging.size()) {
    throw Error(fmt::format("map_for_write: {} bytes of the {}-byte buffer '{}'", bytes, staging.size(),
                            staging.label()));
  }
  if (wgpuBufferGetMapState(staging.handle()) != WGPUBufferMapState_Mapped) {
    Pending<MapResult> result(s);
    s.wait(map_async(staging, WGPUMapMode_Write, result), "mapping an upload buffer");
    s.throw_pending();
    if (result->status != WGPUMapAsyncStatus_Success) {
      throw GpuError(fmt::format("mapping the upload buffer '{}' failed: {}", staging.label(), result->message));
    }
  }
  void* p = wgpuBufferGetMappedRange(staging.handle(), 0, padded);
  if (!p) throw GpuError(fmt::format("the mapped range of '{}' is null (not mapped for writing?)", staging.label()));
  return p;
}

void Context::clear(const Buffer& dst, uint64_t offset, uint64_t bytes) {
  Impl& s = *impl_;
  if (bytes == ~uint64_t(0)) bytes = dst.size() - offset;
  WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(s.device, nullptr);
  wgpuCommandEncoderClearBuffer(enc, dst.handle(), offset, bytes);
  WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, nullptr);
  wgpuQueueSubmit(s.queue, 1, &cmd);
  wgpuCommandBufferRelease(cmd);
  wgpuCommandEncoderRelease(enc);
  s.throw_pending();
}

Buffer Context::uniform(const void* data, uint64_t bytes, std::string_view label) {
  Buffer b = create_buffer(bytes, kUniform | kCopyDst, label.empty() ? std::string_view("uniforms") : label);
  write(b, data, bytes);
  return b;
}

const Buffer& Context::dummy_buffer() {
  Impl& s = *impl_;
  if (!s.dummy.valid()) {
    s.dummy = create_buffer(64, kStorageUsage, "absent optional input");
    clear(s.dummy);
  }
  return s.dummy;
}

void Context::wait_idle() {
  Impl& s = *impl_;
  WGPUQueueWorkDoneCallbackInfo cb = WGPU_QUEUE_WORK_DONE_CALLBACK_INFO_INIT;
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUQueueWorkDoneStatus, WGPUStringView, void*, void*) {};
  s.wait(wgpuQueueOnSubmittedWorkDone(s.queue, cb), "waiting for the GPU queue");
  s.throw_pending();
}

// The bindings a shader declares `var<storage, read_write>`, as a bit mask
// (Graph::remove_dead_dispatches needs what a dispatch may write).
static uint64_t writable_bindings(std::string_view wgsl) {
  static const std::regex decl(R"(@binding\s*\(\s*(\d+)\s*\)[^;]*?var\s*<\s*storage\s*,\s*read_write\s*>)");
  uint64_t mask = 0;
  const std::string text(wgsl);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it) {
    const unsigned long i = std::stoul((*it)[1].str());
    if (i < 64) mask |= uint64_t(1) << i;
  }
  return mask;
}

// ---- Pipeline: the pending asynchronous creation ---------------------------

namespace {
// WGNN_PIPELINE_TIMES=1: one line on stderr per pipeline created, with its
// time (one at a time: the creation; asynchronous: the wait when it was
// first needed, and how long before that it was asked for), to find the
// kernels whose compiles a first run waits for.
bool log_pipeline_times(const Context::Impl& s) { return s.settings.is("WGNN_PIPELINE_TIMES", "1"); }
}  // namespace


struct Pipeline::Async {
  struct State : CallbackState {
    WGPUComputePipeline pipeline = nullptr;  // owned until taken
    std::string message;
    ~State() override {
      if (pipeline) wgpuComputePipelineRelease(pipeline);
    }
  };
  explicit Async(Context::Impl& i) : impl(&i), state(i) {}
  Context::Impl* impl;
  Pending<State> state;
  WGPUFuture future{};
  DiskCacheCounters disk0;
  steady::time_point t0;
  std::mutex mutex;
  bool done = false;
  std::string error;  // what resolving found, thrown again at every later use
};

// (After Pipeline::Async, whose pending creations it waits for.)
void Context::finish_pending_pipelines(Impl& s, const char* why) {
  for (auto& [key, p] : s.pipelines) {
    if (!p || !p->async_) continue;
    Pipeline::Async& a = *p->async_;
    std::lock_guard<std::mutex> lock(a.mutex);
    if (a.done) continue;
    try {
      s.wait(a.future, why, 60ull * 1000000000ull);
    } catch (const std::exception&) {
    }
  }
}

Context::~Context() {
  std::lock_guard<std::mutex> lifetime(lifetime_mutex());
  Impl& s = *impl_;
  live_contexts().erase(&s);
  // Creations still running on Dawn's workers finish before the device
  // goes: destroying it under them crashed the process at exit on an H200
  // (a test that asked for many pipelines and never used them; never under
  // WGNN_ASYNC_PIPELINES=0). Bounded; a destructor never throws.
  Context::finish_pending_pipelines(s, "finishing a compute pipeline before the device is destroyed");
  s.pipelines.clear();
  s.dummy = Buffer();
  if (s.queue) wgpuQueueRelease(std::exchange(s.queue, nullptr));
  if (s.device) {
    wgpuDeviceDestroy(s.device);
    wgpuDeviceRelease(std::exchange(s.device, nullptr));
  }
  if (s.adapter) wgpuAdapterRelease(std::exchange(s.adapter, nullptr));
  if (s.instance) {
    wgpuInstanceProcessEvents(s.instance);
    wgpuInstanceRelease(std::exchange(s.instance, nullptr));
  }
  // Releasing the instance calls back every pending callback (cancelled).
  // A state still uncalled would mean the instance lives on (something
  // holds a reference): it is kept for the process, never freed under Dawn.
  std::lock_guard<std::mutex> lock(s.callback_mutex);
  for (auto& state : s.uncalled) {
    if (!state->called) {
      static std::mutex m;
      static std::vector<std::shared_ptr<CallbackState>> for_the_process;
      std::lock_guard<std::mutex> keep(m);
      for_the_process.push_back(std::move(state));
    }
  }
  s.uncalled.clear();
}

const Pipeline& Context::pipeline(std::string_view name, std::string_view wgsl, const Constants& constants,
                                  std::string_view entry) {
  Impl& s = *impl_;
  std::string key;
  key.reserve(wgsl.size() + 64);
  key.append(entry).push_back('\0');
  for (const auto& [k, v] : constants) key += fmt::format("{}={:a};", k, v);
  key.push_back('\0');
  key.append(wgsl);
  std::lock_guard<std::mutex> lock(s.pipeline_mutex);
  if (auto it = s.pipelines.find(key); it != s.pipelines.end()) {
    ++s.cache_hits;
    return *it->second;
  }
  ++s.cache_misses;
  const DiskCacheCounters disk0 = s.disk_cache ? s.disk_cache->counters() : DiskCacheCounters{};
  const auto t_module = steady::now();

  // Compile, then turn the first error message into "line L, column C".
  WGPUShaderSourceWGSL src = WGPU_SHADER_SOURCE_WGSL_INIT;
  src.code = sv(wgsl);
  WGPUShaderModuleDescriptor mdesc = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
  mdesc.nextInChain = &src.chain;
  mdesc.label = sv(name);
  wgpuDevicePushErrorScope(s.device, WGPUErrorFilter_Validation);
  WGPUShaderModule module = wgpuDeviceCreateShaderModule(s.device, &mdesc);
  // The state owns copies of the text and name: a callback after a timed-out
  // wait must not read the caller's strings.
  struct Compile : CallbackState {
    std::string error;
    std::string text;
    std::string name;
  };
  Pending<Compile> compile(s);
  compile->text = std::string(wgsl);
  compile->name = std::string(name);
  WGPUCompilationInfoCallbackInfo ccb = WGPU_COMPILATION_INFO_CALLBACK_INFO_INIT;
  ccb.mode = WGPUCallbackMode_WaitAnyOnly;
  ccb.userdata1 = compile.userdata();
  ccb.callback = [](WGPUCompilationInfoRequestStatus status, const WGPUCompilationInfo* info, void* ud, void*) {
    auto* c = arrived<Compile>(ud);
    if (status != WGPUCompilationInfoRequestStatus_Success || !info) return;
    for (size_t i = 0; i < info->messageCount; ++i) {
      const WGPUCompilationMessage& m = info->messages[i];
      if (m.type != WGPUCompilationMessageType_Error) continue;
      std::string line_text;
      {
        std::istringstream in{std::string(c->text)};
        std::string l;
        for (uint64_t n = 1; std::getline(in, l); ++n) {
          if (n == m.lineNum) {
            line_text = l;
            break;
          }
        }
      }
      if (!c->error.empty()) c->error += "\n";
      c->error += fmt::format("WGSL error in '{}' at line {}, column {}: {}\n    {}", c->name, m.lineNum,
                                   m.linePos, str(m.message), line_text);
    }
  };
  std::string scope_error;
  try {
    s.wait(wgpuShaderModuleGetCompilationInfo(module, ccb), "compiling a WGSL shader");
    scope_error = s.pop_scope();
  } catch (...) {
    wgpuShaderModuleRelease(module);
    throw;
  }
  if (!compile->error.empty() || !scope_error.empty()) {
    wgpuShaderModuleRelease(module);
    throw GpuError(!compile->error.empty() ? compile->error : fmt::format("shader '{}': {}", name, scope_error));
  }

  const auto t_pipeline = steady::now();
  std::vector<WGPUConstantEntry> entries;
  for (const auto& [k, v] : constants) {
    WGPUConstantEntry e = WGPU_CONSTANT_ENTRY_INIT;
    e.key = sv(k);
    e.value = v;
    entries.push_back(e);
  }
  WGPUComputePipelineDescriptor pdesc = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
  pdesc.label = sv(name);
  pdesc.compute.module = module;
  pdesc.compute.entryPoint = sv(entry);
  pdesc.compute.constantCount = entries.size();
  pdesc.compute.constants = entries.data();
  auto p = std::make_unique<Pipeline>();
  p->name_ = std::string(name);
  p->wgsl_ = std::string(wgsl);
  p->tensor_cores_ = p->wgsl_.find("\n// wgnn: tensor-core kernel\n") != std::string::npos;
  p->entry_ = std::string(entry);
  p->constants_ = constants;
  p->writes_ = writable_bindings(wgsl);
  if (s.async_pipelines) {
    // Dawn copies what it needs from the descriptor; the module may go now.
    p->async_ = std::make_unique<Pipeline::Async>(s);
    Pipeline::Async& a = *p->async_;
    a.disk0 = disk0;
    a.t0 = t_pipeline;
    WGPUCreateComputePipelineAsyncCallbackInfo cb = WGPU_CREATE_COMPUTE_PIPELINE_ASYNC_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.userdata1 = a.state.userdata();
    cb.callback = [](WGPUCreatePipelineAsyncStatus, WGPUComputePipeline made, WGPUStringView message, void* ud, void*) {
      auto* st = arrived<Pipeline::Async::State>(ud);
      st->pipeline = made;  // null on failure, whatever the binary numbers the statuses
      st->message = str(message);
    };
    a.future = wgpuDeviceCreateComputePipelineAsync(s.device, &pdesc, cb);
    wgpuShaderModuleRelease(module);
    {
      std::lock_guard<std::mutex> stats_lock(s.stats_mutex);
      s.stats.shader_module_ms += ms_between(t_module, t_pipeline);
    }
  } else {
    WGPUComputePipeline cp = nullptr;
    try {
      cp = s.scoped(fmt::format("creating the compute pipeline '{}'", name),
                    [&] { return wgpuDeviceCreateComputePipeline(s.device, &pdesc); });
    } catch (...) {
      wgpuShaderModuleRelease(module);
      throw;
    }
    wgpuShaderModuleRelease(module);
    const auto t_end = steady::now();
    if (log_pipeline_times(s)) {
      fmt::print(stderr, "wgnn: pipeline '{}': shader module {:.1f} ms, created in {:.1f} ms\n", name,
                 ms_between(t_module, t_pipeline), ms_between(t_pipeline, t_end));
    }
    {
      std::lock_guard<std::mutex> stats_lock(s.stats_mutex);
      s.stats.shader_module_ms += ms_between(t_module, t_pipeline);
      s.stats.pipeline_ms += ms_between(t_pipeline, t_end);
      if (s.disk_cache) {
        // From disk alone: Dawn found what it looked up and compiled nothing
        // it had to store.
        const DiskCacheCounters disk1 = s.disk_cache->counters();
        if (disk1.hits > disk0.hits && disk1.misses == disk0.misses && disk1.stores == disk0.stores) {
          ++s.stats.pipelines_from_disk;
        }
      }
    }
    p->pipeline_ = std::shared_ptr<WGPUComputePipelineImpl>(cp, wgpuComputePipelineRelease);
    p->layout_ = std::shared_ptr<WGPUBindGroupLayoutImpl>(wgpuComputePipelineGetBindGroupLayout(cp, 0),
                                                          wgpuBindGroupLayoutRelease);
  }
  const Pipeline& ref = *p;
  s.pipelines.emplace(std::move(key), std::move(p));
  return ref;
}

namespace {

// A list of pipelines in the disk cache: "WGNNPL1\n", a count, then per
// pipeline its name, entry point, constants (key, value bits) and WGSL,
// each string a u32 length and its bytes. The entry's checksum covers it.
constexpr std::string_view kListMagic = "WGNNPL1\n";
std::string list_key(std::string_view id) { return fmt::format("wgnn pipeline list\n{}", id); }

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put_str(std::string& out, std::string_view v) {
  put_u32(out, uint32_t(v.size()));
  out.append(v);
}

struct ListReader {
  std::string_view in;
  bool ok = true;
  template <typename T>
  T fixed() {
    T v = 0;
    if (in.size() < sizeof v) return ok = false, T(0);
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  std::string_view str() {
    const uint32_t n = u32();
    if (!ok || in.size() < n) return ok = false, std::string_view();
    std::string_view v = in.substr(0, n);
    in.remove_prefix(n);
    return v;
  }
};

}  // namespace

void Context::remember_pipelines(std::string_view id, const std::vector<const Pipeline*>& pipelines,
                                 const std::vector<uint64_t>& buffer_sizes) {
  Impl& s = *impl_;
  if (!s.disk_cache || pipelines.empty()) return;
  std::string out(kListMagic);
  put_u32(out, uint32_t(pipelines.size()));
  for (const Pipeline* p : pipelines) {
    put_str(out, p->name_);
    put_str(out, p->entry_);
    put_u32(out, uint32_t(p->constants_.size()));
    for (const auto& [k, v] : p->constants_) {
      put_str(out, k);
      uint64_t bits = 0;
      std::memcpy(&bits, &v, 8);
      out.append(reinterpret_cast<const char*>(&bits), 8);
    }
    put_str(out, p->wgsl_);
  }
  // After the pipelines (a list without it reads as no buffers).
  put_u32(out, uint32_t(buffer_sizes.size()));
  for (uint64_t b : buffer_sizes) out.append(reinterpret_cast<const char*>(&b), 8);
  // Each process with the model ends here: write only what changed.
  std::string old;
  if (s.disk_cache->get(list_key(id), &old) && old == out) return;
  s.disk_cache->put(list_key(id), out);
}

size_t Context::prefetch_pipelines(std::string_view id, std::vector<uint64_t>* buffer_sizes) {
  Impl& s = *impl_;
  if (!s.disk_cache) return 0;
  std::string bytes;
  if (!s.disk_cache->get(list_key(id), &bytes)) return 0;
  ListReader r{bytes};
  if (r.in.substr(0, kListMagic.size()) != kListMagic) return 0;
  r.in.remove_prefix(kListMagic.size());
  const uint32_t count = r.u32();
  size_t asked = 0;
  for (uint32_t i = 0; r.ok && i < count; ++i) {
    const std::string_view name = r.str(), entry = r.str();
    const uint32_t n_constants = r.u32();
    Constants constants;
    for (uint32_t c = 0; r.ok && c < n_constants && c < 256; ++c) {
      const std::string_view k = r.str();
      const uint64_t bits = r.u64();
      double v = 0;
      std::memcpy(&v, &bits, 8);
      constants.emplace_back(std::string(k), v);
    }
    const std::string_view wgsl = r.str();
    if (!r.ok || n_constants > 256) break;
    try {
      pipeline(name, wgsl, constants, entry);
      ++asked;
    } catch (const std::exception&) {
      // Left to fail where it is used, if it is.
    }
  }
  if (buffer_sizes && r.ok && asked == count) {
    // Sizes within this device's limit, at most 4096 of them: anything else
    // is not a list this build wrote, and none is handed back.
    const uint32_t n = r.u32();
    std::vector<uint64_t> sizes;
    for (uint32_t i = 0; r.ok && n <= 4096 && i < n; ++i) sizes.push_back(r.u64());
    const bool fits = std::all_of(sizes.begin(), sizes.end(),
                                  [&](uint64_t b) { return b > 0 && b <= s.limits.max_buffer_size; });
    if (r.ok && n <= 4096 && fits) *buffer_sizes = std::move(sizes);
  }
  return asked;
}

Pipeline::Pipeline() = default;
Pipeline::~Pipeline() = default;

WGPUComputePipelineImpl* Pipeline::handle() const {
  resolve();
  return pipeline_.get();
}

WGPUBindGroupLayoutImpl* Pipeline::layout() const {
  resolve();
  return layout_.get();
}

void Pipeline::resolve() const {
  if (!async_) return;
  Async& a = *async_;
  std::lock_guard<std::mutex> lock(a.mutex);
  if (!a.done) {
    const auto t_wait = steady::now();
    // A compile is the host's work (Tint, the driver's compiler): at least
    // 600 s even where WGNN_GPU_TIMEOUT_S bounds the GPU's waits tighter. A
    // timeout throws and leaves the creation pending.
    a.impl->wait(a.future, "creating a compute pipeline", std::max<uint64_t>(a.impl->timeout_ns, 600ull * 1000000000ull));
    take(a, t_wait);
  }
  if (!a.error.empty()) throw GpuError(a.error);
}

bool Pipeline::ready() const {
  if (!async_) return true;
  Async& a = *async_;
  std::lock_guard<std::mutex> lock(a.mutex);
  if (a.done) return true;
  const auto t_wait = steady::now();
  WGPUFutureWaitInfo wi{a.future, false};
  if (wgpuInstanceWaitAny(a.impl->instance, 1, &wi, 0) != WGPUWaitStatus_Success || !wi.completed) return false;
  take(a, t_wait);
  return true;
}

void Pipeline::take(Async& a, steady::time_point t_wait) const {
  Context::Impl& s = *a.impl;
  a.done = true;
  const auto t_end = steady::now();
  if (log_pipeline_times(s)) {
    fmt::print(stderr, "wgnn: pipeline '{}': asked for {:.1f} ms before it was needed, then waited {:.1f} ms\n",
               name_, ms_between(a.t0, t_wait), ms_between(t_wait, t_end));
  }
  if (!a.state->pipeline) {
    a.error = fmt::format("creating the compute pipeline '{}': {}", name_,
                          a.state->message.empty() ? "failed (no message)" : a.state->message);
  } else {
    WGPUComputePipeline cp = a.state->pipeline;
    a.state->pipeline = nullptr;
    pipeline_ = std::shared_ptr<WGPUComputePipelineImpl>(cp, wgpuComputePipelineRelease);
    layout_ = std::shared_ptr<WGPUBindGroupLayoutImpl>(wgpuComputePipelineGetBindGroupLayout(cp, 0),
                                                       wgpuBindGroupLayoutRelease);
  }
  std::lock_guard<std::mutex> stats_lock(s.stats_mutex);
  s.stats.pipeline_ms += ms_between(t_wait, t_end);
  if (s.disk_cache && pipeline_) {
    const DiskCacheCounters disk1 = s.disk_cache->counters();
    if (disk1.hits > a.disk0.hits && disk1.misses == a.disk0.misses && disk1.stores == a.disk0.stores) {
      ++s.stats.pipelines_from_disk;
    }
  }
}

const Pipeline& Context::kernel(std::string_view path, const Constants& constants, std::string_view entry) {
  return pipeline(path, shader_source(path), constants, entry);
}

BindGroup Context::bind_group(const Pipeline& pipeline, const std::vector<BufferBinding>& bindings,
                              std::string_view what) {
  Impl& s = *impl_;
  std::vector<WGPUBindGroupEntry> entries;
  entries.reserve(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    const BufferBinding& b = bindings[i];
    if (!b.buffer || !b.buffer->valid()) {
      throw Error(fmt::format("{}: binding {} of '{}' has no buffer", what.empty() ? "dispatch" : what, i,
                              pipeline.name()));
    }
    const uint64_t size = b.size == ~uint64_t(0) ? b.buffer->size() - b.offset : b.size;
    const bool is_uniform = (b.buffer->usage() & kUniform) != 0;
    const uint64_t limit =
        is_uniform ? s.limits.max_uniform_buffer_binding_size : s.limits.max_storage_buffer_binding_size;
    if (size > limit) {
      throw Error(fmt::format("{}: buffer '{}' bound as binding {} of '{}' is {}, over this device's {} of {}",
                              what.empty() ? "dispatch" : what, b.buffer->label(), i, pipeline.name(),
                              human_bytes(size),
                              is_uniform ? "maxUniformBufferBindingSize" : "maxStorageBufferBindingSize",
                              human_bytes(limit)));
    }
    const uint32_t align =
        is_uniform ? s.limits.min_uniform_buffer_offset_alignment : s.limits.min_storage_buffer_offset_alignment;
    if (align && b.offset % align != 0) {
      throw Error(fmt::format("{}: binding {} of '{}' starts at offset {}, not a multiple of the device's {}",
                              what.empty() ? "dispatch" : what, i, pipeline.name(), b.offset, align));
    }
    WGPUBindGroupEntry e = WGPU_BIND_GROUP_ENTRY_INIT;
    e.binding = uint32_t(i);
    e.buffer = b.buffer->handle();
    e.offset = b.offset;
    e.size = size;
    entries.push_back(e);
  }
  WGPUBindGroupDescriptor desc = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
  desc.layout = pipeline.layout();
  desc.entryCount = entries.size();
  desc.entries = entries.data();
  const auto t0 = steady::now();
  WGPUBindGroup g = s.scoped(fmt::format("binding buffers to '{}'", pipeline.name()),
                             [&] { return wgpuDeviceCreateBindGroup(s.device, &desc); });
  ++s.bind_groups_created;
  {
    std::lock_guard<std::mutex> lock(s.stats_mutex);
    s.stats.bind_group_ms += ms_between(t0, steady::now());
  }
  BindGroup out;
  out.group_ = std::shared_ptr<WGPUBindGroupImpl>(g, wgpuBindGroupRelease);
  return out;
}

std::string_view shader_source(std::string_view path) {
  const auto& all = embedded_shaders();
  auto it = all.find(path);
  if (it == all.end()) throw Error(fmt::format("no embedded WGSL kernel named '{}'", path));
  return it->second;
}

}  // namespace wgnn::gpu
