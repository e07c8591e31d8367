#include "graph/graph.h"

#include "graph/constant_store.h"
#include "gpu/buffer_batch.h"
#include "util/copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

namespace wgnn {

Graph::Graph(gpu::Context& ctx) : ctx_(ctx) {}

// A run submitted and not waited for (Graph::submit).
struct Graph::Pending {
  std::unique_ptr<gpu::Recorder> rec;
  std::vector<int> outputs;                 // tensor ids, in submit()'s order
  std::vector<const gpu::Buffer*> staging;  // mapped by wait(): outputs', then the check flags'
  size_t slot = 0;
  uint64_t check_bytes = 0;
  double upload_us = 0, encode_us = 0, submit_us = 0, ahead_us = 0;
  bool from_ahead = false;
};

Graph::~Graph() {
  for (auto& p : pending_) {
    try {
      p->rec->finish();  // its buffers are in use until the GPU is done
    } catch (...) {
    }
  }
  pending_.clear();
  if (store_)
    for (const std::string& k : store_keys_) store_->release(k);
}

TensorRef Graph::add_tensor(const Shape& shape, DType dtype, TensorKind kind, std::string name) {
  for (int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("tensor '{}' has a negative dimension in {}", name, shape_str(shape)));
  }
  TensorInfo t;
  t.shape = shape;
  t.dtype = dtype;
  t.kind = kind;
  t.name = name.empty() ? fmt::format("t{}", tensors_.size()) : std::move(name);
  tensors_.push_back(std::move(t));
  prepared_ = false;
  return TensorRef{int(tensors_.size()) - 1};
}

TensorRef Graph::add_constant(const Shape& shape, DType dtype, const void* data, std::string name) {
  TensorRef t = add_tensor(shape, dtype, TensorKind::Constant, std::move(name));
  if (meta_) return t;
  TensorInfo& ti = info(t);
  if (!store_) {
    write(t, data, ti.nbytes());
    return t;
  }
  std::string key;
  gpu::Buffer b = store_->acquire(ti.shape, ti.dtype, data, ti.nbytes(), ti.name, &key);
  hold_shared(ti, std::move(b), std::move(key));
  return t;
}

void Graph::hold_shared(TensorInfo& ti, gpu::Buffer buffer, std::string key) {
  ti.buffer = std::move(buffer);
  ti.offset = 0;
  ti.shared = true;
  store_keys_.push_back(std::move(key));
}

TensorRef Graph::add_memo_constant(const std::string& memo, const std::function<const HostTensor&(HostTensor&)>& make,
                                   std::string name) {
  if (!store_ || meta_) {
    HostTensor scratch;
    const HostTensor& t = make(scratch);
    return add_constant(t.shape, t.dtype, t.data.data(), std::move(name));
  }
  std::string key;
  const std::string label = name;
  gpu::Buffer b = store_->acquire_memo(memo, make, label, &key);
  TensorRef t = add_tensor(store_->shape_of(key), store_->dtype_of(key), TensorKind::Constant, std::move(name));
  hold_shared(info(t), std::move(b), std::move(key));
  return t;
}

TensorRef Graph::add_view(TensorRef base, const Shape& shape) {
  const TensorInfo& b = info(base);
  if (numel(shape) != b.numel()) {
    throw Error(fmt::format("view of '{}' {} as {}: element counts differ", b.name, shape_str(b.shape),
                            shape_str(shape)));
  }
  TensorRef v = add_tensor(shape, b.dtype, TensorKind::Intermediate, info(base).name + ".view");
  tensors_[size_t(v.id)].view_of = base.id;
  return v;
}

TensorRef Graph::add_part_view(TensorRef base, const Shape& shape, uint64_t byte_offset) {
  const TensorInfo& b = info(base);
  const uint64_t bytes = uint64_t(numel(shape)) * gpu_dtype_size(b.dtype);
  const uint64_t align = std::max<uint64_t>(ctx_.limits().min_storage_buffer_offset_alignment, 16);
  if (byte_offset % align != 0 || bytes % 16 != 0 || bytes == 0 || byte_offset + bytes > b.gpu_bytes()) {
    return TensorRef{-1};
  }
  TensorRef v = add_tensor(shape, b.dtype, TensorKind::Intermediate, info(base).name + ".part");
  tensors_[size_t(v.id)].view_of = base.id;
  tensors_[size_t(v.id)].view_offset = byte_offset;
  return v;
}

bool Graph::alias_into(TensorRef x, TensorRef y, uint64_t byte_offset) {
  if (!can_alias_into(x, y, byte_offset)) return false;
  TensorInfo& xi = info(x);
  xi.view_of = y.id;
  xi.view_offset = byte_offset;
  prepared_ = false;
  return true;
}

bool Graph::can_alias_into(TensorRef x, TensorRef y, uint64_t byte_offset) const {
  const TensorInfo& xi = info(x);
  const TensorInfo& yi = info(y);
  const uint64_t align = std::max<uint64_t>(ctx_.limits().min_storage_buffer_offset_alignment, 16);
  if (x.id == y.id || xi.view_of >= 0 || yi.view_of >= 0 || xi.kind != TensorKind::Intermediate ||
      gpu_dtype_size(xi.dtype) != gpu_dtype_size(yi.dtype) || xi.buffer.valid()) {
    return false;
  }
  if (byte_offset % align != 0 || xi.gpu_bytes() % 16 != 0 || xi.gpu_bytes() == 0 ||
      byte_offset + xi.gpu_bytes() > yi.gpu_bytes()) {
    return false;
  }
  // A meta graph keeps no dispatches to check against: the plan that
  // lowers the model decides.
  if (meta_) return false;
  for (size_t t = 0; t < tensors_.size(); ++t)
    if (tensors_[t].kind != TensorKind::Intermediate && root_of(int(t)) == x.id) return false;
  for (const auto* list : {&nodes_, &init_nodes_}) {
    for (const DispatchNode& d : *list) {
      bool binds_x = false, binds_y = false;
      for (const Binding& b : d.bindings) {
        if (b.tensor < 0) continue;
        const int r = root_of(b.tensor);
        binds_x |= r == x.id;
        binds_y |= r == y.id;
      }
      if (binds_x && binds_y) return false;
    }
  }
  return true;
}

const void* SharedStorage::layout_of(const std::vector<int64_t>& structure) const {
  for (const auto& l : layouts_)
    if (l->structure == structure) return l.get();
  return nullptr;
}

Graph::Choice Graph::choose(const char* site, int preferred) {
  if (meta_) return Choice{SIZE_MAX, preferred};
  const size_t i = choices_.made.size();
  int value = preferred;
  if (replay_ && !replay_diverged_) {
    if (i < replay_->made.size() && std::strcmp(replay_->made[i].first, site) == 0) {
      value = replay_->made[i].second;
    } else {
      replay_diverged_ = true;  // another op at this point: the structure is another
    }
  }
  choices_.made.emplace_back(site, value);
  return Choice{i, value};
}

