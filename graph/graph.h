#pragma once
// The graph: the single owner of a model's tensors and GPU work. Ops add
// tensors and dispatches to it; prepare() gives every tensor its storage and
// builds every bind group once; run() records the dispatches into compute
// passes submitted in growing parts, and waits once.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/context.h"
#include "gpu/dispatch.h"
#include "gpu/recorder.h"
#include "graph/device_tensor.h"
#include "graph/host_tensor.h"
#include "graph/tensor.h"

namespace wgnn::gpu {
class BufferBatch;
}

namespace wgnn {

class ConstantStore;
class Graph;

// The buffers of graphs that take turns: one run at a time over the set (a
// Session runs one graph at a time; the GPU's queue orders runs that are
// not waited for). Graphs of one structure (the same tensors, kinds and
// views, and the same tensors bound by each dispatch, in order) are one
// plan's sizes: a model recorded at other input sizes records that
// structure again. Each structure gets one layout: its pooled
// intermediates' slots, assigned once, by the first graph of that
// structure prepared, from liveness alone (valid at every size), over the
// slots the storage already holds before new ones; the inputs', outputs'
// and results' buffers are the storage's by kind and order (every graph's
// first input one buffer). A graph that needs
// a larger buffer than the storage holds replaces it with one of twice the
// size or what it needs, whichever is more, and bumps generation(): the
// other graphs make their bind groups again before their next run. So the
// storage is as large as the largest graph run on it, whatever the number
// of sizes and plans. Constants, op-owned buffers, uniforms and staging
// buffers stay each graph's own.
class SharedStorage {
 public:
  uint64_t generation() const { return generation_; }
  // Buffers held and their bytes (the pool's slots and the by-tensor ones).
  size_t buffers() const;
  uint64_t bytes() const;
  // Structures (plans) laid out on it so far.
  size_t layouts() const { return layouts_.size(); }
  // The layout of `structure` (Graph::structure()), as Graph::plan_id()
  // gives it; null if no graph of it was prepared on this storage.
  const void* layout_of(const std::vector<int64_t>& structure) const;

 private:
  friend class Graph;
  struct Layout {
    std::vector<int64_t> structure;  // Graph::structure()
    std::vector<int> slot_of;        // root tensor id -> pool slot, -1: not pooled
  };
  std::vector<std::unique_ptr<Layout>> layouts_;
  std::vector<gpu::Buffer> slots_;
  // Input, output and result roots' buffers by kind and order (Graph::prepare).
  std::unordered_map<int, gpu::Buffer> own_;
  uint64_t generation_ = 0;
};

// The choices of a graph's structure that ops make from sizes: whether a
// product's reduction is cut into ranges (split-K) and a sum pass added,
// whether a concatenation's input is placed in the result or copied. Each
// is (site, choice), in the order the ops made them. A Session records
// them at the first size of a size class and replays them at its other
// sizes (Graph::replay_choices): a photo at 448 px takes the choices made
// at 320 px where they still hold, so both record one structure, one plan,
// where a split that starts at one layer and size would otherwise make
// every size a plan of its own.
struct PlanChoices {
  std::vector<std::pair<const char*, int>> made;  // sites are string literals
};

enum class TensorKind { Input, Output, Intermediate, Constant };

struct TensorInfo {
  Shape shape;
  DType dtype = DType::F32;
  TensorKind kind = TensorKind::Intermediate;
  std::string name;
  // Storage, set by prepare() (or at once for constants). A view shares the
  // storage of `view_of` at no cost.
  gpu::Buffer buffer;
  uint64_t offset = 0;
  int view_of = -1;
  uint64_t view_offset = 0;  // bytes into `view_of`'s storage (a part of it)
  bool shared = false;       // a constant whose storage a ConstantStore holds (read-only)
  int64_t numel() const { return wgnn::numel(shape); }
  uint64_t nbytes() const { return uint64_t(numel()) * dtype_size(dtype); }          // host layout
  uint64_t gpu_bytes() const { return uint64_t(numel()) * gpu_dtype_size(dtype); }  // GPU storage
};

// One binding of a dispatch: a tensor of the graph or a buffer the op made
// (uniform parameters, folded constants). A tensor is bound whole, or as a
// byte range of it (`range`): how an op splits a tensor larger than
// maxStorageBufferBindingSize over several dispatches; `offset` must be a
// multiple of minStorageBufferOffsetAlignment. A buffer is bound whole, or
// from `offset` for `size` bytes when `size` is set (Graph::uniform's
// blocks).
struct Binding {
  int tensor = -1;
  gpu::Buffer buffer;
  uint64_t offset = 0;
  uint64_t size = 0;  // bytes; 0: the whole tensor
  static Binding of(TensorRef t) { return Binding{t.id, {}, 0, 0}; }
  static Binding of(gpu::Buffer b) { return Binding{-1, std::move(b), 0, 0}; }
  static Binding range(TensorRef t, uint64_t offset, uint64_t size) { return Binding{t.id, {}, offset, size}; }
};

struct DispatchNode {
  const gpu::Pipeline* pipeline = nullptr;
  std::vector<Binding> bindings;
  gpu::Grid grid;
  std::string op;     // the op that recorded it, e.g. "aten.relu.default"
  std::string label;  // kernel name for profiles
  std::string origin;  // the model node it was recorded for (Graph::origin()), if any
  gpu::BindGroup group;
  // Floating-point operations of the dispatch where the op knows them
  // (matrix products, convolutions: 2 per multiply-add); 0 otherwise.
  double flops = 0;
};

// What an error about a tensor over maxStorageBufferBindingSize adds: the
// ops that split larger tensors, and the setting that would let this one run
// (WGNN_LIMITS=adapter where the device was asked for WebGPU's defaults,
// else an adapter with a larger limit).
std::string binding_limit_advice(const gpu::Context& ctx);

class Graph {
 public:
  explicit Graph(gpu::Context& ctx);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  gpu::Context& ctx() { return ctx_; }
  const gpu::Context& ctx() const { return ctx_; }

