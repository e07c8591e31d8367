#pragma once
// Internal to gpu/: the state behind Context, shared with the recorder.
#include <webgpu/webgpu.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/context.h"
#include "gpu/disk_cache.h"

namespace wgnn::gpu {

inline WGPUStringView sv(std::string_view s) { return WGPUStringView{s.data(), s.size()}; }
inline std::string str(WGPUStringView s) {
  if (!s.data) return {};
  if (s.length == WGPU_STRLEN) return std::string(s.data);
  return std::string(s.data, s.length);
}

// Output structs are filled by the binary, whose struct may be a little
// larger than the header's (the two differ by a few months); a guard area
// keeps such a write inside our memory.
template <typename T>
struct Guarded {
  T value;
  unsigned char guard[256];
  Guarded() { std::memset(static_cast<void*>(this), 0, sizeof(*this)); }
};

// What a Dawn callback writes into (its userdata). It lives on the heap and
// is held until Dawn has called back: a wait that times out returns before
// the callback, which Dawn still calls later (at the latest when the
// instance shuts down, inside ~Context). Every callback sets `called` first.
struct CallbackState {
  bool called = false;
  virtual ~CallbackState() = default;
};

// The callback's userdata as its state, marked called.
template <typename T>
T* arrived(void* userdata) {
  T* state = static_cast<T*>(userdata);
  state->called = true;
  return state;
}

struct Context::Impl {
  WGPUInstance instance = nullptr;
  WGPUAdapter adapter = nullptr;
  WGPUDevice device = nullptr;
  WGPUQueue queue = nullptr;
  // Toggles given to the instance, every adapter request and the device
  // (string literals).
  std::vector<const char*> adapter_toggles;
  AdapterInfo info;
  Limits limits;
  std::string limits_mode = "adapter";
  Features features;

  std::mutex error_mutex;
  std::string pending_error;  // first uncaptured error since the last check
  bool lost = false;
  std::string lost_message;

  std::mutex use_mutex;  // Context::exclusive()

  std::mutex pipeline_mutex;
  std::unordered_map<std::string, std::unique_ptr<Pipeline>> pipelines;
  uint64_t cache_hits = 0, cache_misses = 0;
  uint64_t buffers_created = 0, bind_groups_created = 0;
  CreationStats stats;  // its counts other than the four above
  std::mutex stats_mutex;  // stats.wgsl_ms may come from any thread
  std::unique_ptr<DiskCache> disk_cache;
  std::string disk_cache_off;  // why there is none

  Buffer dummy;
  // Context::write's staging for large writes: two buffers kept and mapped
  // again, used in turn (WGNN_STAGED_WRITES=0: queue writes only).
  bool staged_writes = true;
  std::mutex staged_mutex;
  Buffer staged[2];
  size_t staged_next = 0;
  uint64_t timeout_ns = 600ull * 1000 * 1000 * 1000;
  // A wait first polls for this long (WGNN_SPIN_WAIT_US), then blocks:
  // kDefaultSpinNs on a GPU, 0 on a CPU adapter (Context's constructor).
  static constexpr uint64_t kDefaultSpinNs = 20ull * 1000 * 1000;
  uint64_t spin_ns = 0;
  bool async_pipelines = true;  // WGNN_ASYNC_PIPELINES=0: each pipeline created at once

  // Callback states whose callback had not run when their wait gave up
  // (see CallbackState); kept until Dawn calls them.
  std::mutex callback_mutex;
  std::vector<std::shared_ptr<CallbackState>> uncalled;
  void keep_until_called(std::shared_ptr<CallbackState> state);

  // A new adapter from `instance`, with `adapter_toggles`: the one at
  // `adapter_index` in enumerate_adapters' list (gpu/adapter_enum.h); null
  // when there is none, with the reason in `message`.
  WGPUAdapter request_adapter(std::string* message);
  int adapter_index = 0;
  Settings settings;  // ContextOptions::settings
  // Blocks until `future` completes (or the timeout passes: then throws).
  void wait(WGPUFuture future, const char* what);
  // The same with its own limit (pipeline compiles: host work, not the GPU's).
  void wait(WGPUFuture future, const char* what, uint64_t limit_ns);
  // Runs `fn` inside validation and out-of-memory error scopes and throws
  // GpuError with `what` and Dawn's message if either caught something.
  template <typename Fn>
  auto scoped(const std::string& what, Fn&& fn);
  std::string pop_scope();
  void throw_pending();
};

// A callback state owned here and, once this goes out of scope before Dawn
// has called back (a wait timed out, an exception unwound), by the Context.
template <typename T>
class Pending {
 public:
  explicit Pending(Context::Impl& impl) : impl_(&impl), state_(std::make_shared<T>()) {}
  Pending(Pending&&) = default;
  Pending& operator=(Pending&&) = default;
  ~Pending() {
    if (state_ && !state_->called) impl_->keep_until_called(std::move(state_));
  }
  T* operator->() const { return state_.get(); }
  T& operator*() const { return *state_; }
  void* userdata() const { return state_.get(); }

 private:
  Context::Impl* impl_;
  std::shared_ptr<T> state_;
};

template <typename Fn>
auto Context::Impl::scoped(const std::string& what, Fn&& fn) {
  wgpuDevicePushErrorScope(device, WGPUErrorFilter_OutOfMemory);
  wgpuDevicePushErrorScope(device, WGPUErrorFilter_Validation);
  auto result = fn();
  std::string validation = pop_scope();
  std::string oom = pop_scope();
  if (!validation.empty()) throw GpuError(what + ": " + validation);
  if (!oom.empty()) throw GpuError(what + ": out of GPU memory: " + oom);
  return result;
}

}  // namespace wgnn::gpu
