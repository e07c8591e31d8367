#pragma once
// Recording work for the GPU: many dispatches share one compute pass and one
// command buffer, submitted once. WebGPU orders the dispatches of a pass and
// makes each one's storage writes visible to the next (each dispatch is its
// own usage scope), so read-after-write between dispatches needs no barrier
// from us; tests/gpu/recorder_test checks it on a chain of dependent kernels.
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "gpu/dispatch.h"

struct WGPUCommandEncoderImpl;
struct WGPUComputePassEncoderImpl;
struct WGPUQuerySetImpl;
struct WGPUComputePipelineImpl;
struct WGPUBindGroupImpl;
struct WGPUCommandBufferImpl;

namespace wgnn::gpu {

enum class Timing {
  None,         // one pass for everything: the fast path
  Total,        // one pass, GPU time of the whole pass
  PerDispatch,  // one pass per dispatch, GPU time of each (profiling)
};

// A dispatch reduced to what encoding it needs, checked once when it was
// made (make_encoded): a graph keeps a list of these for its runs.
struct EncodedDispatch {
  WGPUComputePipelineImpl* pipeline = nullptr;
  WGPUBindGroupImpl* group = nullptr;
  uint32_t x = 1, y = 1, z = 1;
};

// Command buffers finished ahead of their submit, one per part of a list
// of dispatches: a graph encodes its next run while the GPU works on this
// one (a WebGPU command buffer is submitted once, so each run needs its
// own), and that run then only submits (Recorder::submit_parts). Dawn's
// frontend validates each dispatch as it is encoded (about 1.1 us each on
// the H200), which then leaves the run's critical path. Whatever is not
// submitted is released with the object.
class EncodedParts {
 public:
  EncodedParts() = default;
  ~EncodedParts() { clear(); }
  EncodedParts(EncodedParts&& o) noexcept;
  EncodedParts& operator=(EncodedParts&& o) noexcept;
  EncodedParts(const EncodedParts&) = delete;
  EncodedParts& operator=(const EncodedParts&) = delete;
  // list[0, ends.back()) in one compute pass and command buffer per part,
  // part k ending before ends[k] (ascending).
  static EncodedParts encode(Context& ctx, const EncodedDispatch* list, const std::vector<size_t>& ends);
  bool empty() const { return cmds_.empty(); }
  size_t parts() const { return cmds_.size(); }
  size_t dispatches() const { return dispatches_; }
  void clear();

 private:
  friend class Recorder;
  std::vector<WGPUCommandBufferImpl*> cmds_;
  size_t dispatches_ = 0;
};

struct TimedSpan {
  std::string label;
  double ms = 0;
};

class Recorder {
 public:
  explicit Recorder(Context& ctx, Timing timing = Timing::None);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records one dispatch of `pipeline` with bind group 0 made from
  // `bindings` (checked against the device limits) over `grid`.
  void dispatch(const Pipeline& pipeline, const std::vector<BufferBinding>& bindings, Grid grid,
                std::string_view label = {});
  // The same with a bind group made earlier (no host work beyond encoding).
  void dispatch(const Pipeline& pipeline, const BindGroup& group, Grid grid, std::string_view label = {});
  // Checks the grid against maxComputeWorkgroupsPerDimension (throws) and
  // returns the dispatch to encode; false for an empty grid (nothing runs).
  static bool make_encoded(const Context& ctx, const Pipeline& pipeline, const BindGroup& group, Grid grid,
                           EncodedDispatch* out);
  // Records `n` dispatches in order into the current pass (one pass; a
  // pipeline or bind group equal to the previous dispatch's is not set
  // again). Not for Timing::PerDispatch.
  void dispatch_all(const EncodedDispatch* list, size_t n);
  void copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes);

  // Ends the pass and submits what is recorded so far as its own command
  // buffer, then records on into a new one: the GPU starts on the first
  // part while the host encodes the rest (timestamps are resolved by the
  // final submit()).
  void flush();
  // Ends the pass and submits what is recorded so far together with the
  // first of `parts`, then the other parts one by one (the GPU starts on the
  // first while the host submits the rest), and records on into a new
  // command buffer; `parts` is left empty. Not with GPU timing.
  void submit_parts(EncodedParts& parts);
  // Ends the pass and submits the command buffer (once).
  void submit();
  // submit(), then waits until the GPU is done; throws any device error.
  void finish();
  // finish() for a caller that already knows the submitted work is done
  // (it waited for a buffer map that the work precedes): no second wait.
  // Throws a pending device error.
  void finish_completed();
  // After finish(), with Timing other than None: the GPU time of each span
  // (a pass, or a dispatch for PerDispatch).
  std::vector<TimedSpan> timings();
  double total_gpu_ms();
  size_t dispatch_count() const { return dispatches_; }

 private:
  void ensure_pass(std::string_view label);
  void end_pass();
  void read_timestamps();

  Context& ctx_;
  Timing timing_;
  WGPUCommandEncoderImpl* encoder_ = nullptr;
  WGPUComputePassEncoderImpl* pass_ = nullptr;
  std::vector<BindGroup> keep_alive_;
  std::vector<std::shared_ptr<WGPUQuerySetImpl>> query_sets_;
  std::vector<std::string> span_labels_;
  uint32_t queries_used_in_set_ = 0;
  Buffer resolve_, readback_;
  bool submitted_ = false, finished_ = false;
  size_t dispatches_ = 0;
  std::vector<TimedSpan> spans_;
};

}  // namespace wgnn::gpu
