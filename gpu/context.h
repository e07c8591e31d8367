#pragma once
// The WebGPU device layer. gpu/ is the only part of wgnn that includes
// webgpu.h; everything above it sees these small RAII types.
//
//   Context    instance, adapter, device; limits and features; buffers;
//              the pipeline cache; errors -> exceptions
//   Buffer     a GPU buffer (shared handle) with its size
//   Pipeline   a compiled compute pipeline (cached per process)
//   Recorder   (gpu/recorder.h) many dispatches, one command buffer, one submit
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/adapters.h"
#include "gpu/error.h"
#include "util/settings.h"

struct WGPUBufferImpl;
struct WGPUComputePipelineImpl;
struct WGPUBindGroupLayoutImpl;
struct WGPUBindGroupImpl;
struct WGPUDeviceImpl;
struct WGPUQueueImpl;
struct WGPUInstanceImpl;

namespace wgnn::gpu {

// The limits wgnn cares about, as granted to the device (the adapter's maxima).
struct Limits {
  uint64_t max_buffer_size = 0;
  uint64_t max_storage_buffer_binding_size = 0;
  uint64_t max_uniform_buffer_binding_size = 0;
  uint32_t max_storage_buffers_per_shader_stage = 0;
  uint32_t max_bind_groups = 0;
  uint32_t max_bindings_per_bind_group = 0;
  uint32_t min_storage_buffer_offset_alignment = 0;
  uint32_t min_uniform_buffer_offset_alignment = 0;
  uint32_t max_compute_workgroup_storage_size = 0;
  uint32_t max_compute_invocations_per_workgroup = 0;
  uint32_t max_compute_workgroup_size_x = 0;
  uint32_t max_compute_workgroup_size_y = 0;
  uint32_t max_compute_workgroup_size_z = 0;
  uint32_t max_compute_workgroups_per_dimension = 0;
};

struct AdapterInfo {
  std::string name;          // device name, e.g. "NVIDIA H200"
  std::string vendor;
  std::string architecture;
  std::string description;   // driver description
  std::string backend;       // "Vulkan", "Metal", ...
  std::string adapter_type;  // "discrete GPU", "integrated GPU", "CPU", "unknown"
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint32_t subgroup_min_size = 0;
  uint32_t subgroup_max_size = 0;
  std::string driver_source;  // how the driver was chosen (see gpu/driver.h)
  int index = 0;              // in Context::list_adapters' list
  std::string uuid;           // the Vulkan device UUID (CUDA's, on NVIDIA); "" where unknown
  std::string pci_bus;        // "dddd:bb:dd.f"; "" where unknown
  std::string selected_by;    // why this adapter: a selector, CUDA_VISIBLE_DEVICES, or Dawn's choice
};

// One shape and type combination of WGSL subgroup matrices the adapter
// supports: a subgroup multiplies an MxK `component` matrix by a KxN one into
// an MxN `result` matrix. Types: "f32", "f16", "u32", "i32", "u8", "i8".
struct SubgroupMatrixConfig {
  std::string component;
  std::string result;
  uint32_t m = 0, n = 0, k = 0;
};

struct Features {
  bool shader_f16 = false;
  bool subgroups = false;
  bool timestamp_query = false;
  // chromium-experimental-subgroup-matrix (`enable chromium_experimental_subgroup_matrix;`,
  // tensor cores): granted only with ContextOptions::allow_unsafe_apis, and
  // only a Dawn built from source offers it on Vulkan (docs/DAWN.md).
  bool subgroup_matrix = false;
  std::vector<SubgroupMatrixConfig> subgroup_matrix_configs;  // with a Dawn from source
  bool unsafe_apis = false;  // the allow_unsafe_apis toggle is on
  // implicit-device-synchronization: Dawn locks the device in every call but
  // encoding, so buffers may be made on another thread (BufferBatch).
  bool thread_safe = false;
  // The WGSL language feature packed_4x8_integer_dot_product (dot4I8Packed,
  // dot4U8Packed, pack4xI8, ...), which the instance offers.
  bool packed_4x8_dot = false;
  std::vector<std::string> adapter_features;  // every feature the adapter offers, by name
};

// Buffer usage bits, the values of WGPUBufferUsage.
enum BufferUsage : uint64_t {
  kMapRead = 0x1,
  kMapWrite = 0x2,
  kCopySrc = 0x4,
  kCopyDst = 0x8,
  kUniform = 0x40,
  kStorage = 0x80,
  kQueryResolve = 0x200,
};
inline constexpr uint64_t kStorageUsage = kStorage | kCopySrc | kCopyDst;

class Context;

class Buffer {
 public:
  Buffer() = default;
  uint64_t size() const { return size_; }
  uint64_t usage() const { return usage_; }
  const std::string& label() const { return *label_; }
  bool valid() const { return handle_ != nullptr; }
  WGPUBufferImpl* handle() const { return handle_.get(); }
  bool operator==(const Buffer& o) const { return handle_ == o.handle_; }

