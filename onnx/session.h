#pragma once
// Loading an ONNX model and running it on the GPU.
//
//   gpu::Context ctx;
//   onnx_import::Session s(ctx, "model.onnx");
//   for (auto& in : s.inputs()) ...                 // names, dtypes, shapes (-1: dynamic)
//   auto outputs = s.run({{"input", host_tensor}});   // name -> HostTensor
//
// A Session records a Graph for the input shapes of the first run (symbolic
// dims resolved from the actual inputs) and reuses it, with every bind group
// and uniform made once, for later runs with the same shapes. New shapes
// record another Graph (tens of ms: the pipelines come from the cache);
// when its structure is one a kept Graph has (the same tensors bound by the
// same dispatches: graph/graph.h, SharedStorage), it is another size of that
// plan. Sizes of one size class (inputs within one power of 4 of elements)
// replay the choices the class's first size made from its sizes (a split
// of a long reduction, a concatenation placed in place: Graph::choose), so
// they record its structure (ISNet's sizes from 320 to 1,600 px fall in
// three classes).
// Every graph of a Session takes its buffers from one storage, grown
// to the largest graph run, since they run one at a time: a fully
// convolutional model at ten photo sizes holds the memory of its largest
// size, not of ten. Every plan shares one copy of the weights on the GPU (a
// ConstantStore: each constant is uploaded once per Session, whatever the
// number of shapes). At most SessionOptions::max_plans plans, each with at
// most max_plan_sizes sizes, are kept: the least recently used is evicted,
// freeing its bind groups, uniforms and the constants only it used.
//
// Threading: one Session may be used from one thread at a time. Different
// Sessions may run from different threads: on different Contexts they run
// concurrently; on one shared Context run() holds Context::exclusive(), so
// their runs take turns (each bit-identical to a run alone).
//
// An input that an op needs on the host (a Reshape's target shape, Range's
// limit, Slice's starts: data that decides shapes) is read from the values
// given to run(); the graph is then built for those values and cached by
// them, so the next run with other values builds another graph.
#include <deque>
#include <exception>
#include <map>
#include <set>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "graph/constant_store.h"
#include "graph/device_tensor.h"
#include "graph/graph.h"
#include "graph/host_tensor.h"
#include "graph/plan_cache.h"

namespace onnx {
class ModelProto;
}
namespace wgnn::ir {
class Graph;
}
namespace wgnn::passes {
struct Report;
}

namespace wgnn::onnx_import {

struct ValueInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;                         // -1 for a dynamic dimension
  std::vector<std::string> dim_names;  // symbolic names ("" if none)
  // Whether the model declares a shape (then `shape` is its rank, 0 for a
  // scalar); without one any rank is taken.
  bool ranked = false;
  // An input any of whose dims may be smaller, down to 0: its largest
  // sizes (an ExecuTorch program's dynamic-shape bound; `shape` is then the
  // sizes it runs at when none are given). Empty: `shape` as above.
  Shape max_shape;
};