void Graph::made(const Choice& c, int done) {
  if (c.index >= choices_.made.size()) return;
  choices_.made[c.index].second = done;
  if (replay_ && done != c.value) replay_diverged_ = true;
}

void Graph::replay_choices(std::shared_ptr<const PlanChoices> log) {
  replay_ = std::move(log);
  replay_diverged_ = false;
}

bool Graph::replay_followed() const {
  return replay_ && !replay_diverged_ && choices_.made.size() == replay_->made.size();
}

int Graph::root_of(int id) const {
  while (tensors_[size_t(id)].view_of >= 0) id = tensors_[size_t(id)].view_of;
  return id;
}

TensorRef Graph::storage_root(TensorRef t) const {
  info(t);  // checks the id
  return TensorRef{root_of(t.id)};
}

const TensorInfo& Graph::info(TensorRef t) const {
  if (t.id < 0 || size_t(t.id) >= tensors_.size()) throw Error(fmt::format("no tensor with id {}", t.id));
  return tensors_[size_t(t.id)];
}
TensorInfo& Graph::info(TensorRef t) {
  if (t.id < 0 || size_t(t.id) >= tensors_.size()) throw Error(fmt::format("no tensor with id {}", t.id));
  return tensors_[size_t(t.id)];
}

void Graph::mark_output(TensorRef t) { info(t).kind = TensorKind::Output; }

void Graph::add_dispatch(const gpu::Pipeline& pipeline, std::vector<Binding> bindings, gpu::Grid grid,
                         std::string op, std::string label, double flops) {
  if (meta_) return;
  nodes_.push_back(DispatchNode{&pipeline, std::move(bindings), grid, std::move(op),
                                label.empty() ? pipeline.name() : std::move(label), origin_, {}, flops});
  prepared_ = false;
}

void Graph::add_init_dispatch(const gpu::Pipeline& pipeline, std::vector<Binding> bindings, gpu::Grid grid,
                              std::string op, std::string label) {
  if (meta_) return;
  init_nodes_.push_back(DispatchNode{&pipeline, std::move(bindings), grid, std::move(op),
                                     label.empty() ? pipeline.name() : std::move(label), origin_, {}});
  prepared_ = false;
}

Binding Graph::uniform(const void* data, size_t bytes) {
  // Blocks of 16-byte multiples (WGSL rounds a uniform struct's size up to
  // its alignment, 16 at most) at the device's uniform offset alignment,
  // in buffers of 16 KiB, then 64 KiB (a plan of a few hundred
  // dispatches: one or two buffers).
  if (meta_) return Binding{};
  const uint64_t align = std::max<uint64_t>(16, ctx_.limits().min_uniform_buffer_offset_alignment);
  const uint64_t size = (std::max<uint64_t>(bytes, 16) + 15) / 16 * 16;
  auto fits = [&](const UniformChunk& c) {
    return (c.bytes.size() + align - 1) / align * align + size <= c.buffer.size();
  };
  if (uniform_chunks_.empty() || !fits(uniform_chunks_.back())) {
    const uint64_t capacity = std::max<uint64_t>(size, uniform_chunks_.empty() ? 16 << 10 : 64 << 10);
    UniformChunk c;
    c.buffer = ctx_.create_buffer(capacity, gpu::kUniform | gpu::kCopyDst, "uniforms");
    c.bytes.reserve(capacity);
    uniform_chunks_.push_back(std::move(c));
  }
  UniformChunk& c = uniform_chunks_.back();
  const uint64_t offset = (c.bytes.size() + align - 1) / align * align;
  c.bytes.resize(offset + size, 0);
  if (bytes) std::memcpy(c.bytes.data() + offset, data, bytes);
  return Binding{-1, c.buffer, offset, size};
}

void Graph::write_uniforms() {
  for (UniformChunk& c : uniform_chunks_) {
    if (c.written == c.bytes.size()) continue;
    ctx_.write(c.buffer, c.bytes.data() + c.written, c.bytes.size() - c.written, c.written);
    c.written = c.bytes.size();
  }
}

gpu::Buffer Graph::scratch(uint64_t bytes, std::string label) {
  if (meta_) return {};
  owned_.push_back(ctx_.create_buffer(bytes, gpu::kStorageUsage, label));
  return owned_.back();
}

Graph::Check Graph::add_check(std::string what) {
  if (meta_) return {};
  if (!check_flags_.valid()) {
    const uint64_t bytes = uint64_t(kMaxChecks) * 8;
    check_flags_ = ctx_.create_buffer(bytes, gpu::kStorageUsage, "check flags");
    for (auto& b : check_staging_) b = ctx_.create_buffer(bytes, gpu::kMapRead | gpu::kCopyDst, "check flags readback");
  }
  std::string message = origin_.empty() ? std::move(what) : origin_ + ": " + what;
  if (checks_.size() + 1 >= kMaxChecks) {
    if (checks_.size() + 1 == kMaxChecks) checks_.push_back(std::move(message));
    else checks_.back() = fmt::format("one of the run-time checks from number {} on failed (value {{}})", kMaxChecks);
    return Check{check_flags_, kMaxChecks - 1};
  }
  checks_.push_back(std::move(message));
  return Check{check_flags_, uint32_t(checks_.size() - 1)};
}

void Graph::ensure_storage(int id) {
  TensorInfo& t = tensors_[size_t(id)];
  if (t.buffer.valid()) return;
  if (t.view_of >= 0) {
    ensure_storage(t.view_of);
    const TensorInfo& root = tensors_[size_t(t.view_of)];
    t.buffer = root.buffer;
    t.offset = root.offset + t.view_offset;
    return;
  }
  // Bindings are checked against maxStorageBufferBindingSize by prepare();
  // a tensor only ever bound in ranges may be larger (up to maxBufferSize).
  t.buffer = ctx_.create_buffer(t.gpu_bytes(), gpu::kStorageUsage, t.name);
  t.offset = 0;
}

uint64_t Graph::bound_bytes(const Binding& b) const {
  const TensorInfo& t = tensors_[size_t(b.tensor)];
  return b.size ? b.size : t.gpu_bytes();
}

std::string binding_limit_advice(const gpu::Context& ctx) {
  std::string s =
      "ops that split larger tensors: elementwise unary and binary, copies (permute, expand, slice, pad, repeat), "
      "cat, index_select, gather, matmul, linear, gemm, addmm, sum, mean, amax, amin, prod, softmax, "
      "log_softmax, layer_norm; ";
  if (ctx.limits_mode() == "default") {
    s += "this device was asked for WebGPU's default limits (WGNN_LIMITS=default): WGNN_LIMITS=adapter gives the "
         "adapter's own, which may be larger";
  } else {
    s += "an adapter with a larger maxStorageBufferBindingSize runs it";
  }
  return s;
}