 private:
  friend class Context;
  std::shared_ptr<WGPUBufferImpl> handle_;
  std::shared_ptr<const std::string> label_;
  uint64_t size_ = 0;
  uint64_t usage_ = 0;
};

// A slice of a buffer bound to one binding slot.
struct BufferBinding {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = ~uint64_t(0);  // ~0: from offset to the end
};

// Override constants of a pipeline (WGSL `override` declarations).
using Constants = std::vector<std::pair<std::string, double>>;

// A compute pipeline. Its creation is asynchronous
// (wgpuDeviceCreateComputePipelineAsync: Tint's backend and the driver's
// compiler run on Dawn's worker threads), so the pipelines of a graph
// compile in parallel while the ops record the rest of it; the first use of
// handle() or layout() waits for it (and throws GpuError if it failed,
// naming the pipeline). WGNN_ASYNC_PIPELINES=0 creates each at once instead.
class Pipeline {
 public:
  Pipeline();
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  WGPUComputePipelineImpl* handle() const;
  WGPUBindGroupLayoutImpl* layout() const;
  const std::string& name() const { return name_; }
  // Whether the shader declares @binding(i) of group 0 as
  // var<storage, read_write> (the dispatch may write what is bound there).
  bool writes(size_t i) const { return i < 64 && ((writes_ >> i) & 1u) != 0; }
  // Whether handle() and layout() would return without waiting: created at
  // once, or its asynchronous creation has finished (then taken here; a
  // failed creation counts as ready and throws at its use). Never blocks.
  bool ready() const;
  // Whether it is a tensor-core kernel (its shader says so on a line
  // "// wgnn: tensor-core kernel": on subgroup matrices, or their emulation).
  bool tensor_cores() const { return tensor_cores_; }

 private:
  friend class Context;
  struct Async;
  void resolve() const;
  void take(Async& a, std::chrono::steady_clock::time_point t_wait) const;  // a's result, under a.mutex
  uint64_t writes_ = 0;
  bool tensor_cores_ = false;
  mutable std::shared_ptr<WGPUComputePipelineImpl> pipeline_;
  mutable std::shared_ptr<WGPUBindGroupLayoutImpl> layout_;
  std::string name_;
  // What it was made from, for Context::remember_pipelines.
  std::string wgsl_, entry_;
  Constants constants_;
  mutable std::unique_ptr<Async> async_;  // the pending creation, until resolved
};

// Bind group 0 of a pipeline, made once and reused by as many dispatches as
// need the same buffers.
class BindGroup {
 public:
  WGPUBindGroupImpl* handle() const { return group_.get(); }