  // Constants added from now on take their storage from `store` (which must
  // outlive the graph): equal constants of several graphs are uploaded once
  // (graph/constant_store.h). Such a constant is read-only: writing it, or
  // binding it where a kernel writes, is an Error.
  void set_constant_store(ConstantStore* store) { store_ = store; }
  // The next run's new readback buffers are taken from `batch` where it has
  // one that fits (made ahead, on a thread of its own: gpu/buffer_batch.h);
  // the rest are made as usual. Dropped after that run's submit.
  void offer_readback_buffers(std::shared_ptr<gpu::BufferBatch> batch) { readback_batch_ = std::move(batch); }

  TensorRef add_tensor(const Shape& shape, DType dtype, TensorKind kind = TensorKind::Intermediate,
                       std::string name = {});
  // A constant with its data (host layout) uploaded now.
  TensorRef add_constant(const Shape& shape, DType dtype, const void* data, std::string name = {});
  // A constant named by `memo` in the graph's ConstantStore
  // (ConstantStore::acquire_memo: an identity valid for the store's life),
  // whose host tensor `make` gives when the store lacks it; without a store,
  // add_constant of make().
  TensorRef add_memo_constant(const std::string& memo, const std::function<const HostTensor&(HostTensor&)>& make,
                              std::string name = {});
  // A tensor that shares `base`'s storage with another shape (same numel).
  TensorRef add_view(TensorRef base, const Shape& shape);
  // A tensor that is the part of `base`'s storage starting `byte_offset`
  // bytes in (a multiple of minStorageBufferOffsetAlignment) and as long as
  // `shape` needs (a multiple of 16 bytes): a contiguous slice, no copy.
  // nullopt-like TensorRef{-1} when the offset or size does not allow it.
  TensorRef add_part_view(TensorRef base, const Shape& shape, uint64_t byte_offset);
  // Places intermediate `x` (already computed by recorded dispatches, read
  // or not) inside `y`'s storage at `byte_offset`, so what wrote x wrote
  // that part of y (how a concatenation skips its copies). False, and
  // nothing changed, when that is not safe: x is not an intermediate with
  // storage of its own, the offset or size is not aligned (as for
  // add_part_view), or a dispatch that binds x also binds y's storage (a
  // buffer may not be both written and bound again in one dispatch).
  bool alias_into(TensorRef x, TensorRef y, uint64_t byte_offset);
  // alias_into's test alone: whether it would place x (nothing changed).
  bool can_alias_into(TensorRef x, TensorRef y, uint64_t byte_offset) const;