void Graph::check_bindings(const std::vector<DispatchNode>& nodes) const {
  const uint64_t limit = ctx_.limits().max_storage_buffer_binding_size;
  const uint64_t most = ctx_.limits().max_buffer_size;
  for (const DispatchNode& node : nodes) {
    for (const Binding& b : node.bindings) {
      if (b.tensor < 0) continue;
      const TensorInfo& t = tensors_[size_t(b.tensor)];
      if (t.gpu_bytes() > most) {
        throw Error(fmt::format("{}: tensor '{}' {} {} is {} bytes, over this device's maxBufferSize of {} bytes; a "
                                "tensor is one buffer, so it cannot run on this device ({})",
                                node.op, t.name, dtype_name(t.dtype), shape_str(t.shape), t.gpu_bytes(), most,
                                ctx_.limits_mode() == "default"
                                    ? "WGNN_LIMITS=default is set: WGNN_LIMITS=adapter gives the adapter's own "
                                      "limits, which may be larger"
                                    : "an adapter with a larger maxBufferSize runs it"));
      }
      if (b.size && b.offset + b.size > (t.gpu_bytes() + 15) / 16 * 16) {
        throw Error(fmt::format("{}: binds bytes [{}, {}) of tensor '{}' {} {}, which has {} bytes", node.op,
                                b.offset, b.offset + b.size, t.name, dtype_name(t.dtype), shape_str(t.shape),
                                t.gpu_bytes()));
      }
      if (bound_bytes(b) > limit) {
        throw Error(fmt::format("{}: tensor '{}' {} {} is {} bytes, over this device's maxStorageBufferBindingSize "
                                "of {} bytes; this op binds it whole, so it cannot run on this device ({})",
                                node.op, t.name, dtype_name(t.dtype), shape_str(t.shape), t.gpu_bytes(), limit,
                                binding_limit_advice(ctx_)));
      }
    }
  }
}

// WebGPU's rule for one dispatch (its synchronization scope): a buffer bound
// where the shader writes it may not also be bound anywhere read-only (Dawn
// checks whole buffers, not ranges: a validation error at submit that names
// no op). Two writable bindings of one buffer are allowed by WebGPU, but
// overlapping ones would race. Views (slices, in-place concatenations) and
// the memory pool put several tensors in one buffer, so the plan checks
// every dispatch here, in every build, and names the node.
void Graph::check_no_write_alias(const DispatchNode& node, const std::vector<gpu::BufferBinding>& bs) const {
  for (size_t i = 0; i < bs.size(); ++i) {
    if (!node.pipeline->writes(i)) continue;
    for (size_t j = 0; j < bs.size(); ++j) {
      if (j == i || !(*bs[j].buffer == *bs[i].buffer)) continue;
      const bool both_write = node.pipeline->writes(j);
      if (both_write) {
        if (j < i) continue;  // each writable pair once
        const uint64_t ei = bs[i].offset + bs[i].size, ej = bs[j].offset + bs[j].size;
        if (ei <= bs[j].offset || ej <= bs[i].offset) continue;  // disjoint ranges
      }
      auto name = [&](size_t k) {
        const Binding& b = node.bindings[k];
        return b.tensor >= 0 ? fmt::format("tensor '{}'", tensors_[size_t(b.tensor)].name)
                             : std::string("an op-owned buffer");
      };
      throw Error(fmt::format(
          "{}{}: kernel '{}' writes binding {} ({}, bytes [{}, {}) of buffer '{}') and {} binding {} ({}, bytes "
          "[{}, {})) of the same buffer in one dispatch; WebGPU forbids {} (a planning error: a view or a pooled "
          "buffer was shared where it may not be)",
          node.origin.empty() ? "" : node.origin + ": ", node.op, node.label, i, name(i), bs[i].offset,
          bs[i].offset + bs[i].size, bs[i].buffer->label(), both_write ? "writes" : "reads", j, name(j),
          bs[j].offset, bs[j].offset + bs[j].size,
          both_write ? "nothing, but overlapping writes race" : "a buffer bound as written and read at once"));
    }
  }
}

gpu::BufferBinding Graph::resolve(const Binding& b) {
  if (b.tensor >= 0 && b.size) {
    const TensorInfo& t = tensors_[size_t(b.tensor)];
    return gpu::BufferBinding{&t.buffer, t.offset + b.offset, b.size};
  }
  if (b.tensor >= 0) {
    const TensorInfo& t = tensors_[size_t(b.tensor)];
    // Bind the tensor's bytes rounded up to 16 (vec4 views of the tail).
    const uint64_t size = std::min<uint64_t>((std::max<uint64_t>(t.gpu_bytes(), 4) + 15) / 16 * 16,
                                             t.buffer.size() - t.offset);
    return gpu::BufferBinding{&t.buffer, t.offset, size};
  }
  if (b.size) return gpu::BufferBinding{&b.buffer, b.offset, b.size};
  return gpu::BufferBinding{&b.buffer, 0, b.buffer.size()};
}

size_t Graph::remove_dead_dispatches() {
  // Storage roots read later (or inputs, outputs, constants).
  std::vector<bool> needed(tensors_.size(), false);
  for (size_t t = 0; t < tensors_.size(); ++t)
    if (tensors_[t].kind != TensorKind::Intermediate) needed[root_of(int(t))] = true;
  std::vector<bool> keep(nodes_.size(), false);
  for (size_t i = nodes_.size(); i-- > 0;) {
    const DispatchNode& d = nodes_[i];
    bool writes_any = false;
    for (size_t j = 0; j < d.bindings.size() && !keep[i]; ++j) {
      if (!d.pipeline->writes(j)) continue;
      writes_any = true;
      const Binding& b = d.bindings[j];
      // An op-owned buffer's later readers are not tracked: keep.
      if (b.tensor < 0 || needed[root_of(b.tensor)]) keep[i] = true;
    }
    if (!writes_any) keep[i] = true;  // unknown effects: keep
    if (!keep[i]) continue;
    for (const Binding& b : d.bindings)
      if (b.tensor >= 0) needed[root_of(b.tensor)] = true;
  }
  std::vector<DispatchNode> kept;
  kept.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (keep[i]) kept.push_back(std::move(nodes_[i]));
  const size_t dropped = nodes_.size() - kept.size();
  nodes_ = std::move(kept);
  if (dropped) prepared_ = false;
  return dropped;
}