struct SessionOptions {
  bool verbose = false;
  // Independently of this, on an adapter without shader-f16 a model's own
  // float16 values are stored as float32 (Session::widens_f16).
  // float16 execution (needs shader-f16): float32 activations and weights are
  // stored as float16 on the GPU, kernels compute and accumulate in float32.
  // float32 constants (initializers, Constant, ConstantOfShape, values folded
  // on the host) stay float32 on the host, where shape arithmetic folds, and
  // are converted when uploaded, finite values beyond +-65504 saturating to
  // +-65504 (so float32-minimum attention masks stay finite); a Cast to
  // float32 inside the graph makes float16. float32 graph inputs are given
  // (and uploaded) as float32 and cast to float16 by the first dispatch;
  // float32 graph outputs are cast back, so run()'s dtypes are the model's.
  bool fp16 = false;
  // Chains of nodes recorded as one op where the result is the same within
  // float rounding: the IR passes (passes/: attention, GELU chains, a
  // product's scale, bias and activation, dequantized 8-bit weights, ...).
  // WGNN_NO_FUSION=1 in the environment turns it off as well.
  bool fusion = true;
  // Run-time checks (Graph::set_checked): an index out of range (Gather,
  // GatherElements) or an integer division by zero (Div, Mod) fails the
  // run with an Error naming the node and the value, as ONNX Runtime
  // errors, instead of reading a clamped index or returning x / 0 = x.
  // Costs one 8-byte slot per checked dispatch, cleared and read back with
  // the outputs each run (docs/RELIABILITY.md). Off: those values are clamped
  // or computed silently.
  bool checked = true;
  // Plans kept at once, at least 1; the least recently used (with all its
  // sizes) is evicted when a new plan would exceed it. A plan serves every
  // set of input shapes whose recording has its structure (Session::plans()).
  int max_plans = 8;
  // Sets of input shapes one plan keeps, at least 1 (each its dispatch
  // sizes, uniforms, bind groups and the constants only it uses: kilobytes
  // to a few MiB; the buffers are the plan's): the least recently used is
  // evicted when a new one would exceed it.
  int max_plan_sizes = 64;
  // Size classes: sets of input shapes whose inputs hold from 4^k up to
  // 4^(k+1) elements in all (and agree in names, ranks and the values the
  // plan reads) record the structure the class's first size recorded: the
  // choices ops make from sizes (a long reduction split into ranges, a
  // concatenation's input placed in the result) are replayed where they
  // hold (Graph::replay_choices), so the class's sizes are one plan, its
  // buffers and layout shared. A replayed split where a size's own tiles
  // need none costs one sum pass over the result. Off: every size makes
  // its own choices (a plan per choice set: ISNet at ten sizes from 320 to
  // 1,600 px made six).
  bool size_classes = true;
  // The graph outputs to compute and return, by name, in this order (empty:
  // all, as the model declares them); outputs() then lists these. The
  // others are not read back, and the work only they need is not run
  // (Graph::remove_dead_dispatches): ISNet's matte without its five side
  // outputs and five feature maps. An unknown or repeated name is an Error.
  std::vector<std::string> outputs;
  // Tiered first runs: when a new plan's tensor-core (subgroup-matrix)
  // pipelines are still compiling, it is run first on the regular kernels
  // (compiled far sooner: NVIDIA takes 0.4-0.9 s per tensor-core kernel,
  // docs/results/coldstart_h200.md), and each later run checks, without
  // waiting, whether the tensor-core plan's pipelines are ready; the first
  // run that finds them switches to it. Results of the two plans differ
  // within the float16 tolerances, so the first runs of a process may not
  // give the later runs' bits: set it false (or WGNN_TIERED=0) for
  // bit-identical runs from the first, or call settle(). On by default
  // (a cold float16 first run waits 0.35-1.8 s for the tensor-core
  // compiles without it, docs/results/coldstart_h200.md); WGNN_TIERED=1
  // (or 0) in the environment overrides it. Only where the device has the
  // tensor-core kernels (ops::tensor_cores_available). A plan whose
  // pipelines are all ready within 30 ms (WGNN_TIER_GRACE_MS sets it) is
  // not tiered, nor one whose pipelines all come from the pipeline cache on
  // disk (every blob Dawn looked up for them was there): that build waits
  // for them, up to 1 s (WGNN_TIER_DISK_WAIT_MS); the first blob missing
  // is a compile, and ends the wait at once.
  bool tiered = true;
  // The importer writes each plan's model as IR (ir/graph.h), which the
  // passes (passes/) rewrite and ir::lower records, rather than recording
  // GPU work as it maps the nodes; control flow's probe plans too. Off:
  // recorded directly, without the passes (an A/B switch). WGNN_IR_IMPORT
  // =0 (or 1) in the environment overrides it.
  bool ir_import = true;
};

// A parsed and checked model, before any GPU work: what Session's
// constructor does first. Everything in a model file is checked here and is
// an Error (or Unsupported) naming what is wrong: protobuf parsing, the
// opset, every initializer (dtype, dims against the data present, external
// data inside the model's folder), graph inputs and outputs, node order
// (cycles, inputs produced by nothing) and the supported operators.
struct LoadedModel {
  LoadedModel();
  LoadedModel(LoadedModel&&) noexcept;
  LoadedModel& operator=(LoadedModel&&) noexcept;
  ~LoadedModel();

