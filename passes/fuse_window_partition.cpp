// Window attention's windows as two ops (ops/window.cpp), where the
// exported graph moves the data with copies (timm's Swin and DaViT):
//
// partition: [p = aten.pad(x [B, H, W, C], [0, 0, 0, pw, 0, ph])]
//   v = aten.view(p or x, [B, NH, WH, NW, WW, C]);  q = aten.permute(v, [0, 1, 3, 2, 4, 5])
//   -> q = wgnn.window_partition(x, [WH, WW])      (the pad and the copy in one)
//
// reverse: v = aten.view(y, [B, NH, NW, WH, WW, C]);  q = aten.permute(v, [0, 1, 3, 2, 4, 5])
//   r = aten.view(q, [B, NH * WH, NW * WW, C])  [crops: aten.slice(r, 1 or 2, 0, H or W)]
//   [s = aten.view(crop, [B, H * W, C]);  z = aten.add(res, s) or aten.add(s, res)]
//   -> crop (or z) = wgnn.window_reverse(v, [H, W][, res])   (a copy, a crop and the add in one)
//
// Applies where the IR knows the shapes (the ONNX importer's seen shapes),
// the pad is a zero pad of H and W to whole windows, and only the chain
// reads its intermediate values.
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

const IntList kSwap{0, 1, 3, 2, 4, 5};

bool is_op(const ir::Node& n, const char* op, size_t min_args) {
  return !n.dead && n.op == op && n.args.size() >= min_args && n.args[0].is_tensor() && n.outputs.size() == 1;
}

// A zero pad of dims 1 and 2 (H, W) at their ends only: (ph, pw), or nullopt.
std::optional<std::pair<int64_t, int64_t>> end_pads(const ir::Node& pad) {
  if (!is_op(pad, "aten.pad.default", 2) || pad.args.size() > 4 || !pad.args[1].is_int_list()) return std::nullopt;
  const Value mode = arg_or(pad, 2, Value(std::string("constant")));
  if (!(mode.is_none() || (std::holds_alternative<std::string>(mode.v) && std::get<std::string>(mode.v) == "constant"))) {
    return std::nullopt;
  }
  const Value value = arg_or(pad, 3, Value(None{}));
  if (!value.is_none() && !is_number(value, 0.0)) return std::nullopt;
  const IntList& p = std::get<IntList>(pad.args[1].v);  // last dim first: C, W, H[, B]
  if ((p.size() != 6 && p.size() != 8) || p[0] != 0 || p[1] != 0 || p[2] != 0 || p[4] != 0 ||
      (p.size() == 8 && (p[6] != 0 || p[7] != 0)) || p[3] < 0 || p[5] < 0) {
    return std::nullopt;
  }
  return std::make_pair(p[5], p[3]);
}

