#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <cstdlib>
#include <cstring>

#include "gpu/error.h"
#include "graph/half.h"
#include "passes/passes.h"

namespace wgnn::passes {

size_t Report::count(const std::string& pass) const {
  size_t n = 0;
  for (const auto& [p, k] : applied) n += p == pass ? k : 0;
  return n;
}

std::string Report::summary() const {
  std::string s;
  for (const auto& [p, k] : applied) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", p, k);
  return s.empty() ? "no rewrites" : s;
}

int sole_user(const ir::Graph& g, TensorRef v) {
  if (g.is_output(v)) return -1;
  const std::vector<int> u = g.users(v);
  return u.size() == 1 ? u[0] : -1;
}

std::optional<double> scalar_value(const ir::Graph& g, TensorRef v) {
  const HostTensor* t = v.id >= 0 && g.is_constant(v) ? g.model_values(v) : nullptr;
  if (!t || t->numel() != 1) return std::nullopt;
  if (t->dtype == DType::F32) return double(t->as<float>()[0]);
  if (t->dtype == DType::F16) return double(half_to_float(*reinterpret_cast<const uint16_t*>(t->data.data())));
  return std::nullopt;
}

// A constant's float32 values as the model gives them, where it is stored
// as float32, or as float16 made from them (float16 mode's weights: the
// joined weights are then converted as the importer converts, saturating,
// element by element, so they hold the three constants' values exactly).
// A constant folded on the host in float16 mode holds float16 values (an
// Identity of a weight the exporter shares, such as the zero biases of
// an untrained model): those widened to float32, which the conversion back
// returns exactly.
std::shared_ptr<const HostTensor> f32_values(const ir::Graph& g, TensorRef v) {
  if (!g.is_constant(v)) return nullptr;
  const DType stored = g.value(v).dtype;
  if (stored != DType::F32 && stored != DType::F16) return nullptr;
  const HostTensor* t = g.model_values(v);
  if (!t) return nullptr;
  if (t->dtype == DType::F32) return std::shared_ptr<const HostTensor>(std::shared_ptr<void>(), t);  // not owned
  if (t->dtype != DType::F16 || stored != DType::F16) return nullptr;
  auto wide = std::make_shared<HostTensor>(DType::F32, t->shape);
  for (int64_t i = 0; i < t->numel(); ++i) wide->as<float>()[i] = float(t->get_double(size_t(i)));
  return wide;
}

// The strides of a strided view of shape `size`, `stride` read as shape
// `to` without moving an element, or none where that needs a copy. Runs
// of dims that are contiguous with each other are matched, from the last,
// by runs of the new dims with the same number of elements.
std::optional<Shape> view_strides(const Shape& size, const Shape& stride, const Shape& to) {
  int64_t n = 1;
  for (int64_t v : size) n *= v;
  if (n == 0 || size.empty()) return std::nullopt;
  Shape out(to.size(), 0);
  int64_t to_d = int64_t(to.size()) - 1;
  int64_t base = stride.back(), run = 1, covered = 1;
  for (int64_t d = int64_t(size.size()) - 1; d >= 0; --d) {
    run *= size[size_t(d)];
    const bool run_ends = d == 0 || (size[size_t(d - 1)] != 1 && stride[size_t(d - 1)] != run * base);
    if (!run_ends) continue;
    while (to_d >= 0 && (covered < run || to[size_t(to_d)] == 1)) {
      out[size_t(to_d)] = covered * base;
      covered *= to[size_t(to_d)];
      --to_d;
    }
    if (covered != run) return std::nullopt;
    if (d > 0) base = stride[size_t(d - 1)], run = 1, covered = 1;
  }
  if (to_d != -1) return std::nullopt;
  return out;
}

std::string memo_of(const ir::Graph& g, const Value& v) {
  if (v.is_none()) return "none";
  return v.is_tensor() && g.is_constant(v.tensor()) ? g.value(v.tensor()).memo : std::string();
}

Value arg_or(const ir::Node& n, size_t i, const Value& def) { return i < n.args.size() ? n.args[i] : def; }

const ir::Node* live_node(const ir::Graph& g, int i, const char* op) {
  if (i < 0) return nullptr;
  const ir::Node& n = g.nodes()[size_t(i)];
  if (n.dead || n.op != op || n.outputs.size() != 1 || !n.unfused.empty()) return nullptr;
  return &n;
}

bool is_plain_add(const ir::Node& n) {
  if (n.op != "aten.add.Tensor" || n.args.size() < 2 || n.args.size() > 3 || !n.args[0].is_tensor() ||
      !n.args[1].is_tensor()) {
    return false;
  }
  return is_number(arg_or(n, 2, Value(int64_t(1))), 1.0);
}

bool is_number(const Value& v, double x) {
  return (v.is_int() && double(std::get<int64_t>(v.v)) == x) || (v.is_double() && std::get<double>(v.v) == x);
}

Report optimize(ir::Graph& g, const OptimizeOptions& options) {
  const bool fusion = options.fusion;
  // Every pass in order; which of them run follows.
  std::vector<std::unique_ptr<Pass>> all;
  all.push_back(fuse_matmul_dequant());  // before fold_dequantize folds the weights it reads as stored
  all.push_back(fold_dequantize());
  all.push_back(fold_constants());
  all.push_back(cancel_permutes());
  all.push_back(fuse_conv_channels_last());  // before the conv passes give the conv an epilogue
  all.push_back(fuse_window_partition());    // before fuse_add_layer_norm takes the residual add
  all.push_back(fuse_gelu());                // before the products take it into their epilogue
  all.push_back(fuse_rms_norm());            // before fuse_add_layer_norm takes the residual add
  all.push_back(fuse_rotary());
  all.push_back(fuse_silu());                // before the products take it into their epilogue
  all.push_back(fuse_silu_mul());            // SwiGLU's gate times up, before the gate product takes the SiLU
  all.push_back(sink_views());               // torch.export's views out of the products' way
  // Where nothing reads them, the views on attention's q, k and v go
  // before it looks for readers (a Shape may have read them).
  all.push_back(dead_code());
  all.push_back(fuse_attention());           // before fuse_matmul_add takes its products
  all.push_back(fuse_attention_scale());     // before fuse_matmul_add takes a factor into one product's alpha
  all.push_back(fuse_matmul_add());
  all.push_back(fuse_qkv_projection());      // the products fuse_matmul_add made
  all.push_back(fuse_matmul_scale());        // before an activation joins the product
  // Batch norm first: a conv + batch norm + relu becomes one conv whose
  // epilogue applies the relu.
  all.push_back(fuse_conv_batch_norm());
  all.push_back(fuse_conv_residual());
  all.push_back(fuse_conv_activation());
  all.push_back(fuse_matmul_activation());
  all.push_back(fuse_row_products());     // a step's products of one row without an epilogue
  all.push_back(join_rotary());           // q's and k's rotary, once q and k are one product's columns
  all.push_back(fuse_matmul_silu_mul());  // SwiGLU's gate and up, once they are one product's columns
  all.push_back(fuse_norm_activation());  // the batch norms no convolution took
  all.push_back(fuse_add_layer_norm());
  all.push_back(fuse_matmul_layer_norm());  // the products whose sum a layer norm reads
  all.push_back(fuse_matmul_residual());  // the adds no layer norm took
  all.push_back(fuse_permute_add());      // the adds no product or convolution took
  // A channels-first stream of blocks that permute to channels last
  // (ConvNeXt) runs channels last; its blocks' sums then join their
  // products as residuals.
  all.push_back(channels_last_blocks());
  all.push_back(fuse_matmul_residual());
  // After every fusion: a value shared between layers would have two
  // readers where a fusion pass wants one.
  all.push_back(common_subexpressions());
  all.push_back(dead_code());
  // WGNN_DISABLE_PASSES=name,name: leave those passes out (A/B
  // measurements, narrowing down a fault), as ONNX Runtime's
  // disabled_optimizers. An unknown name is an error.
  std::vector<std::string> disabled;
  if (!options.disabled.empty()) {
    const std::string& text = options.disabled;
    for (size_t at = 0; at <= text.size();) {
      const size_t comma = std::min(text.find(',', at), text.size());
      const std::string name = text.substr(at, comma - at);
      if (std::none_of(all.begin(), all.end(), [&](const std::unique_ptr<Pass>& p) { return p->name() == name; })) {
        std::vector<std::string> known;
        for (const auto& p : all) known.push_back(p->name());
        throw Error(fmt::format("WGNN_DISABLE_PASSES='{}': '{}' is not a pass (passes: {})", text, name,
                                fmt::join(known, ", ")));
      }
      disabled.push_back(name);
      at = comma + 1;
    }
  }
  std::vector<std::unique_ptr<Pass>> list;
  for (auto& p : all) {
    const std::string name = p->name();
    const bool on = name == "dead_code" || name == "fold_dequantize" ||
                    (name == "fold_constants" ? options.context.ctx != nullptr : fusion);
    if (on && std::find(disabled.begin(), disabled.end(), name) == disabled.end()) list.push_back(std::move(p));
  }
  Report r;
  for (const auto& p : list) {
    const size_t k = p->apply(g, options.context);
    if (k) r.applied.emplace_back(p->name(), k);
  }
  g.compact();
  return r;
}

}  // namespace wgnn::passes