void Graph::prepare() {
  if (meta_) throw Error("a graph that only follows shapes (Graph::set_meta) cannot be prepared or run");
  write_uniforms();
  check_bindings(nodes_);
  check_bindings(init_nodes_);
  for (const auto* list : {&nodes_, &init_nodes_}) {
    for (const DispatchNode& d : *list) {
      for (size_t j = 0; j < d.bindings.size(); ++j) {
        int r = d.bindings[j].tensor;
        if (r < 0 || !d.pipeline->writes(j)) continue;
        while (tensors_[size_t(r)].view_of >= 0) r = tensors_[size_t(r)].view_of;
        if (tensors_[size_t(r)].shared) {
          throw Error(fmt::format("{}: kernel '{}' writes constant '{}', which is shared with other graphs "
                                  "(constants are read-only)",
                                  d.op, d.label, tensors_[size_t(r)].name));
        }
      }
    }
  }
  // Liveness of each storage root over the dispatch list.
  const size_t n = tensors_.size();
  std::vector<int> first(n, -1), last(n, -1);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const Binding& b : nodes_[i].bindings) {
      if (b.tensor < 0) continue;
      const size_t r = size_t(root_of(b.tensor));
      if (first[r] < 0) first[r] = int(i);
      last[r] = int(i);
    }
  }
  // Users hold views too: a view's uses count for its root (done above);
  // an intermediate nobody reads after its producer is a result. A root
  // with a view that is an output (or input) keeps its own buffer too.
  std::vector<bool> external(n, false);
  for (size_t t = 0; t < n; ++t) {
    if (tensors_[t].view_of >= 0 && tensors_[t].kind != TensorKind::Intermediate) {
      external[size_t(root_of(int(t)))] = true;
    }
  }
  std::vector<bool> pooled(n, false);
  memory_ = MemoryStats{};
  for (size_t t = 0; t < n; ++t) {
    TensorInfo& ti = tensors_[t];
    if (ti.view_of >= 0) continue;
    const bool intermediate =
        ti.kind == TensorKind::Intermediate && !external[t] && first[t] >= 0 && last[t] > first[t];
    if (intermediate) {
      pooled[t] = true;
      memory_.intermediate_sum += ti.gpu_bytes();
    }
  }
  // The storage (this graph's own unless share_storage gave another) and
  // the layout of this graph's structure in it.
  if (!storage_) storage_ = std::make_shared<SharedStorage>();
  SharedStorage& ss = *storage_;
  const std::vector<int64_t> st = structure();
  auto need_of = [&](size_t t) { return std::max<uint64_t>(16, (tensors_[t].gpu_bytes() + 255) / 256 * 256); };
  const SharedStorage::Layout* layout = nullptr;
  for (const auto& l : ss.layouts_)
    if (l->structure == st) layout = l.get();
  if (!layout) {
    // Pool slots by liveness: a tensor holds a slot from the first
    // dispatch that touches it (its producer) to the last that reads it.
    // Best fit among the free slots by this graph's sizes; where none is
    // large enough, the largest free slot (grown below) rather than a new
    // one; a new slot only when none is free. The storage's slots (other
    // structures') start free: the graphs take turns. Which tensors share
    // a slot depends only on liveness, so the layout serves the
    // structure's graphs at every size.
    auto l = std::make_unique<SharedStorage::Layout>();
    l->structure = st;
    l->slot_of.assign(n, -1);
    std::vector<uint64_t> slot_bytes;
    for (const gpu::Buffer& b : ss.slots_) slot_bytes.push_back(b.valid() ? b.size() : 0);
    std::vector<int> free_list;
    for (size_t k = 0; k < slot_bytes.size(); ++k) free_list.push_back(int(k));
    std::vector<std::vector<size_t>> dies_at(nodes_.size());
    for (size_t t = 0; t < n; ++t) {
      if (pooled[t]) dies_at[size_t(last[t])].push_back(t);
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const Binding& b : nodes_[i].bindings) {
        if (b.tensor < 0) continue;
        const size_t r = size_t(root_of(b.tensor));
        if (!pooled[r] || l->slot_of[r] >= 0) continue;
        const uint64_t need = need_of(r);
        size_t best = free_list.size(), largest = free_list.size();
        for (size_t k = 0; k < free_list.size(); ++k) {
          const uint64_t have = slot_bytes[size_t(free_list[k])];
          if (have >= need && (best == free_list.size() || have < slot_bytes[size_t(free_list[best])])) best = k;
          if (largest == free_list.size() || have > slot_bytes[size_t(free_list[largest])]) largest = k;
        }
        if (best == free_list.size()) best = largest;
        if (best < free_list.size()) {
          l->slot_of[r] = free_list[best];
          slot_bytes[size_t(free_list[best])] = std::max(slot_bytes[size_t(free_list[best])], need);
          free_list.erase(free_list.begin() + long(best));
        } else {
          l->slot_of[r] = int(slot_bytes.size());
          slot_bytes.push_back(need);
        }
      }
      for (size_t t : dies_at[i]) free_list.push_back(l->slot_of[t]);
    }
    ss.slots_.resize(slot_bytes.size());
    ss.layouts_.push_back(std::move(l));
    layout = ss.layouts_.back().get();
  }
  layout_ = layout;
  const std::vector<int>& slot_of = layout->slot_of;
  // Each slot as large as the largest tensor this graph puts in it.
  std::vector<uint64_t> slot_need(ss.slots_.size(), 0);
  for (size_t t = 0; t < n; ++t)
    if (pooled[t]) slot_need[size_t(slot_of[t])] = std::max(slot_need[size_t(slot_of[t])], need_of(t));
  for (size_t k = 0; k < ss.slots_.size(); ++k) {
    if (slot_need[k] > 0) shared_buffer(int(k), -1, slot_need[k]);
  }
  int ordinal[4] = {0, 0, 0, 0};  // by TensorKind
  for (size_t t = 0; t < n; ++t) {
    TensorInfo& ti = tensors_[t];
    if (pooled[t]) {
      ti.buffer = ss.slots_[size_t(slot_of[t])];
      ti.offset = 0;
    } else if (ti.view_of < 0 && ti.kind != TensorKind::Constant && (ti.kind != TensorKind::Intermediate || first[t] >= 0)) {
      // Inputs, outputs and results (read after a run): the storage's,
      // keyed by kind and order (the k-th input of every graph uses one
      // buffer, whatever its structure). A buffer the tensor got before
      // (an input written before the first prepare) becomes the storage's,
      // its data kept.
      const int key = (int(ti.kind) << 24) | ordinal[int(ti.kind)]++;
      const uint64_t need = (std::max<uint64_t>(ti.gpu_bytes(), 4) + 15) / 16 * 16;
      if (ti.buffer.valid() && ti.offset == 0 && ti.buffer.size() >= need && !ss.own_.count(key)) {
        ss.own_[key] = ti.buffer;
      } else {
        ti.buffer = shared_buffer(-1, key, need);
        ti.offset = 0;
      }
    }
  }
  memory_.pool_buffers = ss.slots_.size();
  for (const gpu::Buffer& b : ss.slots_) memory_.intermediate_pool += b.valid() ? b.size() : 0;
  for (size_t t = 0; t < n; ++t) {
    TensorInfo& ti = tensors_[t];
    if (ti.view_of >= 0) {
      ti.buffer = gpu::Buffer();  // re-derived from the root
    }
  }
  for (size_t i = 0; i < n; ++i) ensure_storage(int(i));
  for (size_t t = 0; t < n; ++t) {
    const TensorInfo& ti = tensors_[t];
    if (ti.view_of >= 0 || pooled[t]) continue;
    (ti.kind == TensorKind::Constant ? memory_.constant_bytes : memory_.io_bytes) += ti.gpu_bytes();
    if (ti.shared) memory_.shared_constant_bytes += ti.gpu_bytes();
  }

  auto build = [&](std::vector<DispatchNode>& nodes) {
    for (auto& node : nodes) {
      std::vector<gpu::BufferBinding> bs;
      bs.reserve(node.bindings.size());
      for (const auto& b : node.bindings) bs.push_back(resolve(b));
      check_no_write_alias(node, bs);
      node.group = ctx_.bind_group(*node.pipeline, bs, node.op);
    }
  };
  ahead_.clear();
  build(nodes_);
  build(init_nodes_);
  encoded_.clear();
  encoded_.reserve(nodes_.size());
  for (const auto& node : nodes_) {
    gpu::EncodedDispatch d;
    if (gpu::Recorder::make_encoded(ctx_, *node.pipeline, node.group, node.grid, &d)) encoded_.push_back(d);
  }
  if (!pending_.empty()) throw Error("Graph::prepare: runs are in flight; wait() for them first");
  for (auto& slot : staging_) slot.clear();
  for (auto& slot : upload_) slot.clear();
  if (!init_nodes_.empty()) {
    gpu::Recorder rec(ctx_);
    for (auto& node : init_nodes_) rec.dispatch(*node.pipeline, node.group, node.grid, node.label);
    rec.finish();
    init_nodes_.clear();
  }
  prepared_ = true;
  storage_gen_ = ss.generation_;
}