class FuseWindowPartition final : public Pass {
 public:
  const char* name() const override { return "fuse_window_partition"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& n = g.nodes()[i];
      if (!is_op(n, "aten.permute.default", 2) || n.args.size() != 2 || !n.args[1].is_int_list() ||
          std::get<IntList>(n.args[1].v) != kSwap) {
        continue;
      }
      const TensorRef v = n.args[0].tensor();
      const int iv = g.producer(v);
      const auto vs = g.known_shape(v);
      if (iv < 0 || sole_user(g, v) != int(i) || !vs || vs->size() != 6 || !is_op(g.nodes()[size_t(iv)], "aten.view.default", 1)) {
        continue;
      }
      if (partition(g, int(i), iv, *vs) || reverse(g, int(i), *vs)) ++fused;
    }
    return fused;
  }

 private:
  // v [B, NH, WH, NW, WW, C] a view of x [B, NH * WH, NW * WW, C] or of its zero pad.
  bool partition(ir::Graph& g, int i, int iv, const Shape& vs) const {
    const ir::Node view = g.nodes()[size_t(iv)];
    const TensorRef src = view.args[0].tensor();
    const auto ss = g.known_shape(src);
    if (!ss || ss->size() != 4 || (*ss)[0] != vs[0] || (*ss)[3] != vs[5] || (*ss)[1] != vs[1] * vs[2] ||
        (*ss)[2] != vs[3] * vs[4]) {
      return false;
    }
    const int64_t wh = vs[2], ww = vs[4];
    TensorRef x = src;
    const int ip = g.producer(src);
    std::optional<ir::Node> pad;
    if (ip >= 0 && sole_user(g, src) == iv) {
      const auto pads = end_pads(g.nodes()[size_t(ip)]);
      const TensorRef t = g.nodes()[size_t(ip)].args[0].tensor();
      const auto ts = g.known_shape(t);
      // The pad fills only the last window of each row and column.
      if (pads && ts && ts->size() == 4 && (*ts)[0] == vs[0] && (*ts)[3] == vs[5] &&
          (*ts)[1] + pads->first == (*ss)[1] && (*ts)[2] + pads->second == (*ss)[2] && pads->first < wh &&
          pads->second < ww) {
        pad = g.nodes()[size_t(ip)];
        x = t;
      }
    }
    ir::Node f;
    f.op = "wgnn.window_partition.default";
    f.args = {x, IntList{wh, ww}};
    f.outputs = g.nodes()[size_t(i)].outputs;
    f.label = name();
    f.origin = g.nodes()[size_t(i)].origin;
    if (pad) f.unfused.push_back(*pad);
    f.unfused.push_back(view);
    f.unfused.push_back(g.nodes()[size_t(i)]);
    if (pad) g.nodes()[size_t(ip)].dead = true;
    g.nodes()[size_t(iv)].dead = true;
    g.replace_node(i, std::move(f));
    return true;
  }

  // v [B, NH, NW, WH, WW, C] (windows) permuted and viewed as
  // [B, NH * WH, NW * WW, C], then cropped, then added.
  bool reverse(ir::Graph& g, int i, const Shape& vs) const {
    const TensorRef v = g.nodes()[size_t(i)].args[0].tensor(), q = g.nodes()[size_t(i)].outputs[0];
    const int ir = sole_user(g, q);
    if (ir < 0 || !is_op(g.nodes()[size_t(ir)], "aten.view.default", 1)) return false;
    TensorRef cur = g.nodes()[size_t(ir)].outputs[0];
    const auto rs = g.known_shape(cur);
    int64_t h = vs[1] * vs[3], w = vs[2] * vs[4];
    if (!rs || *rs != Shape{vs[0], h, w, vs[5]}) return false;
    std::vector<int> chain{i, ir};
    for (int is = sole_user(g, cur); is >= 0; is = sole_user(g, cur)) {
      const ir::Node& s = g.nodes()[size_t(is)];
      if (!is_op(s, "aten.slice.Tensor", 4) || s.args.size() > 5 || !s.args[1].is_int()) break;
      const int64_t dim = std::get<int64_t>(s.args[1].v);
      const Value start = s.args[2], end = s.args[3], step = arg_or(s, 4, Value(int64_t(1)));
      if ((dim != 1 && dim != 2 && dim != -3 && dim != -2) || !is_number(start, 0.0) || !is_number(step, 1.0) ||
          !end.is_int()) {
        break;
      }
      const auto os = g.known_shape(s.outputs[0]);
      const bool rows = dim == 1 || dim == -3;
      const Shape want{vs[0], rows ? std::min(std::get<int64_t>(end.v), h) : h,
                       rows ? w : std::min(std::get<int64_t>(end.v), w), vs[5]};
      if (std::get<int64_t>(end.v) < 1 || !os || *os != want) break;
      h = want[1], w = want[2];
      chain.push_back(is);
      cur = s.outputs[0];
    }
    // The residual add after a view to rows.
    int iadd = -1, iview = -1;
    TensorRef res{-1};
    const int is = sole_user(g, cur);
    if (is >= 0 && is_op(g.nodes()[size_t(is)], "aten.view.default", 1)) {
      const TensorRef s = g.nodes()[size_t(is)].outputs[0];
      const auto ss = g.known_shape(s);
      const int ia = sole_user(g, s);
      if (ss && *ss == Shape{vs[0], h * w, vs[5]} && ia >= 0 && is_plain_add(g.nodes()[size_t(ia)]) &&
          g.nodes()[size_t(ia)].outputs.size() == 1) {
        const ir::Node& add = g.nodes()[size_t(ia)];
        const TensorRef a0 = add.args[0].tensor(), a1 = add.args[1].tensor();
        const TensorRef other = a0 == s ? a1 : a0;
        const auto os = g.known_shape(other), zs = g.known_shape(add.outputs[0]);
        if (other != s && (a0 == s || a1 == s) && os && *os == *ss && zs && *zs == *ss) {
          iadd = ia, iview = is, res = other;
        }
      }
    }
    ir::Node f;
    f.op = "wgnn.window_reverse.default";
    f.args = {v, IntList{h, w}};
    if (res.id >= 0) f.args.push_back(res);
    if (iview >= 0) chain.push_back(iview);
    if (iadd >= 0) chain.push_back(iadd);
    const int at = chain.back();
    f.outputs = g.nodes()[size_t(at)].outputs;
    f.label = name();
    f.origin = g.nodes()[size_t(i)].origin;
    for (int k : chain) f.unfused.push_back(g.nodes()[size_t(k)]);
    for (int k : chain) g.nodes()[size_t(k)].dead = true;
    g.replace_node(at, std::move(f));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_window_partition() { return std::make_unique<FuseWindowPartition>(); }

}  // namespace wgnn::passes
