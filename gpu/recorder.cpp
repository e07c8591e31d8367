#include "gpu/recorder.h"

#include <fmt/format.h>

#include "gpu/context_impl.h"

namespace wgnn::gpu {
namespace {
constexpr uint32_t kQueriesPerSet = 4096;  // WebGPU's maximum query count per set

// Encodes list[0, n) into `pass`: a pipeline or bind group equal to the
// previous dispatch's is not set again.
void encode_dispatches(WGPUComputePassEncoder pass, const EncodedDispatch* list, size_t n) {
  WGPUComputePipeline last_pipeline = nullptr;
  WGPUBindGroup last_group = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const EncodedDispatch& d = list[i];
    if (d.pipeline != last_pipeline) {
      wgpuComputePassEncoderSetPipeline(pass, d.pipeline);
      last_pipeline = d.pipeline;
      last_group = nullptr;  // conservative: a new pipeline gets its group set again
    }
    if (d.group != last_group) {
      wgpuComputePassEncoderSetBindGroup(pass, 0, d.group, 0, nullptr);
      last_group = d.group;
    }
    wgpuComputePassEncoderDispatchWorkgroups(pass, d.x, d.y, d.z);
  }
}
}  // namespace

EncodedParts::EncodedParts(EncodedParts&& o) noexcept : cmds_(std::move(o.cmds_)), dispatches_(o.dispatches_) {
  o.cmds_.clear();
  o.dispatches_ = 0;
}

EncodedParts& EncodedParts::operator=(EncodedParts&& o) noexcept {
  if (this != &o) {
    clear();
    cmds_ = std::move(o.cmds_);
    dispatches_ = o.dispatches_;
    o.cmds_.clear();
    o.dispatches_ = 0;
  }
  return *this;
}

void EncodedParts::clear() {
  for (WGPUCommandBuffer c : cmds_) wgpuCommandBufferRelease(c);
  cmds_.clear();
  dispatches_ = 0;
}

EncodedParts EncodedParts::encode(Context& ctx, const EncodedDispatch* list, const std::vector<size_t>& ends) {
  EncodedParts out;
  size_t at = 0;
  for (size_t end : ends) {
    if (end < at) throw Error("EncodedParts::encode: the parts' ends are not ascending");
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
    WGPUComputePassDescriptor desc = WGPU_COMPUTE_PASS_DESCRIPTOR_INIT;
    WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(enc, &desc);
    encode_dispatches(pass, list + at, end - at);
    wgpuComputePassEncoderEnd(pass);
    wgpuComputePassEncoderRelease(pass);
    out.cmds_.push_back(wgpuCommandEncoderFinish(enc, nullptr));
    wgpuCommandEncoderRelease(enc);
    out.dispatches_ += end - at;
    at = end;
  }
  return out;
}

Recorder::Recorder(Context& ctx, Timing timing) : ctx_(ctx), timing_(timing) {
  if (timing_ != Timing::None && !ctx_.features().timestamp_query) {
    throw Error("GPU timing was requested but this adapter does not offer the timestamp-query feature");
  }
  encoder_ = wgpuDeviceCreateCommandEncoder(ctx_.device(), nullptr);
}

Recorder::~Recorder() {
  if (pass_) wgpuComputePassEncoderRelease(pass_);
  if (encoder_) wgpuCommandEncoderRelease(encoder_);
}