size_t SharedStorage::buffers() const {
  size_t k = own_.size();
  for (const gpu::Buffer& b : slots_) k += b.valid() ? 1 : 0;
  return k;
}

uint64_t SharedStorage::bytes() const {
  uint64_t sum = 0;
  for (const gpu::Buffer& b : slots_) sum += b.valid() ? b.size() : 0;
  for (const auto& [id, b] : own_) sum += b.size();
  return sum;
}

std::vector<int64_t> Graph::structure() const {
  std::vector<int64_t> s;
  s.reserve(2 + tensors_.size() * 2 + nodes_.size() * 4);
  s.push_back(int64_t(tensors_.size()));
  for (const TensorInfo& t : tensors_) {
    s.push_back(int64_t(t.kind));
    s.push_back(t.view_of);
  }
  s.push_back(int64_t(nodes_.size()));
  for (const DispatchNode& d : nodes_) {
    s.push_back(int64_t(d.bindings.size()));
    for (const Binding& b : d.bindings) s.push_back(b.tensor);
  }
  return s;
}

void Graph::share_storage(const std::shared_ptr<SharedStorage>& storage) {
  if (!storage) throw Error("Graph::share_storage: no storage given");
  if (storage == storage_) return;
  if (!pending_.empty()) throw Error("Graph::share_storage: runs are in flight; wait() for them first");
  storage_ = storage;
  layout_ = nullptr;
  prepared_ = false;
}

const gpu::Buffer& Graph::shared_buffer(int slot, int id, uint64_t need) {
  SharedStorage& ss = *storage_;
  gpu::Buffer& b = slot >= 0 ? ss.slots_[size_t(slot)] : ss.own_[id];
  if (b.valid() && b.size() >= need) return b;
  // Grown to twice its size (or what is needed, if more), so a plan run at
  // growing sizes replaces each buffer a few times, not at every size; not
  // past maxBufferSize (check_bindings named the tensor that is).
  uint64_t bytes = need;
  if (b.valid()) {
    const uint64_t twice = b.size() * 2;
    if (twice > need && twice <= ctx_.limits().max_buffer_size) bytes = twice;
    ++ss.generation_;  // the other graphs' bind groups hold the old buffer
  }
  b = ctx_.create_buffer(bytes, gpu::kStorageUsage,
                         slot >= 0 ? fmt::format("pool {}", slot) : fmt::format("io {}.{}", id >> 24, id & 0xffffff));
  return b;
}

std::vector<const gpu::Pipeline*> Graph::pipelines() const {
  std::vector<const gpu::Pipeline*> all;
  std::set<const gpu::Pipeline*> seen;
  for (const auto* list : {&nodes_, &init_nodes_})
    for (const DispatchNode& d : *list)
      if (seen.insert(d.pipeline).second) all.push_back(d.pipeline);
  return all;
}

std::vector<const gpu::Pipeline*> Graph::pending_pipelines() const {
  std::vector<const gpu::Pipeline*> pending;
  for (const gpu::Pipeline* p : pipelines())
    if (!p->ready()) pending.push_back(p);
  return pending;
}

std::string Graph::memory_summary() const {
  const auto mib = [](uint64_t b) { return double(b) / double(1 << 20); };
  return fmt::format("intermediates {:.2f} MiB in {} pooled buffers (vs {:.2f} MiB unplanned); inputs/outputs "
                     "{:.2f} MiB; constants {:.2f} MiB{}",
                     mib(memory_.intermediate_pool), memory_.pool_buffers, mib(memory_.intermediate_sum),
                     mib(memory_.io_bytes), mib(memory_.constant_bytes),
                     memory_.shared_constant_bytes ? fmt::format(" ({:.2f} MiB of them shared with other graphs)",
                                                                 mib(memory_.shared_constant_bytes))
                                                   : "");
}

void Graph::write(TensorRef t, const void* data, size_t bytes) {
  ensure_storage(t.id);
  const TensorInfo& ti = info(t);
  if (ti.shared || (ti.view_of >= 0 && tensors_[size_t(ti.view_of)].shared)) {
    throw Error(fmt::format("tensor '{}' is a constant shared with other graphs: it cannot be written", ti.name));
  }
  if (bytes != ti.nbytes()) {
    throw Error(fmt::format("writing {} bytes into tensor '{}' {} {} of {} bytes", bytes, ti.name,
                            dtype_name(ti.dtype), shape_str(ti.shape), ti.nbytes()));
  }
  if (gpu_dtype_size(ti.dtype) == dtype_size(ti.dtype)) {  // f32, f16, i32: the same bytes
    ctx_.write(ti.buffer, data, bytes, ti.offset);
    return;
  }
  const std::vector<uint8_t> gpu = to_gpu_layout(ti.dtype, data, size_t(ti.numel()), ti.name);
  ctx_.write(ti.buffer, gpu.data(), gpu.size(), ti.offset);
}