  // A choice of the graph's structure that an op makes from sizes
  // (PlanChoices). choose() returns `preferred`, or, replaying a log whose
  // entry at this point has this site, the choice made there; the op then
  // reports what it did with made() (the choice it could not follow, such
  // as a placement whose offset is not aligned at this size, ends the
  // replay: the graph records a structure of its own from there, a plan
  // of its own). A meta graph returns `preferred` and keeps no log.
  struct Choice {
    size_t index = SIZE_MAX;
    int value = 0;
  };
  Choice choose(const char* site, int preferred);
  void made(const Choice& c, int done);
  // Replays `log` in the choices made from now on.
  void replay_choices(std::shared_ptr<const PlanChoices> log);
  // The choices made so far; whether a replay (if any) was followed whole.
  const PlanChoices& choices() const { return choices_; }
  bool replay_followed() const;
  // The tensor whose storage `t` is (itself, or what its views lead to).
  // Two tensors with one root share a buffer: a dispatch that writes one
  // may not read the other (prepare() throws, naming the node).
  TensorRef storage_root(TensorRef t) const;
  const TensorInfo& info(TensorRef t) const;
  TensorInfo& info(TensorRef t);
  size_t tensor_count() const { return tensors_.size(); }
  void mark_output(TensorRef t);

  // Records a dispatch that runs on every run(), in order.
  void add_dispatch(const gpu::Pipeline& pipeline, std::vector<Binding> bindings, gpu::Grid grid,
                    std::string op, std::string label = {}, double flops = 0);
  // Records a dispatch that runs once, in prepare() (folding constants).
  void add_init_dispatch(const gpu::Pipeline& pipeline, std::vector<Binding> bindings, gpu::Grid grid,
                         std::string op, std::string label = {});
  // A dispatch's uniform parameters, `bytes` of `data`: a range of one of
  // the graph's uniform buffers (every dispatch's block at an offset aligned
  // to minUniformBufferOffsetAlignment), whose bytes are written once, by
  // prepare() (or the next submit), rather than a buffer and a queue write
  // per dispatch.
  Binding uniform(const void* data, size_t bytes);
  template <typename T>
  Binding uniform(const T& params) {
    return uniform(&params, sizeof(T));
  }
  // Uniform buffers made so far (tests, statistics).
  size_t uniform_buffers() const { return uniform_chunks_.size(); }
  // A storage buffer for an op's own data (e.g. folded constants).
  gpu::Buffer scratch(uint64_t bytes, std::string label);

  // Checked mode (on by default): ops whose data can break their rule at run
  // time (an index out of range, an integer division by zero) add a check
  // to their dispatch. A check is a slot of the graph's error-flag buffer
  // (two u32 at `slot * 2`: a flag and the offending value), which the
  // kernel writes only when the rule breaks; run() clears the buffer first,
  // copies it back with the outputs and throws an Error naming the first
  // slot that is set: "<origin>: <what>", with `{}` in `what` replaced by
  // the value (as int32). Off, the kernels are the unchecked ones (an index
  // is clamped, x / 0 is x). The flag buffer holds kMaxChecks slots; later
  // checks share the last one (their message then names no single op).
  static constexpr uint32_t kMaxChecks = 1024;
  struct Check {
    gpu::Buffer flags;
    uint32_t slot = 0;
  };
  void set_checked(bool on) { checked_ = on; }
  bool checked() const { return checked_; }
  // Whether ops may record tensor-core (subgroup-matrix) kernels into this
  // graph where the device has them (default true). Off: the regular
  // kernels, as WGNN_SUBGROUP_MATMUL=0 does for the process (a tiered
  // Session's first plan, onnx/session.h).
  void set_tensor_cores(bool on) { tensor_cores_ = on; }
  bool tensor_cores() const { return tensor_cores_; }
  // A graph that only follows shapes and dtypes (the ONNX importer's, which
  // calls every op once to learn its results' shapes while it writes the
  // model IR): ops validate their arguments and add their result tensors
  // as always, but nothing reaches the GPU. No pipeline is made (kernels
  // get a placeholder), no constant is uploaded, no uniform, scratch or
  // check buffer is made and no dispatch is kept. It cannot be prepared or
  // run. Set before anything is added.
  void set_meta(bool on) { meta_ = on; }
  bool meta() const { return meta_; }
  // The pipelines of the recorded dispatches still being created
  // (gpu::Pipeline::ready false: polled, never waits), each once.
  std::vector<const gpu::Pipeline*> pending_pipelines() const;
  // Every pipeline the recorded dispatches use, each once.
  std::vector<const gpu::Pipeline*> pipelines() const;
  Check add_check(std::string what);
  // What checks added from now on name as their origin (the importer sets
  // the ONNX node); empty: the op's name is used.
  void set_origin(std::string origin) { origin_ = std::move(origin); }
  const std::string& origin() const { return origin_; }
  size_t check_count() const { return checks_.size(); }