void Recorder::ensure_pass(std::string_view label) {
  if (submitted_) throw Error("Recorder: recording after submit()");
  if (pass_ && timing_ != Timing::PerDispatch) return;
  if (pass_) end_pass();
  WGPUComputePassDescriptor desc = WGPU_COMPUTE_PASS_DESCRIPTOR_INIT;
  WGPUPassTimestampWrites tw = WGPU_PASS_TIMESTAMP_WRITES_INIT;
  if (timing_ != Timing::None) {
    if (query_sets_.empty() || queries_used_in_set_ + 2 > kQueriesPerSet) {
      WGPUQuerySetDescriptor qd = WGPU_QUERY_SET_DESCRIPTOR_INIT;
      qd.type = WGPUQueryType_Timestamp;
      qd.count = kQueriesPerSet;
      query_sets_.emplace_back(wgpuDeviceCreateQuerySet(ctx_.device(), &qd), [](WGPUQuerySet q) {
        wgpuQuerySetDestroy(q);
        wgpuQuerySetRelease(q);
      });
      queries_used_in_set_ = 0;
    }
    tw.querySet = query_sets_.back().get();
    tw.beginningOfPassWriteIndex = queries_used_in_set_;
    tw.endOfPassWriteIndex = queries_used_in_set_ + 1;
    queries_used_in_set_ += 2;
    desc.timestampWrites = &tw;
    span_labels_.emplace_back(label.empty() ? std::string("pass") : std::string(label));
  }
  pass_ = wgpuCommandEncoderBeginComputePass(encoder_, &desc);
}

void Recorder::end_pass() {
  if (!pass_) return;
  wgpuComputePassEncoderEnd(pass_);
  wgpuComputePassEncoderRelease(pass_);
  pass_ = nullptr;
}

void Recorder::dispatch(const Pipeline& pipeline, const std::vector<BufferBinding>& bindings, Grid grid,
                        std::string_view label) {
  BindGroup g = ctx_.bind_group(pipeline, bindings, label.empty() ? std::string_view(pipeline.name()) : label);
  dispatch(pipeline, g, grid, label);
  keep_alive_.push_back(std::move(g));
}

void Recorder::dispatch(const Pipeline& pipeline, const BindGroup& group, Grid grid, std::string_view label) {
  if (grid.count() == 0) return;
  const uint32_t m = ctx_.limits().max_compute_workgroups_per_dimension;
  if (grid.x > m || grid.y > m || grid.z > m) {
    throw Error(fmt::format("dispatch '{}' of {}x{}x{} workgroups exceeds maxComputeWorkgroupsPerDimension {}",
                            pipeline.name(), grid.x, grid.y, grid.z, m));
  }
  ensure_pass(label.empty() ? std::string_view(pipeline.name()) : label);
  wgpuComputePassEncoderSetPipeline(pass_, pipeline.handle());
  wgpuComputePassEncoderSetBindGroup(pass_, 0, group.handle(), 0, nullptr);
  wgpuComputePassEncoderDispatchWorkgroups(pass_, grid.x, grid.y, grid.z);
  ++dispatches_;
}

bool Recorder::make_encoded(const Context& ctx, const Pipeline& pipeline, const BindGroup& group, Grid grid,
                            EncodedDispatch* out) {
  if (grid.count() == 0) return false;
  const uint32_t m = ctx.limits().max_compute_workgroups_per_dimension;
  if (grid.x > m || grid.y > m || grid.z > m) {
    throw Error(fmt::format("dispatch '{}' of {}x{}x{} workgroups exceeds maxComputeWorkgroupsPerDimension {}",
                            pipeline.name(), grid.x, grid.y, grid.z, m));
  }
  if (!pipeline.handle() || !group.handle()) {
    throw Error(fmt::format("dispatch '{}': no pipeline or bind group", pipeline.name()));
  }
  *out = EncodedDispatch{pipeline.handle(), group.handle(), grid.x, grid.y, grid.z};
  return true;
}

void Recorder::dispatch_all(const EncodedDispatch* list, size_t n) {
  if (timing_ == Timing::PerDispatch) throw Error("Recorder::dispatch_all: not for per-dispatch timing");
  if (n == 0) return;
  ensure_pass("pass");
  encode_dispatches(pass_, list, n);
  dispatches_ += n;
}