void Graph::read(TensorRef t, void* data, size_t bytes) {
  ensure_storage(t.id);
  const TensorInfo& ti = info(t);
  if (bytes != ti.nbytes()) {
    throw Error(fmt::format("reading {} bytes from tensor '{}' of {} bytes", bytes, ti.name, ti.nbytes()));
  }
  std::vector<uint8_t> gpu(ti.gpu_bytes());
  ctx_.read(ti.buffer, gpu.data(), gpu.size(), ti.offset);
  from_gpu_layout(ti.dtype, gpu.data(), size_t(ti.numel()), data);
}

const gpu::Buffer* Graph::stage_input(const HostIn& in, size_t slot) {
  if (ctx_.settings().is("WGNN_UPLOAD_STAGING", "0") || in.bytes < kStagedUploadBytes) return nullptr;
  ensure_storage(in.tensor.id);
  const TensorInfo& ti = info(in.tensor);
  // What write() checks and converts stays there.
  if (ti.shared || ti.view_of >= 0 || in.bytes != ti.nbytes() || gpu_dtype_size(ti.dtype) != dtype_size(ti.dtype)) {
    return nullptr;
  }
  const uint64_t padded = (uint64_t(in.bytes) + 3) / 4 * 4;
  gpu::Buffer& b = upload_[slot][in.tensor.id];
  if (!b.valid() || b.size() < padded) b = ctx_.create_buffer(padded, gpu::kMapWrite | gpu::kCopySrc, ti.name + " upload");
  auto* dst = static_cast<unsigned char*>(ctx_.map_for_write(b, padded));
  util::copy_parallel({{dst, in.data, in.bytes}},
                      ctx_.settings().is("WGNN_PARALLEL_COPY", "0") ? 1 : util::copy_threads(in.bytes));
  std::memset(dst + in.bytes, 0, size_t(padded - in.bytes));
  ctx_.unmap(b);
  return &b;
}

gpu::Buffer& Graph::staging_for(int tensor, size_t slot) {
  gpu::Buffer& b = staging_[slot][tensor];
  const TensorInfo& ti = tensors_[size_t(tensor)];
  const uint64_t bytes = (ti.gpu_bytes() + 3) / 4 * 4;
  if (!b.valid() || b.size() < bytes) {
    gpu::Buffer made = readback_batch_ ? readback_batch_->take(bytes, gpu::kMapRead | gpu::kCopyDst) : gpu::Buffer();
    b = made.valid() ? std::move(made) : ctx_.create_buffer(bytes, gpu::kMapRead | gpu::kCopyDst, ti.name + " readback");
  }
  return b;
}

void Graph::set_timing(gpu::Timing timing) {
  if (timing == gpu::Timing::PerDispatch) {
    throw Error("Graph::set_timing: per-dispatch timing is run_profiled(), not a mode of run()");
  }
  if (timing != gpu::Timing::None && !ctx_.features().timestamp_query) {
    throw Error("GPU timing was requested but this adapter does not offer the timestamp-query feature");
  }
  timing_ = timing;
}

void Graph::run(std::span<const HostIn> inputs, std::span<const HostOut> outputs) {
  run(inputs, outputs, {}, {}, true);
}

void Graph::run(std::span<const HostIn> inputs, std::span<const HostOut> outputs, std::span<const DeviceIn> device_in,
                std::span<const DeviceOut> device_out, bool wait) {
  if (!pending_.empty()) {
    throw Error(fmt::format("Graph::run: {} submitted run(s) not waited for; wait() for them first", pending_.size()));
  }
  std::vector<TensorRef> refs;
  refs.reserve(outputs.size());
  for (const HostOut& o : outputs) {
    const TensorInfo& ti = info(o.tensor);
    if (o.bytes != ti.nbytes()) {
      throw Error(fmt::format("reading {} bytes from tensor '{}' of {} bytes", o.bytes, ti.name, ti.nbytes()));
    }
    refs.push_back(o.tensor);
  }
  // A run not waited for (a generation step) follows other work on the
  // GPU: one command buffer, no parts to overlap with an idle GPU.
  submit_impl(inputs, refs, device_in, device_out, wait, !wait);
  if (!wait && pending_.back()->staging.empty() && timing_ == gpu::Timing::None) {
    // Nothing to read: the queue orders what comes next after this work.
    const Pending& p = *pending_.back();
    last_run_.upload_us = p.upload_us;
    last_run_.encode_us = p.encode_us;
    last_run_.submit_us = p.submit_us;
    last_run_.ahead_us = p.ahead_us;
    last_run_.from_ahead = p.from_ahead;
    last_run_.wait_us = 0;
    last_run_.readback_us = 0;
    last_run_.gpu_ms = -1;
    last_run_.dispatches = nodes_.size();
    pending_.pop_back();
    return;
  }
  this->wait(outputs);
}

void Graph::submit(std::span<const HostIn> inputs, std::span<const TensorRef> outputs,
                   std::span<const DeviceIn> device_in, std::span<const DeviceOut> device_out) {
  submit_impl(inputs, outputs, device_in, device_out, true, false);
}

std::string Graph::failed_check(const uint32_t* flags) const {
  for (size_t k = 0; k < checks_.size(); ++k) {
    if (flags[2 * k] == 0) continue;
    std::string failed = checks_[k];  // the value goes where `what` (the end) says {}
    if (size_t pos = failed.rfind("{}"); pos != std::string::npos) {
      failed.replace(pos, 2, std::to_string(int32_t(flags[2 * k + 1])));
    }
    return failed;
  }
  return {};
}

const gpu::Buffer* Graph::record_deferred(gpu::Recorder& rec) {
  if (!deferred_checks_) return nullptr;
  if (!pending_.empty()) throw Error("Graph: wait() for the submitted runs before reading deferred checks");
  rec.copy(check_flags_, 0, check_staging_[0], 0, uint64_t(checks_.size()) * 8);
  return &check_staging_[0];
}

std::string Graph::read_deferred() {
  if (!deferred_checks_) return {};
  const uint64_t bytes = uint64_t(checks_.size()) * 8;
  std::vector<uint32_t> flags(checks_.size() * 2);
  std::memcpy(flags.data(), ctx_.mapped(check_staging_[0], bytes), bytes);
  ctx_.unmap(check_staging_[0]);
  deferred_checks_ = false;  // the next run zeroes the flags
  return failed_check(flags.data());
}

void Graph::check_deferred() {
  gpu::Recorder rec(ctx_);
  const gpu::Buffer* staging = record_deferred(rec);
  if (!staging) return;
  rec.submit();
  ctx_.map_for_read({staging});
  rec.finish_completed();
  if (std::string failed = read_deferred(); !failed.empty()) throw Error(failed);
}