  // Assigns storage and builds bind groups; runs init dispatches. Called by
  // run() if needed; adding work afterwards calls for a new prepare().
  //
  // Before anything is allocated, every binding is checked against
  // maxStorageBufferBindingSize and every bound tensor against
  // maxBufferSize: a tensor bound whole over the first, or over the second
  // at all, is an Error naming the op, the tensor, its shape, its bytes,
  // the limit and what would let it run.
  //
  // Memory plan: inputs, outputs and constants get buffers of their own.
  // Intermediates share pooled buffers by liveness: a tensor holds a buffer
  // from the first dispatch that touches it (its producer) to the last that
  // reads it, then the buffer returns to the pool (best fit, never shared
  // within one dispatch). A tensor that no later dispatch reads is a result
  // and keeps its buffer. Read only outputs and such results after run().
  //
  // The buffers come from the graph's SharedStorage (made here if the
  // graph has none): share_storage() lets other graphs use the same.
  void prepare();
  bool prepared() const { return prepared_ && (!storage_ || storage_gen_ == storage_->generation()); }
  // What makes two graphs one plan at two sizes (one layout of their
  // storage): tensor kinds and views, and each dispatch's bound tensors
  // (ids, in order). Sizes, dtypes, kernels, uniforms and constants'
  // values are not part of it.
  std::vector<int64_t> structure() const;
  // Takes `storage` (another graph's, or one made for the purpose) for its
  // buffers from the next prepare(). The graphs of one storage must take
  // turns (SharedStorage).
  void share_storage(const std::shared_ptr<SharedStorage>& storage);
  // The layout of storage() this graph was last prepared on: graphs with
  // one plan_id() are one plan's sizes (null before the first prepare).
  const void* plan_id() const { return layout_; }
  // The storage prepare() gave this graph (null before the first prepare).
  const std::shared_ptr<SharedStorage>& storage() const { return storage_; }
  // Drops the dispatches whose every write (bindings the shader declares
  // read_write) lands in storage that no later kept dispatch binds and that
  // is not an input, output or constant: work whose result nobody reads,
  // such as the copies a fused op made redundant by reading their source
  // directly. Only for graphs whose results are all marked outputs (the
  // importer's); returns how many were dropped.
  size_t remove_dead_dispatches();

  // Host-layout data (numel * dtype_size bytes); see gpu_dtype_size for the
  // conversions to and from GPU storage.
  void write(TensorRef t, const void* data, size_t bytes);
  void read(TensorRef t, void* data, size_t bytes);
  template <typename T>
  std::vector<T> read(TensorRef t) {
    std::vector<T> out(info(t).nbytes() / sizeof(T));
    read(t, out.data(), out.size() * sizeof(T));
    return out;
  }