void Recorder::copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  if (submitted_) throw Error("Recorder: recording after submit()");
  if (src_offset + bytes > src.size() || dst_offset + bytes > dst.size()) {
    throw Error(fmt::format("copy of {} bytes from '{}'+{} to '{}'+{} overruns a buffer", bytes, src.label(),
                            src_offset, dst.label(), dst_offset));
  }
  end_pass();
  wgpuCommandEncoderCopyBufferToBuffer(encoder_, src.handle(), src_offset, dst.handle(), dst_offset, bytes);
}

void Recorder::flush() {
  if (submitted_) throw Error("Recorder: flush() after submit()");
  end_pass();
  WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(encoder_, nullptr);
  wgpuCommandEncoderRelease(encoder_);
  encoder_ = nullptr;
  wgpuQueueSubmit(ctx_.queue(), 1, &cmd);
  wgpuCommandBufferRelease(cmd);
  encoder_ = wgpuDeviceCreateCommandEncoder(ctx_.device(), nullptr);
}

void Recorder::submit_parts(EncodedParts& parts) {
  if (submitted_) throw Error("Recorder: submit_parts() after submit()");
  if (timing_ != Timing::None) throw Error("Recorder::submit_parts: not with GPU timing");
  if (parts.empty()) return;
  end_pass();
  WGPUCommandBuffer first[2] = {wgpuCommandEncoderFinish(encoder_, nullptr), parts.cmds_[0]};
  wgpuCommandEncoderRelease(encoder_);
  encoder_ = nullptr;
  wgpuQueueSubmit(ctx_.queue(), 2, first);
  wgpuCommandBufferRelease(first[0]);
  for (size_t i = 1; i < parts.cmds_.size(); ++i) wgpuQueueSubmit(ctx_.queue(), 1, &parts.cmds_[i]);
  dispatches_ += parts.dispatches_;
  parts.clear();
  encoder_ = wgpuDeviceCreateCommandEncoder(ctx_.device(), nullptr);
}

void Recorder::submit() {
  if (submitted_) return;
  end_pass();
  const uint32_t spans = uint32_t(span_labels_.size());
  if (spans) {
    resolve_ = ctx_.create_buffer(uint64_t(spans) * 16, kQueryResolve | kCopySrc, "timestamps");
    for (size_t s = 0; s < query_sets_.size(); ++s) {
      const uint32_t first_span = uint32_t(s) * (kQueriesPerSet / 2);
      const uint32_t n = std::min<uint32_t>(kQueriesPerSet / 2, spans - first_span);
      wgpuCommandEncoderResolveQuerySet(encoder_, query_sets_[s].get(), 0, n * 2, resolve_.handle(),
                                        uint64_t(first_span) * 16);
    }
  }
  WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(encoder_, nullptr);
  wgpuQueueSubmit(ctx_.queue(), 1, &cmd);
  wgpuCommandBufferRelease(cmd);
  submitted_ = true;
}

void Recorder::finish() {
  submit();
  ctx_.wait_idle();
  read_timestamps();
}

void Recorder::finish_completed() {
  if (!submitted_) throw Error("Recorder::finish_completed() before submit()");
  ctx_.check();
  read_timestamps();
}

void Recorder::read_timestamps() {
  finished_ = true;
  if (!span_labels_.empty()) {
    std::vector<uint64_t> ts(span_labels_.size() * 2);
    ctx_.read(resolve_, ts.data(), ts.size() * sizeof(uint64_t));
    spans_.clear();
    for (size_t i = 0; i < span_labels_.size(); ++i) {
      const uint64_t b = ts[2 * i], e = ts[2 * i + 1];
      spans_.push_back({span_labels_[i], e >= b ? double(e - b) * 1e-6 : 0.0});
    }
  }
  keep_alive_.clear();
}

std::vector<TimedSpan> Recorder::timings() {
  if (!finished_) throw Error("Recorder::timings() before finish()");
  return spans_;
}

double Recorder::total_gpu_ms() {
  double t = 0;
  for (const auto& s : timings()) t += s.ms;
  return t;
}

}  // namespace wgnn::gpu