namespace {
// WGNN_SUBMIT_PARTS=0: one command buffer for every run.
bool submit_in_parts(const gpu::Context& ctx) { return !ctx.settings().is("WGNN_SUBMIT_PARTS", "0"); }
// WGNN_ENCODE_AHEAD=0: each run encodes its own dispatches (read at every
// run, for A/B and tests).
bool encode_ahead(const gpu::Context& ctx) {
  const char* e = ctx.settings().get("WGNN_ENCODE_AHEAD");
  if (!e || !*e) return true;
  const std::string_view v(e);
  if (v != "0" && v != "1") throw Error(fmt::format("WGNN_ENCODE_AHEAD='{}': expected 0 or 1", e));
  return v == "1";
}
}  // namespace

// Where a run's parts end: 16, 32, 64, ... dispatches, the last part taking
// the rest once it is under one and a half of the next.
// WGNN_SUBMIT_FIRST=N: N dispatches in the first part (tuning).
std::vector<size_t> Graph::part_ends() const {
  const size_t first_part = [&] {
    const char* e = ctx_.settings().get("WGNN_SUBMIT_FIRST");
    if (!e || !*e) return size_t(kFirstSubmitPart);
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end || v < 1 || v > 4096)
      throw Error(fmt::format("WGNN_SUBMIT_FIRST='{}': expected the dispatches of the first part (1 to 4096)", e));
    return size_t(v);
  }();
  std::vector<size_t> ends;
  size_t at = 0;
  for (size_t part = first_part; encoded_.size() - at > part + part / 2; part *= 2) ends.push_back(at += part);
  ends.push_back(encoded_.size());
  return ends;
}

void Graph::submit_impl(std::span<const HostIn> inputs, std::span<const TensorRef> outputs,
                        std::span<const DeviceIn> device_in, std::span<const DeviceOut> device_out, bool split,
                        bool defer_checks) {
  ensure_prepared();
  if (pending_.size() >= kMaxInFlight) {
    throw Error(fmt::format("Graph::submit: {} runs are in flight already (at most {}); wait() for one first",
                            pending_.size(), kMaxInFlight));
  }
  using clock = std::chrono::steady_clock;
  const auto us = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  auto p = std::make_unique<Pending>();
  // A run alone uses slot 0 (its staging buffers made once); one behind
  // another uses the slot after the other's.
  p->slot = pending_.empty() ? 0 : (pending_.back()->slot + 1) % kMaxInFlight;
  const auto t0 = clock::now();
  // Queue writes: ordered after the work submitted before (a run in flight
  // reads its own inputs first), before this run's passes.
  std::vector<std::pair<const gpu::Buffer*, int>> staged;  // copied into their tensors below
  for (const HostIn& in : inputs) {
    if (const gpu::Buffer* b = stage_input(in, p->slot)) {
      staged.emplace_back(b, in.tensor.id);
    } else {
      write(in.tensor, in.data, in.bytes);
    }
  }
  p->check_bytes = uint64_t(checks_.size()) * 8;
  if (p->check_bytes > 0 && !deferred_checks_) {  // deferred failures stay until read
    static const std::vector<uint32_t> zeros(size_t(kMaxChecks) * 2, 0u);
    ctx_.write(check_flags_, zeros.data(), p->check_bytes);
  }
  const auto t1 = clock::now();
  p->rec = std::make_unique<gpu::Recorder>(ctx_, timing_);
  gpu::Recorder& rec = *p->rec;
  for (const auto& [b, id] : staged) {
    const TensorInfo& ti = tensors_[size_t(id)];
    rec.copy(*b, 0, ti.buffer, ti.offset, (ti.gpu_bytes() + 3) / 4 * 4);
  }
  for (const DeviceIn& d : device_in) {
    const TensorInfo& ti = info(d.tensor);
    const DeviceTensor& src = *d.src;
    if (src.shape != ti.shape || src.stored != ti.dtype) {
      throw Error(fmt::format("device input for '{}': {} {} stored as {}, the graph takes {} {}", ti.name,
                              dtype_name(src.dtype), shape_str(src.shape), dtype_name(src.stored),
                              dtype_name(ti.dtype), shape_str(ti.shape)));
    }
    if (!src.valid() && ti.gpu_bytes() > 0) throw Error(fmt::format("device input for '{}' has no storage", ti.name));
    const uint64_t bytes = (ti.gpu_bytes() + 3) / 4 * 4;
    if (bytes > 0) rec.copy(src.buffer, 0, ti.buffer, ti.offset, bytes);
  }
  // Submitted in growing parts (part_ends()), so that the GPU works on the
  // first while the host encodes the next: the host's encoding then hides
  // behind the GPU's work instead of preceding it. Not for a run that is
  // not waited for (split false): the GPU is busy with the work before it,
  // and each part's submit costs host time (Dawn records the Vulkan
  // commands at submit). The parts are encoded ahead, by the run before
  // (after its submit, while the GPU worked), where there was one: this run
  // then only submits them.
  const bool in_parts = submit_in_parts(ctx_) && split;
  const bool ahead = in_parts && encode_ahead(ctx_) && timing_ == gpu::Timing::None;
  if (ahead && !ahead_.empty()) {
    if (ahead_.dispatches() != encoded_.size()) {
      throw Error(fmt::format("Graph: {} dispatches were encoded ahead for a plan of {}", ahead_.dispatches(),
                              encoded_.size()));
    }
    rec.submit_parts(ahead_);
    p->from_ahead = true;
  } else if (in_parts) {
    size_t at = 0;
    const std::vector<size_t> ends = part_ends();
    for (size_t k = 0; k + 1 < ends.size(); ++k) {
      rec.dispatch_all(encoded_.data() + at, ends[k] - at);
      rec.flush();
      at = ends[k];
    }
    rec.dispatch_all(encoded_.data() + at, encoded_.size() - at);
  } else {
    rec.dispatch_all(encoded_.data(), encoded_.size());
  }
  // A plan's first run makes its readback buffers (ISNet's 124 MB of
  // outputs: 23-40 ms of host time on the H200): submit the dispatches first,
  // so that the GPU runs them meanwhile.
  const bool new_staging = std::any_of(outputs.begin(), outputs.end(), [&](const TensorRef& o) {
    const gpu::Buffer& b = staging_[p->slot][o.id];
    return !b.valid() || b.size() < (info(o).gpu_bytes() + 3) / 4 * 4;
  });
  if (new_staging && in_parts && !p->from_ahead) rec.flush();
  for (const TensorRef& o : outputs) {
    const TensorInfo& ti = info(o);
    p->outputs.push_back(o.id);
    const gpu::Buffer& staging = staging_for(o.id, p->slot);
    if (std::find(p->staging.begin(), p->staging.end(), &staging) != p->staging.end()) continue;  // twice
    if (ti.gpu_bytes() > 0) rec.copy(ti.buffer, ti.offset, staging, 0, (ti.gpu_bytes() + 3) / 4 * 4);
    p->staging.push_back(&staging);
  }
  for (const DeviceOut& d : device_out) {
    const TensorInfo& ti = info(d.tensor);
    DeviceTensor& dst = *d.dst;
    const uint64_t bytes = (ti.gpu_bytes() + 3) / 4 * 4;
    if (d.append) {
      if (!dst.valid() || d.offset + bytes > dst.buffer.size() || d.offset % 4 != 0) {
        throw Error(fmt::format("appending '{}' ({} bytes) at byte {} of a device tensor of {} bytes", ti.name, bytes,
                                d.offset, dst.valid() ? dst.buffer.size() : 0));
      }
      if (bytes > 0) rec.copy(ti.buffer, ti.offset, dst.buffer, d.offset, bytes);
      continue;
    }
    ensure_capacity(ctx_, dst, bytes, ti.name);
    dst.shape = ti.shape;
    dst.stored = ti.dtype;
    if (bytes > 0) rec.copy(ti.buffer, ti.offset, dst.buffer, 0, bytes);
  }
  if (p->check_bytes > 0 && defer_checks) {
    deferred_checks_ = true;
  } else if (p->check_bytes > 0) {
    rec.copy(check_flags_, 0, check_staging_[p->slot], 0, p->check_bytes);
    p->staging.push_back(&check_staging_[p->slot]);
  }
  readback_batch_.reset();  // what it has left is freed (with the last holder)
  const auto t2 = clock::now();
  rec.submit();
  const auto t3 = clock::now();
  p->upload_us = us(t0, t1);
  p->encode_us = us(t1, t3);
  p->submit_us = us(t2, t3);
  if (ahead && !encoded_.empty()) {
    ahead_ = gpu::EncodedParts::encode(ctx_, encoded_.data(), part_ends());
    p->ahead_us = us(t3, clock::now());
  }
  pending_.push_back(std::move(p));
}