  // Host data for one tensor, in host layout (numel * dtype_size bytes).
  struct HostIn {
    TensorRef tensor;
    const void* data = nullptr;
    size_t bytes = 0;
  };
  struct HostOut {
    TensorRef tensor;
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Records every dispatch into compute passes submitted in growing parts
  // (16, 32, 64, ... dispatches: the GPU starts on the first part while the
  // host encodes the next; WGNN_SUBMIT_PARTS=0 makes it one), then waits
  // once. `inputs` are written first (queue writes, ordered before the
  // passes); `outputs` are copied into staging buffers of their own (made
  // on the first run, reused) in the last command buffer and read back
  // after the one wait.
  void run(std::span<const HostIn> inputs = {}, std::span<const HostOut> outputs = {});
  // Inputs and outputs that stay on the GPU (graph/device_tensor.h): each
  // DeviceIn is copied on the GPU into the tensor's storage before the
  // dispatches, each DeviceOut from the tensor's storage into `dst` after
  // them (dst's buffer reused while large enough, else grown:
  // ensure_capacity). A DeviceOut's `dst` may hold the buffer a DeviceIn of
  // the same run reads: that input is copied first. With no host outputs
  // (and no checks to read), `wait` false returns once the work is
  // submitted; the queue orders later runs after it.
  struct DeviceIn {
    TensorRef tensor;
    const DeviceTensor* src = nullptr;
  };
  struct DeviceOut {
    TensorRef tensor;
    DeviceTensor* dst = nullptr;
    // Appending: the bytes go to dst's buffer at this offset (which must
    // hold them), and dst's shape is left as it is.
    bool append = false;
    uint64_t offset = 0;
  };
  void run(std::span<const HostIn> inputs, std::span<const HostOut> outputs, std::span<const DeviceIn> device_in,
           std::span<const DeviceOut> device_out, bool wait = true);
  // run() in two halves, for a caller that keeps the GPU busy: submit()
  // writes the inputs and submits the work (its host outputs copied into
  // staging buffers of the run's own), wait() waits for the oldest submitted
  // run and copies its outputs out (`outputs`: the tensors given to
  // submit(), in that order). At most kMaxInFlight runs are submitted and
  // not waited for: the second is queued behind the first on the GPU (same
  // buffers, queue order), so the host may upload and submit photo i+1
  // before it reads photo i back. The inputs' memory may be reused once
  // submit() returns. run() refuses while a run is in flight; a Graph
  // dropped with runs in flight waits for the GPU first.
  static constexpr size_t kMaxInFlight = 2;
  // The dispatches of a run's first command buffer; the parts after it
  // double (Graph::submit_impl). The GPU starts once the first is submitted.
  static constexpr size_t kFirstSubmitPart = 16;
  void submit(std::span<const HostIn> inputs, std::span<const TensorRef> outputs,
              std::span<const DeviceIn> device_in = {}, std::span<const DeviceOut> device_out = {});
  void wait(std::span<const HostOut> outputs);
  size_t in_flight() const { return pending_.size(); }
  // A run() with wait false does not read its run-time check flags (that
  // would wait for the GPU): they stay on the GPU and gather the failures
  // of every such run until check_deferred() reads them (one wait) and
  // throws the first failure, or until a run that waits reads them with its
  // own. checks_deferred(): whether unread flags are there.
  bool checks_deferred() const { return deferred_checks_; }
  void check_deferred();
  // check_deferred() in halves, so that many graphs read theirs in one
  // submit and one wait: record_deferred() records the flags' copy into
  // `rec` and returns the staging buffer to map (nullptr when none are
  // deferred); read_deferred(), once it is mapped, reads and unmaps it and
  // returns the first failure ("" if none).
  const gpu::Buffer* record_deferred(gpu::Recorder& rec);
  std::string read_deferred();
  // Timing of later run()s: None (the default) or Total, which adds
  // timestamp writes around the pass and reads them back after the wait
  // (RunStats::gpu_ms). PerDispatch is run_profiled().
  void set_timing(gpu::Timing timing);
  // Host time of the last run() by phase, in microseconds.
  struct RunStats {
    double upload_us = 0;    // writing the inputs (layout conversion, queue writes)
    double encode_us = 0;    // encoding the dispatches and the output copies, and submitting
    double submit_us = 0;    //   of which ending the last pass, finishing its command buffer, submitting
    double wait_us = 0;      // until the GPU finished (and the output staging buffers were mapped)
    double readback_us = 0;  // copying the outputs out of the mapped staging buffers
    double ahead_us = 0;     // encoding the next run's dispatches, after this run's submit (the GPU busy)
    bool from_ahead = false; // this run submitted dispatches encoded by the run before
    double gpu_ms = -1;      // GPU time of the pass (Timing::Total), else -1
    size_t dispatches = 0;
  };
  const RunStats& last_run() const { return last_run_; }
  // The same with one timed pass per dispatch: the GPU time of each
  // dispatch that ran (index into dispatches(); empty grids do not run).
  // Each pass has its own start and end, so the sum exceeds the one-pass
  // time of run() with Timing::Total.
  struct DispatchTime {
    size_t node = 0;
    double ms = 0;
  };
  std::vector<DispatchTime> run_profiled();
  const std::vector<DispatchNode>& dispatches() const { return nodes_; }
  // Bytes of storage a dispatch binds (tensors at their GPU size, op-owned
  // storage buffers whole; uniforms not counted): what it moves if it
  // touches each bound byte once.
  uint64_t bound_bytes(const DispatchNode& node) const;

  struct MemoryStats {
    uint64_t intermediate_sum = 0;   // bytes if every intermediate had its own buffer
    uint64_t intermediate_pool = 0;  // bytes of the shared buffers the plan uses
    size_t pool_buffers = 0;
    uint64_t io_bytes = 0;           // inputs, outputs, results
    uint64_t constant_bytes = 0;
    uint64_t shared_constant_bytes = 0;  // of constant_bytes, held by a ConstantStore
  };
  const MemoryStats& memory() const { return memory_; }
  std::string memory_summary() const;