 private:
  friend class Context;
  std::shared_ptr<WGPUBindGroupImpl> group_;
};

struct ContextOptions {
  // "auto" (the machine's GPU driver if there is one, else the bundled
  // lavapipe), "gpu" (the system's Vulkan drivers only) or "lavapipe"; or
  // one adapter by a selector (gpu/adapters.h: an index, a UUID,
  // vendor:device, pci:ADDRESS or a part of its name), looked for as "auto"
  // looks. Empty: the environment variable WGNN_ADAPTER, else "auto".
  std::string adapter;
  // Without a selector, an NVIDIA adapter is the one CUDA_VISIBLE_DEVICES
  // (in `settings`) names (gpu/adapters.h, cuda_visible_adapter), as a CUDA
  // program's device 0 would be: how Ray and Slurm hand a process its GPU.
  bool follow_cuda_visible_devices = true;
  // Everything else the runtime can be told (util/settings.h,
  // docs/SETTINGS.md), named as the environment variables the CLI and the
  // bindings map onto it (Settings::from_variables(std::getenv)). The
  // library reads no environment variable: an unset setting is its default.
  // The fields above are taken first where a setting names the same thing
  // (adapter, limits, allow_unsafe_apis, robustness, pipeline_cache).
  Settings settings;
  // Dawn toggles to enable on the device, e.g. "skip_validation".
  std::vector<std::string> enable_toggles;
  // Dawn's allow_unsafe_apis toggle, on the instance, the adapter request and
  // the device; needed for experimental features, subgroup matrices (tensor
  // cores) above all, which the device then gets when the adapter offers
  // them. Unset: the setting WGNN_ALLOW_UNSAFE_APIS (1 on, 0 off), else on
  // with a Dawn that has subgroup matrices (WGNN_DAWN=dawn-node, the default,
  // or source) and off with the npm Dawn, which has none.
  std::optional<bool> allow_unsafe_apis;
  // Dawn's robustness transform (index clamping in every shader): off by
  // default, as in ONNX Runtime's WebGPU provider, since wgnn's kernels
  // check their own bounds; on with this or WGNN_ROBUSTNESS=1.
  bool robustness = false;
  // Which limits and features the device is requested with:
  //   "adapter" (default): the adapter's own limits, with shader-f16,
  //     subgroups and timestamp-query where offered;
  //   "default": WebGPU's default limits (128 MiB storage bindings, 256 MiB
  //     buffers, 16 KiB workgroup storage, 256 invocations per workgroup,
  //     8 storage buffers per stage) and no optional feature but
  //     timestamp-query: what a browser or a small GPU may give, so a suite
  //     run this way proves a model runs there.
  // Empty: the environment variable WGNN_LIMITS, else "adapter".
  std::string limits;
  // Lower caps on two limits, applied by wgnn on top of the device's
  // (0: none): every binding and buffer wgnn makes stays within them, so
  // the paths that split large tensors can be tested with small ones.
  uint64_t max_storage_buffer_binding_size = 0;
  uint64_t max_buffer_size = 0;
  // The pipeline cache on disk (Dawn's blob cache: compiled shaders and the
  // driver's pipeline data, so that a later process compiles nothing it
  // compiled before). Off with false or WGNN_PIPELINE_CACHE=0.
  bool pipeline_cache = true;
  // Its folder: empty for util::cache_dir() (WGNN_CACHE_DIR, else
  // $XDG_CACHE_HOME/wgnn, else ~/.cache/wgnn).
  std::string cache_dir;
  // Its size bound in bytes, for every entry under the folder: 0 for
  // WGNN_PIPELINE_CACHE_MAX_MB (MiB), else 256 MiB. The entries used least
  // recently go first.
  uint64_t pipeline_cache_max_bytes = 0;
  // Ask for Dawn's implicit-device-synchronization where offered
  // (Features::thread_safe): a BufferBatch then makes its buffers on a
  // thread of its own; without it a batch makes none.
  bool thread_safe_device = true;
};

// What this Context has spent creating things, since it was made: where a
// first run's time goes. Times are host wall time in ms.
struct CreationStats {
  uint64_t pipeline_requests = 0;   // pipeline() / kernel() calls
  uint64_t pipeline_hits = 0;       // of them answered from this Context's cache (same WGSL, entry, constants)
  uint64_t pipelines_created = 0;   // the others: compiled
  uint64_t pipelines_from_disk = 0; // of these, created from the disk cache alone (Dawn found every blob
                                    // it looked up and stored none, nor missed any, while it was created:
                                    // with pipelines compiling in parallel, a lower bound)
  double wgsl_ms = 0;               // generating WGSL text (reported by the ops: add_wgsl_time)
  double shader_module_ms = 0;      // wgpuDeviceCreateShaderModule + its compilation info (WGSL parsing)
  double pipeline_ms = 0;           // waiting for pipelines (Tint's backend, the driver's compiler; with
                                    // asynchronous creation, only what compiling did not overlap)
  uint64_t bind_groups = 0;
  double bind_group_ms = 0;
  uint64_t buffers = 0;
  double buffer_ms = 0;
  uint64_t writes = 0, bytes_written = 0;  // queue writes (uploads), their bytes
  double write_ms = 0;                     // host time of the queue writes (the copy happens at the next submit)
};
CreationStats operator-(const CreationStats& a, const CreationStats& b);

// The pipeline cache on disk (ContextOptions::pipeline_cache).
struct DiskCacheStats {
  bool enabled = false;
  std::string folder;  // this Dawn's, driver's and binary's subfolder
  std::string why_off; // when not enabled
  uint64_t max_bytes = 0;
  uint64_t loads = 0, hits = 0, misses = 0, corrupt = 0;  // blobs Dawn looked up; corrupt: files ignored
  uint64_t stores = 0, store_failures = 0, evicted = 0;
  uint64_t loaded_bytes = 0, stored_bytes = 0;
};

// Threading: a Context, and the Graphs and Sessions made on it, may be used
// from one thread at a time. Session::run holds exclusive() for the whole
// run, so sessions sharing a Context may be called from several threads:
// their runs take turns. Sessions on different Contexts run concurrently.
// Creating and destroying Contexts is serialized internally (driver choice
// sets process environment variables).
class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  ~Context();
  // Every adapter the driver choice of `options.adapter` gives, in the
  // order selectors count them. Starts no device.
  static std::vector<AdapterDesc> list_adapters(const ContextOptions& options = {});
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const AdapterInfo& adapter() const;
  const Limits& limits() const;
  // ContextOptions::settings, read by the layers above (kernel choices,
  // sessions, graphs). mutable_settings: for tests that switch a kernel on
  // and off on one device; a change applies to plans built after it.
  const Settings& settings() const;
  Settings& mutable_settings();
  // "adapter" or "default": how the limits and features were requested
  // (ContextOptions::limits).
  const std::string& limits_mode() const;
  const Features& features() const;