  std::unique_ptr<onnx::ModelProto> proto;  // nodes topologically sorted
  std::string dir;                          // external data is read relative to it
  int opset = 0;
  std::vector<ValueInfo> inputs, outputs;
  std::map<std::string, HostTensor> initializers;
  // A model given as IR by another front end (an ExecuTorch program,
  // pte/program.h): `proto` is then an empty graph, and each plan lowers
  // this IR (after the passes) instead of importing ONNX nodes.
  std::shared_ptr<const ir::Graph> ir;
  // The IR at other input sizes, where the front end must read the model
  // again for them (an ExecuTorch program with dynamic shapes; `ir` is the
  // one at the inputs' `shape`). Null: `ir` serves every size.
  std::function<std::shared_ptr<const ir::Graph>(gpu::Context&, const std::vector<Shape>&)> ir_at;
  // State the model keeps from one run to the next (an ExecuTorch
  // program's mutable buffers: a KV cache): an input of `ir` for its value
  // before a run and an output for its value after, neither among `inputs`
  // and `outputs`; the Session feeds each run's output to the next run.
  struct State {
    std::string input, output;
    HostTensor initial;
  };
  std::vector<State> states;
  std::string format = "onnx";  // "onnx" or "pte"
  // The model's metadata_props (ONNX Runtime's custom_metadata_map), by key.
  std::map<std::string, std::string> metadata;
};

// From a file (`name` in messages is the path): an ONNX model, or an
// ExecuTorch program (.pte, told by its identifier, not its name).
LoadedModel load_model(const std::string& path);
// From bytes in memory; `name` is used in messages and `dir` for external
// data. Needs no GPU: the fuzz target calls it (fuzz/).
LoadedModel load_model_from_bytes(const std::string& bytes, const std::string& name, const std::string& dir);

// The ONNX operators (of the default domain) a Session maps, sorted.
std::vector<std::string> supported_ops();

// One input of a run in host memory that the caller keeps until the run
// returns: a HostTensor (`feeds.host[name] = &t`), or a view of the
// caller's own bytes (HostInput::view: a numpy array's), which the run reads
// in place: written to the GPU with no host copy first. A plan that reads
// the input's values on the host (a Reshape's shape) copies them while it
// is built.
struct HostInput {
  DType dtype = DType::F32;
  Shape shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  const HostTensor* tensor = nullptr;  // when made from one
  bool is_view = false;                // made by view()

  HostInput() = default;
  HostInput(const HostTensor* t)  // NOLINT: a HostTensor pointer reads as a HostInput
      : dtype(t ? t->dtype : DType::F32), shape(t ? t->shape : Shape{}), data(t ? t->data.data() : nullptr),
        nbytes(t ? t->nbytes() : 0), tensor(t) {}
  // Checks that `nbytes` is what dtype and shape take (an Error naming
  // `name` otherwise).
  static HostInput view(DType dtype, Shape shape, const void* data, size_t nbytes, const std::string& name);
  bool given() const { return tensor != nullptr || is_view; }
};

// IO binding: the inputs of a run, each from host memory or already on the
// GPU (a DeviceTensor an earlier run kept there), by input name.
struct Feeds {
  std::map<std::string, HostInput> host;
  std::map<std::string, const DeviceTensor*> device;
};
// The outputs a run returns: each name in `host` is read back into it, each
// name in `device` stays on the GPU, copied there into the entry's buffer
// while it fits (ensure_capacity); the other outputs are not read back.
// Both empty: every output is read back into `host`. With no host output,
// `wait` false returns once the work is submitted (a later run or readback
// on the same Context is ordered after it); the run-time checks of such runs
// are read later, by Session::check_deferred() or the plan's next run that
// waits, and their first failure is thrown there.
struct Fetches {
  std::map<std::string, HostTensor> host;
  std::map<std::string, DeviceTensor> device;
  bool wait = true;
};