 private:
  // submit(); split: in growing parts (Graph::submit_impl in graph.cpp).
  void submit_impl(std::span<const HostIn> inputs, std::span<const TensorRef> outputs,
                   std::span<const DeviceIn> device_in, std::span<const DeviceOut> device_out, bool split,
                   bool defer_checks);
  // The first failed check in `flags` (2 words per check), or "".
  std::string failed_check(const uint32_t* flags) const;
  bool deferred_checks_ = false;
  gpu::Buffer& staging_for(int tensor, size_t slot);
  // A large host input (at least kStagedUploadBytes, stored as it is given)
  // written into its upload buffer for this slot (kept, mapped again each
  // run: gpu::Context::map_for_write), which the run's commands then copy
  // into the input's storage; null: the input goes by a queue write
  // (small, converted, or WGNN_UPLOAD_STAGING=0).
  const gpu::Buffer* stage_input(const HostIn& in, size_t slot);
  static constexpr size_t kStagedUploadBytes = size_t(1) << 20;
  struct Pending;  // a run submitted and not waited for
  // A constant's storage from store_ (its reference `key`, released in ~Graph).
  void hold_shared(TensorInfo& ti, gpu::Buffer buffer, std::string key);
  gpu::BufferBinding resolve(const Binding& b);
  uint64_t bound_bytes(const Binding& b) const;
  void check_bindings(const std::vector<DispatchNode>& nodes) const;
  int root_of(int id) const;
  void check_no_write_alias(const DispatchNode& node, const std::vector<gpu::BufferBinding>& bs) const;
  void ensure_storage(int id);
  // A buffer of storage_'s of `need` bytes at least: `slot` >= 0 a pool
  // slot, else the input, output or result buffer keyed `id` (grown as
  // SharedStorage says).
  const gpu::Buffer& shared_buffer(int slot, int id, uint64_t need);
  void ensure_prepared() {
    if (!prepared()) prepare();
  }
  PlanChoices choices_;
  std::shared_ptr<const PlanChoices> replay_;
  bool replay_diverged_ = false;
  std::shared_ptr<SharedStorage> storage_;
  const SharedStorage::Layout* layout_ = nullptr;  // in storage_, set by prepare()
  uint64_t storage_gen_ = 0;            // storage_'s generation at the last prepare()

  gpu::Context& ctx_;
  ConstantStore* store_ = nullptr;
  std::vector<std::string> store_keys_;  // references held in store_
  std::vector<TensorInfo> tensors_;
  std::vector<DispatchNode> nodes_;
  std::vector<DispatchNode> init_nodes_;
  std::vector<gpu::Buffer> owned_;
  struct UniformChunk {
    gpu::Buffer buffer;
    std::vector<uint8_t> bytes;  // what the buffer holds, up to bytes.size()
    size_t written = 0;          // bytes already written to the buffer
  };
  std::vector<UniformChunk> uniform_chunks_;
  void write_uniforms();
  bool prepared_ = false;
  MemoryStats memory_;
  RunStats last_run_;
  // What run() encodes, made by prepare(): empty grids dropped, grids checked.
  std::vector<gpu::EncodedDispatch> encoded_;
  // The next run's dispatches, encoded after this run's submit
  // (submit_impl); dropped by prepare().
  gpu::EncodedParts ahead_;
  std::vector<size_t> part_ends() const;
  // Readback staging buffers by tensor id, made on first use, kept: one set
  // per run in flight (slot).
  std::unordered_map<int, gpu::Buffer> staging_[kMaxInFlight];
  std::shared_ptr<gpu::BufferBatch> readback_batch_;  // offer_readback_buffers()
  // Upload buffers of large host inputs by tensor id, the same way.
  std::unordered_map<int, gpu::Buffer> upload_[kMaxInFlight];
  std::vector<std::unique_ptr<Pending>> pending_;  // oldest first
  // Checked mode (add_check): messages by slot, the flag buffer, its readback.
  bool checked_ = true;
  bool tensor_cores_ = true;
  bool meta_ = false;
  std::string origin_;
  std::vector<std::string> checks_;
  gpu::Buffer check_flags_, check_staging_[kMaxInFlight];
  gpu::Timing timing_ = gpu::Timing::None;
};

}  // namespace wgnn