void Graph::wait(std::span<const HostOut> outputs) {
  if (pending_.empty()) throw Error("Graph::wait: no run was submitted");
  using clock = std::chrono::steady_clock;
  const auto us = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  // Whatever happens below, the oldest run is done with once this returns.
  std::unique_ptr<Pending> p = std::move(pending_.front());
  pending_.erase(pending_.begin());
  bool ok = outputs.size() == p->outputs.size();
  for (size_t k = 0; ok && k < outputs.size(); ++k) {
    ok = outputs[k].tensor.id == p->outputs[k] && outputs[k].bytes == info(outputs[k].tensor).nbytes();
  }
  const auto t3 = clock::now();
  if (p->staging.empty()) {
    p->rec->finish();
  } else {
    ctx_.map_for_read(p->staging);
    p->rec->finish_completed();
  }
  const auto t4 = clock::now();
  struct Unmap {  // the staging buffers are unmapped whatever is thrown
    gpu::Context& ctx;
    const std::vector<const gpu::Buffer*>& bufs;
    ~Unmap() {
      for (const gpu::Buffer* b : bufs) ctx.unmap(*b);
    }
  } unmap{ctx_, p->staging};
  if (!ok) {
    throw Error(fmt::format("Graph::wait: {} outputs given, not the {} tensors submitted (in that order, at "
                            "their sizes)",
                            outputs.size(), p->outputs.size()));
  }
  // Outputs in host layout are copied together, on several threads when
  // large (util/copy.h); the others are converted here.
  std::vector<util::CopyJob> copies;
  for (const HostOut& o : outputs) {
    const TensorInfo& ti = info(o.tensor);
    const gpu::Buffer& staging = staging_[p->slot].at(o.tensor.id);
    if (ti.gpu_bytes() > 0) {
      const void* src = ctx_.mapped(staging, ti.gpu_bytes());
      if (gpu_dtype_size(ti.dtype) == dtype_size(ti.dtype)) {
        if (std::none_of(copies.begin(), copies.end(), [&](const util::CopyJob& j) { return j.dst == o.data; })) {
          copies.push_back({o.data, src, o.bytes});
        }
      } else {
        from_gpu_layout(ti.dtype, src, size_t(ti.numel()), o.data);
      }
    }
  }
  if (ctx_.settings().is("WGNN_PARALLEL_COPY", "0")) {
    util::copy_parallel(copies, 1);
  } else {
    util::copy_parallel(copies);
  }
  std::string failed;
  if (std::find(p->staging.begin(), p->staging.end(), &check_staging_[p->slot]) != p->staging.end()) {
    std::vector<uint32_t> flags(checks_.size() * 2);
    std::memcpy(flags.data(), ctx_.mapped(check_staging_[p->slot], p->check_bytes), p->check_bytes);
    failed = failed_check(flags.data());
    deferred_checks_ = false;  // read with this run's
  }
  if (!failed.empty()) throw Error(failed);
  const auto t5 = clock::now();
  last_run_.upload_us = p->upload_us;
  last_run_.encode_us = p->encode_us;
  last_run_.submit_us = p->submit_us;
  last_run_.ahead_us = p->ahead_us;
  last_run_.from_ahead = p->from_ahead;
  last_run_.wait_us = us(t3, t4);
  last_run_.readback_us = us(t4, t5);
  last_run_.gpu_ms = timing_ == gpu::Timing::None ? -1 : p->rec->total_gpu_ms();
  last_run_.dispatches = nodes_.size();
}

std::vector<Graph::DispatchTime> Graph::run_profiled() {
  ensure_prepared();
  gpu::Recorder rec(ctx_, gpu::Timing::PerDispatch);
  std::vector<DispatchTime> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const DispatchNode& n = nodes_[i];
    if (n.grid.count() == 0) continue;  // the Recorder skips it: no pass, no span
    rec.dispatch(*n.pipeline, n.group, n.grid, n.label);
    out.push_back({i, 0});
  }
  rec.finish();
  const std::vector<gpu::TimedSpan> spans = rec.timings();
  if (spans.size() != out.size()) {
    throw Error(fmt::format("run_profiled: {} timed spans for {} dispatches", spans.size(), out.size()));
  }
  for (size_t k = 0; k < out.size(); ++k) out[k].ms = spans[k].ms;
  return out;
}

uint64_t Graph::bound_bytes(const DispatchNode& node) const {
  uint64_t bytes = 0;
  for (const Binding& b : node.bindings) {
    if (b.tensor >= 0) {
      bytes += tensors_[size_t(b.tensor)].gpu_bytes();
    } else if (b.buffer.valid() && !(b.buffer.usage() & gpu::kUniform)) {
      bytes += b.buffer.size();
    }
  }
  return bytes;
}

}  // namespace wgnn
