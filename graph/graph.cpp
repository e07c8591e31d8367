#include "graph/graph.h"

#include <fmt/format.h>

namespace wgnn {

Graph::Graph(gpu::Context& ctx) : ctx_(ctx) {}

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
  write(t, data, info(t).nbytes());
  return t;
}

TensorRef Graph::add_view(TensorRef base, const Shape& shape) {
  const TensorInfo& b = info(base);
  if (numel(shape) != b.numel()) {
    throw Error(fmt::format("view of '{}' {} as {}: element counts differ", b.name, shape_str(b.shape),
                            shape_str(shape)));
  }
  TensorRef v = add_tensor(shape, b.dtype, TensorKind::Intermediate, info(base).name + ".view");
  int root = base.id;
  while (tensors_[size_t(root)].view_of >= 0) root = tensors_[size_t(root)].view_of;
  tensors_[size_t(v.id)].view_of = root;
  return v;
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
                         std::string op, std::string label) {
  nodes_.push_back(DispatchNode{&pipeline, std::move(bindings), grid, std::move(op),
                                label.empty() ? pipeline.name() : std::move(label), {}});
  prepared_ = false;
}

void Graph::add_init_dispatch(const gpu::Pipeline& pipeline, std::vector<Binding> bindings, gpu::Grid grid,
                              std::string op, std::string label) {
  init_nodes_.push_back(DispatchNode{&pipeline, std::move(bindings), grid, std::move(op),
                                     label.empty() ? pipeline.name() : std::move(label), {}});
  prepared_ = false;
}

gpu::Buffer Graph::uniform(const void* data, size_t bytes) {
  owned_.push_back(ctx_.uniform(data, bytes));
  return owned_.back();
}

gpu::Buffer Graph::scratch(uint64_t bytes, std::string label) {
  owned_.push_back(ctx_.create_buffer(bytes, gpu::kStorageUsage, label));
  return owned_.back();
}

void Graph::ensure_storage(int id) {
  TensorInfo& t = tensors_[size_t(id)];
  if (t.buffer.valid()) return;
  if (t.view_of >= 0) {
    ensure_storage(t.view_of);
    const TensorInfo& root = tensors_[size_t(t.view_of)];
    t.buffer = root.buffer;
    t.offset = root.offset;
    return;
  }
  const uint64_t limit = ctx_.limits().max_storage_buffer_binding_size;
  if (t.gpu_bytes() > limit) {
    throw Error(fmt::format("tensor '{}' {} {} needs {} bytes, over this device's maxStorageBufferBindingSize of {} "
                            "bytes; ops bind whole tensors, so it cannot run on this device",
                            t.name, dtype_name(t.dtype), shape_str(t.shape), t.gpu_bytes(), limit));
  }
  t.buffer = ctx_.create_buffer(t.gpu_bytes(), gpu::kStorageUsage, t.name);
  t.offset = 0;
}

gpu::BufferBinding Graph::resolve(const Binding& b) {
  if (b.tensor >= 0) {
    const TensorInfo& t = tensors_[size_t(b.tensor)];
    // Bind the tensor's bytes rounded up to 16 (vec4 views of the tail).
    const uint64_t size = std::min<uint64_t>((std::max<uint64_t>(t.gpu_bytes(), 4) + 15) / 16 * 16,
                                             t.buffer.size() - t.offset);
    return gpu::BufferBinding{&t.buffer, t.offset, size};
  }
  return gpu::BufferBinding{&b.buffer, 0, b.buffer.size()};
}

void Graph::prepare() {
  for (size_t i = 0; i < tensors_.size(); ++i) ensure_storage(int(i));
  auto build = [&](std::vector<DispatchNode>& nodes) {
    for (auto& n : nodes) {
      if (n.group.handle()) continue;
      std::vector<gpu::BufferBinding> bs;
      bs.reserve(n.bindings.size());
      for (const auto& b : n.bindings) bs.push_back(resolve(b));
      n.group = ctx_.bind_group(*n.pipeline, bs, n.op);
    }
  };
  build(nodes_);
  build(init_nodes_);
  if (!init_nodes_.empty()) {
    gpu::Recorder rec(ctx_);
    for (auto& n : init_nodes_) rec.dispatch(*n.pipeline, n.group, n.grid, n.label);
    rec.finish();
    init_nodes_.clear();
  }
  prepared_ = true;
}

void Graph::write(TensorRef t, const void* data, size_t bytes) {
  ensure_storage(t.id);
  const TensorInfo& ti = info(t);
  if (bytes != ti.nbytes()) {
    throw Error(fmt::format("writing {} bytes into tensor '{}' {} {} of {} bytes", bytes, ti.name,
                            dtype_name(ti.dtype), shape_str(ti.shape), ti.nbytes()));
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

void Graph::record(gpu::Recorder& rec) {
  for (const auto& n : nodes_) rec.dispatch(*n.pipeline, n.group, n.grid, n.label);
}

void Graph::run() {
  if (!prepared_) prepare();
  gpu::Recorder rec(ctx_);
  record(rec);
  rec.finish();
}

std::vector<gpu::TimedSpan> Graph::run_profiled() {
  if (!prepared_) prepare();
  gpu::Recorder rec(ctx_, gpu::Timing::PerDispatch);
  record(rec);
  rec.finish();
  return rec.timings();
}

}  // namespace wgnn