  // Buffers. Sizes are rounded up to 16 bytes so vec4 views are valid; a size
  // above maxBufferSize throws an Error naming the size and the limit.
  Buffer create_buffer(uint64_t bytes, uint64_t usage = kStorageUsage, std::string_view label = {});
  Buffer create_buffer(uint64_t bytes, uint64_t usage, std::string_view label, bool counted);
  // A write is ordered before every later submit, as a queue write. Writes
  // of kStagedWriteMin bytes and more go through two staging buffers the
  // Context keeps (kStagedWriteChunk bytes each, used in turn, each part
  // copied by a command submitted at once); smaller ones are queue writes.
  // WGNN_STAGED_WRITES=0: queue writes only.
  static constexpr uint64_t kStagedWriteMin = uint64_t(256) << 10;
  static constexpr uint64_t kStagedWriteChunk = uint64_t(4) << 20;
  void write(const Buffer& dst, const void* data, uint64_t bytes, uint64_t offset = 0);
  void read(const Buffer& src, void* data, uint64_t bytes, uint64_t offset = 0);
  void clear(const Buffer& dst, uint64_t offset = 0, uint64_t bytes = ~uint64_t(0));
  // A uniform buffer holding `bytes` of `data`.
  Buffer uniform(const void* data, uint64_t bytes, std::string_view label = {});
  // A small zero-filled storage buffer standing in for an absent optional
  // input (valid for vec4<f32> views).
  const Buffer& dummy_buffer();