class Session {
 public:
  Session(gpu::Context& ctx, const std::string& path, SessionOptions options = {});
  Session(gpu::Context& ctx, LoadedModel model, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  // The model's state (LoadedModel::states) back to its initial values.
  void reset_state();
  size_t state_count() const { return states_.size(); }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  int opset() const { return opset_; }
  // "onnx", or "pte" for an ExecuTorch program.
  const std::string& format() const { return format_; }

  // Declares another shape for an input (the same rank; -1: any size): for
  // a model whose declared size is only the one it was exported at, e.g. a
  // fully convolutional network. Later runs are checked against it.
  void set_input_shape(const std::string& name, const Shape& shape);

  // Runs the model; every input must be given with its declared dtype and a
  // shape matching the declared one (dynamic dims take any size).
  std::map<std::string, HostTensor> run(const std::map<std::string, HostTensor>& inputs);
  // The same, writing each output into `outputs[name]`: an entry that
  // already has the output's dtype and shape is written in place (no
  // allocation), others are made. A caller that keeps `outputs` from run to
  // run saves allocating (and the kernel zero-filling) the outputs' host
  // memory each time (ISNet: 12 outputs, 48 MB).
  void run(const std::map<std::string, HostTensor>& inputs, std::map<std::string, HostTensor>& outputs);
  // The same with IO binding (Feeds, Fetches above). An input whose values
  // the plan reads on the host (shape data, control flow) must be given on
  // the host: as a device tensor it is an Error.
  void run(const Feeds& inputs, Fetches& outputs);
  // Records and prepares the plan for these inputs (their shapes, and the
  // values of the inputs a plan reads on the host) without running it:
  // sizes a server will see built ahead, or a measure of build times and
  // plan counts. A model whose control flow reads a value computed on the
  // GPU has plans that depend on the data: an Error (run() builds those).
  void build(const std::map<std::string, HostTensor>& inputs);
  // Reads the run-time checks of the runs made with Fetches::wait false
  // (one wait for the GPU per plan that has some) and throws the first
  // failure. A plan evicted with unread checks reads them first.
  void check_deferred();
  gpu::Context& context() { return ctx_; }
  // run() in two halves, so that the GPU need not wait for the host between
  // runs: start() checks the inputs, writes them and submits the work;
  // finish() waits for the oldest started run and writes its outputs (all
  // of them, or SessionOptions::outputs) as run() does. Up to two runs may
  // be started and not finished: the second is queued behind the first on
  // the GPU, and must use the same plan (the same input shapes; an Error
  // otherwise, before any work). The inputs may be freed once start()
  // returns. A model whose control flow reads values back runs entirely in
  // start() (finish() hands over its outputs). run() refuses while a started
  // run is not finished.
  void start(const std::map<std::string, HostTensor>& inputs);
  void finish(std::map<std::string, HostTensor>& outputs);
  size_t started() const { return started_.size(); }

  // The graph built for the last run's shapes (for inspection, benchmarks).
  Graph& graph();
  // How many graphs were built (a second run with the same shapes builds none).
  int builds() const { return builds_; }
  // Whether a node of the model (subgraphs included) is this operator, keyed
  // as the mappers are: "MatMul", "com.microsoft.GroupQueryAttention".
  bool uses_op(const std::string& key) const;
  // Whether a node (subgraphs included) reads this graph input.
  bool reads_input(const std::string& name) const;
  // Plans kept now (at most SessionOptions::max_plans; control flow's probe
  // plans not counted), and how many plans, sizes and probes were evicted.
  // A plan serves every set of input shapes whose recording has its
  // structure (graph/graph.h, SharedStorage): the same tensors bound by the
  // same dispatches, one layout of the Session's buffers. Each such set is
  // one of its sizes: its own dispatch sizes, uniforms and bind groups over
  // the buffers, which grow to the largest graph run.
  int plans() const;
  // Sets of input shapes kept, over all plans (plans() <= plan_sizes()).
  int plan_sizes() const;
  // Bytes of the plans' buffers on the GPU (intermediates, inputs, outputs;
  // constants not counted): one set for every plan and size, as large as
  // the largest graph run (graph/graph.h, SharedStorage).
  uint64_t plan_buffer_bytes() const;
  int evictions() const { return cache_.evictions(); }
  // Plans first run on the regular kernels (SessionOptions::tiered), and
  // of them those since switched to their tensor-core plan.
  int tiered_plans() const { return tiered_plans_; }
  int tier_ups() const { return tier_ups_; }
  // Waits until every tiered plan's tensor-core pipelines are compiled and
  // switches each to them (a benchmark's steady state; a caller who wants
  // the tensor-core results from now on). Not while a run is in flight
  // (start() without finish()): then it switches none.
  void settle();
  // Host time of the last build (import, fusion, kernel choice, pipelines,
  // memory plan, bind groups, uploads), and of all builds so far, in ms.
  double last_build_ms() const { return last_build_ms_; }
  double total_build_ms() const { return total_build_ms_; }
  // Where the last build's time went, in ms: recording the plan (import,
  // fusion, the ops' kernel choice, constants, pipelines requested), a
  // tiered build's wait for the tensor-core pipelines (at most its grace)
  // and its regular plan, and prepare() (memory plan, bind groups, init
  // dispatches, uniforms).
  struct BuildPhases {
    double record_ms = 0, tier_wait_ms = 0, regular_record_ms = 0, prepare_ms = 0;
    // The process's minor page faults while it built (fresh host memory
    // touched, by every thread: each costs microseconds on a cloud VM).
    uint64_t page_faults = 0;
    gpu::CreationStats created;  // what the build created (the Context's counts over it)
    // Recording's host time by ONNX op type (and "(fused chains)"), most first.
    std::vector<std::pair<std::string, double>> record_by_op;
    // Whether the plan went through the IR (SessionOptions::ir_import), its
    // live IR nodes, and what the passes rewrote ("no rewrites", or
    // "fuse_conv_activation 2, dead_code 1").
    bool through_ir = false;
    size_t ir_nodes = 0;
    std::string passes;
  };
  const BuildPhases& last_build_phases() const { return last_phases_; }
  // Pipelines asked for at load from the list the last process with this
  // model and options left in the pipeline cache (0: none, or no disk
  // cache; WGNN_PREFETCH_PIPELINES=0 turns it off).
  size_t prefetched_pipelines() const { return prefetched_; }
  // Readback buffers of the first run that were made at load, on a thread
  // of their own (gpu/buffer_batch.h), from the sizes kept with that list;
  // 0 on a device without thread-safe calls, or with
  // WGNN_PREFETCH_READBACK=0.
  size_t prefetched_readback_buffers() const { return readback_taken_; }
  // The constants on the GPU, shared by every plan (uploaded once each).
  const ConstantStore& constants() const { return *constants_; }
  // A few lines: nodes, dispatches, folded constants, memory, and how
  // float16 values are stored.
  std::string summary() const;
  // Whether float16 values of the model live on the GPU as float32 (the
  // adapter lacks shader-f16): widened when uploaded, narrowed when read
  // back, rounded to float16 by every Cast to float16.
  bool widens_f16() const { return widen_f16_; }
  // Whether the model has float16 values (initializers, inputs, outputs, Casts).
  bool uses_f16() const { return uses_f16_; }

 private:
  struct Built;
  // The name of this model's pipeline list in the disk cache.
  std::string pipeline_list_id() const;
  // The plan for these inputs and the values control flow read back so far
  // (built if new); a probe when control flow needs another value.
  Built& build_for(const Feeds& inputs, const std::map<std::string, int64_t>& decisions);
  // The plan recorded (not prepared: no buffers, bind groups or pipeline
  // waits yet), with or without tensor-core kernels.
  std::unique_ptr<Built> record_plan(const Feeds& inputs, const std::map<std::string, int64_t>& decisions,
                                     bool tensor_cores);
  // record_plan through the IR (ir_import_) or directly.
  // The passes on a plan's IR with this Session's options (WGNN_DUMP_IR
  // prints it before and after); the fusions applied go to b.ir_fusions.
  passes::Report optimize_ir(ir::Graph& irg, bool tensor_cores, Built& b) const;
  // A plan of a model given as IR (LoadedModel::ir): passes, then lowering.
  std::unique_ptr<Built> record_ir_plan(const Feeds& inputs, bool tensor_cores);
  std::unique_ptr<Built> record_plan_as(const Feeds& inputs, const std::map<std::string, int64_t>& decisions,
                                        bool tensor_cores, bool through_ir);
  // b's graphs take their buffers from the Session's storage, and the
  // least recently used plans (or sizes of b's plan, or probes) make room.
  void join_plan(Built& b);
  // SessionOptions::tiered: b becomes its tensor-core plan once every
  // pipeline of it is ready (polled), between runs.
  void try_tier_up(Built& b);
  std::string plan_key(const Feeds& inputs, const std::map<std::string, int64_t>& decisions) const;
  // The key with the values of `by_value` (value_inputs_ or an earlier set).
  std::string plan_key(const Feeds& inputs, const std::map<std::string, int64_t>& decisions,
                       const std::set<std::string>& by_value) const;
  void run_built(Built& b, const Feeds& inputs, Fetches& out);
  void drop_readback_batch();
  void check_feeds(const Feeds& inputs) const;
  void check_fetches(Fetches& out) const;
  void run_checked(const Feeds& inputs, Fetches& out);
  void input_lists(Built& b, const Feeds& inputs, std::vector<Graph::HostIn>& host_in,
                   std::vector<Graph::DeviceIn>& device_in);
  // The outputs a run returns, in b.outputs' order: each device output,
  // each host output with its memory; with `later`, host outputs whose
  // memory must be made first get a null `data`, and their index in
  // host_out and their tensor go to `later` for make_outputs() (after the
  // submit).
  using LaterOutputs = std::vector<std::pair<size_t, HostTensor*>>;
  void output_lists(Built& b, Fetches& out, std::vector<Graph::HostOut>& host_out,
                    std::vector<Graph::DeviceOut>& device_out, LaterOutputs* later = nullptr);
  void make_outputs(Built& b, std::vector<Graph::HostOut>& host_out, const LaterOutputs& later);
  void narrow_outputs(Built& b, Fetches& out);
  // Every output in `host` (kept entries reused, others dropped).
  void all_outputs(Fetches& f) const;
  // Runs started and not finished (start()): the plan each was submitted on
  // (nullptr: already run, its outputs in `result`).
  struct Started {
    Built* built = nullptr;  // null: run already, `result` (or `error`) is what finish() hands
    Fetches result;
    std::exception_ptr error;
  };
  // The runs in flight on `b` waited for and read back into their Started
  // entries (a tiered plan switching under a pipelined loop).
  void read_back_started(Built& b);
  std::deque<Started> started_;

  gpu::Context& ctx_;
  SessionOptions options_;
  std::unique_ptr<onnx::ModelProto> model_;
  std::shared_ptr<const ir::Graph> ir_model_;  // LoadedModel::ir
  std::function<std::shared_ptr<const ir::Graph>(gpu::Context&, const std::vector<Shape>&)> ir_at_;  // LoadedModel::ir_at
  std::string format_ = "onnx";
  std::string model_dir_;
  int opset_ = 0;
  std::vector<ValueInfo> inputs_, outputs_;
  // LoadedModel::states on the GPU: the value the next run reads, and the
  // buffer its new value is written to (swapped after each run).
  struct StateSlot {
    std::string input, output;
    HostTensor initial;
    DeviceTensor now, next;
  };
  std::vector<StateSlot> states_;
  std::map<std::string, HostTensor> initializers_;
  // Before built_: the plans' graphs release their constants into it.
  std::unique_ptr<ConstantStore> constants_;
  // The graphs by plan key (graph/plan_cache.h): every graph of the
  // Session takes its buffers from the cache's one storage (they run one at
  // a time), plans and sizes evicted least recently used first, and the
  // size classes' structural choices.
  PlanCache<Built> cache_;
  // Inputs some op read on the host (shape-like data given as a graph
  // input): graphs are cached per value of these.
  std::set<std::string> value_inputs_;
  // value_inputs_ as it was before each build that added to it: a plan
  // built then is keyed by the values of those inputs only (it read no
  // other), and build_for finds it through them.
  std::vector<std::set<std::string>> earlier_value_inputs_;
  // The size class's choices record_plan is replaying
  // (SessionOptions::size_classes).
  std::shared_ptr<const PlanChoices> replaying_;
  std::string size_class(const Feeds& inputs, const std::map<std::string, int64_t>& decisions,
                         bool tensor_cores) const;
  Built* last_ = nullptr;
  int builds_ = 0, tiered_plans_ = 0, tier_ups_ = 0;
  bool tiered_ = false;
  bool ir_import_ = true;  // SessionOptions::ir_import
  int tier_grace_ms_ = 30;  // WGNN_TIER_GRACE_MS
  // How long a build waits past the grace for tensor-core pipelines that
  // come from the disk cache (WGNN_TIER_DISK_WAIT_MS).
  int tier_disk_wait_ms_ = 1000;
  double last_build_ms_ = 0, total_build_ms_ = 0;
  BuildPhases last_phases_;
  // The pipeline list in the disk cache for this model and these options
  // (gpu::Context::remember_pipelines): asked for at load, written after
  // the first plan. The disk cache's counters before the prefetch stand
  // for the first build's (its blobs were looked up before it began).
  std::string pipeline_list_id_;
  size_t prefetched_ = 0;
  bool pipelines_remembered_ = false;
  gpu::DiskCacheStats disk_before_prefetch_;
  // Made at load for the first plan's first run (offered to its Graph),
  // dropped after that run's submit.
  std::shared_ptr<gpu::BufferBatch> readback_batch_;
  size_t readback_taken_ = 0;
  bool widen_f16_ = false, uses_f16_ = false;
};

}  // namespace wgnn::onnx_import