  // Pipelines, compiled once per (source, entry point, constants) and cached.
  // WGSL errors throw an Error naming the shader, line and column.
  const Pipeline& pipeline(std::string_view name, std::string_view wgsl, const Constants& constants = {},
                           std::string_view entry = "main");
  // The same for an embedded kernel file (see gpu/shaders.h).
  const Pipeline& kernel(std::string_view path, const Constants& constants = {}, std::string_view entry = "main");
  uint64_t pipeline_cache_hits() const;
  uint64_t pipeline_cache_misses() const;
  // A list of pipelines kept in the disk cache under `id` (a model and the
  // options it was built with), so that a later process asks for them
  // before it needs them: remember_pipelines() stores their sources,
  // prefetch_pipelines() asks for each again (created asynchronously, from
  // the disk cache, while the caller records) and returns how many it
  // asked for. Without the disk cache both do nothing; a missing or damaged
  // list prefetches nothing, and a source that fails is left to fail where
  // it is used (its error then comes from there).
  // The list also keeps `buffer_sizes` (a Session's readback buffers),
  // which prefetch_pipelines() hands back for a BufferBatch.
  void remember_pipelines(std::string_view id, const std::vector<const Pipeline*>& pipelines,
                          const std::vector<uint64_t>& buffer_sizes = {});
  size_t prefetch_pipelines(std::string_view id, std::vector<uint64_t>* buffer_sizes = nullptr);
  // Time and counts of creation so far (pipelines, bind groups, buffers,
  // uploads), and the disk cache's counters.
  CreationStats creation_stats() const;
  DiskCacheStats disk_cache_stats() const;
  // Time spent above gpu/ generating WGSL for pipeline(), counted in
  // creation_stats().wgsl_ms.
  void add_wgsl_time(double ms);
  // How many buffers and bind groups this context has created so far: a
  // steady-state run of a prepared graph creates none.
  uint64_t buffers_created() const;
  uint64_t bind_groups_created() const;
  // create_buffer() without counting it in buffers_created() and
  // creation_stats(): a BufferBatch's, made on its own thread.
  Buffer create_buffer_uncounted(uint64_t bytes, uint64_t usage, std::string_view label) {
    return create_buffer(bytes, usage, label, false);
  }

  // A bind group for bindings 0..n-1 of `pipeline`. Each binding is checked
  // against maxStorageBufferBindingSize and the offset alignment.
  BindGroup bind_group(const Pipeline& pipeline, const std::vector<BufferBinding>& bindings,
                       std::string_view what = {});

  // Reading through MapRead staging buffers that commands already submitted
  // copy into: map_for_read() maps every one of them for reading (after the
  // work submitted so far) and waits until all are mapped, which also means
  // that the submitted work that wrote them has finished; mapped() is then
  // the first `bytes` of a staging buffer, valid until unmap(). Throws a
  // pending device error.
  void map_for_read(const std::vector<const Buffer*>& staging);
  const void* mapped(const Buffer& staging, uint64_t bytes);
  void unmap(const Buffer& staging);
  // Writing through a MapWrite staging buffer of the caller's own
  // (kMapWrite | kCopySrc), which a command then copies where it belongs:
  // the first `bytes` of it mapped for writing, after every submitted
  // command that reads it has finished (waits for that), writable until
  // unmap(). What queue writes of over 4 MiB cost is a new staging buffer
  // each (Dawn's uploader); one kept and mapped again costs no allocation
  // and no page faults. Throws a pending device error.
  void* map_for_write(const Buffer& staging, uint64_t bytes);

  // Waits until the GPU has finished all submitted work; throws a pending
  // error (validation, device lost) if one was reported.
  void wait_idle();
  // Throws the first error the device reported since the last check.
  void check();

  // A lock on this Context for one user at a time (see the note above the
  // class). Not recursive.
  std::unique_lock<std::mutex> exclusive();

  // Failure injection through Dawn's own paths, for tests of what a caller
  // sees. force_device_loss: the device is lost as after a driver reset
  // (wgpuDeviceForceLoss); every later call throws DeviceLost and the
  // Context stays unusable (a new Context may be created).
  // inject_out_of_memory: Dawn reports an out-of-memory error as it would
  // for a failed allocation; the next call throws GpuError, the device
  // remains usable.
  void force_device_loss(std::string_view message);
  void inject_out_of_memory(std::string_view message);

  // Raw handles for gpu/ internals (recorder, timers).
  WGPUDeviceImpl* device() const;
  WGPUQueueImpl* queue() const;
  WGPUInstanceImpl* instance() const;
  struct Impl;
  Impl& impl() const { return *impl_; }
  // Waits (bounded, never throws) for pipeline creations still running on
  // Dawn's workers: before a device is destroyed, and at exit.
  static void finish_pending_pipelines(Impl& s, const char* why);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wgnn::gpu
