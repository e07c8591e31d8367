// A depthwise convolution between two permutes that move the channels
// first and back (a transformer's convolutional position encoding, as
// timm's DaViT ConvPosEnc exports it):
//   p = aten.permute(x [N, L, C], [0, 2, 1]);  u = aten.view(p, [N, C, *size])
//   c = convolution(u, w [C * m, 1, *k], b, groups C)  [s = aten.add(u, c)]
//   v = aten.view(c or s, [N, C * m, L']);  y = aten.permute(v, [0, 2, 1])
// -> y = wgnn.conv_depthwise_channels_last(x, w, b, size, stride, padding,
// dilation[, residual x]), which reads x and writes y as they are: two
// copies fewer (and the add in its epilogue). The first permute may also
// take x [N, *size, C] to channels first at once (DaViT's stem, after its
// channels-last layer norm): the op then reads x through a view [N, L, C].
// Applies where the IR knows
// the shapes (the ONNX importer's seen shapes), the convolution has no
// epilogue, and only this chain reads c (s) and v.
#include <algorithm>

#include "passes/conv_args.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

bool is_swap_last_two(const ir::Node& n) {
  if (n.op != "aten.permute.default" || n.args.size() != 2 || !n.args[0].is_tensor() || !n.args[1].is_int_list()) {
    return false;
  }
  const IntList& d = std::get<IntList>(n.args[1].v);
  return d == IntList{0, 2, 1} || d == IntList{0, -1, -2} || d == IntList{0, 2, -2} || d == IntList{0, -1, 1};
}

// A permute of x [N, *size, C] to channels first: [0, r - 1, 1, ..., r - 2].
bool is_to_channels_first(const ir::Node& n) {
  if (n.op != "aten.permute.default" || n.args.size() != 2 || !n.args[0].is_tensor() || !n.args[1].is_int_list() ||
      n.outputs.size() != 1) {
    return false;
  }
  const IntList& d = std::get<IntList>(n.args[1].v);
  const int64_t r = int64_t(d.size());
  if (r < 3 || r > 5 || d[0] != 0 || (d[1] != r - 1 && d[1] != -1)) return false;
  for (int64_t k = 2; k < r; ++k)
    if (d[size_t(k)] != k - 1 && d[size_t(k)] != k - 1 - r) return false;
  return true;
}

class FuseConvChannelsLast final : public Pass {
 public:
  const char* name() const override { return "fuse_conv_channels_last"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (g.nodes()[i].dead || !is_swap_last_two(g.nodes()[i]) || g.nodes()[i].outputs.size() != 1) continue;
      const ir::Node& p2 = g.nodes()[i];
      const TensorRef v = p2.args[0].tensor();
      const int iv2 = g.producer(v);
      if (iv2 < 0 || sole_user(g, v) != int(i)) continue;
      const ir::Node& v2 = g.nodes()[size_t(iv2)];
      if (v2.op != "aten.view.default" || v2.args.empty() || !v2.args[0].is_tensor()) continue;
      // The view reads the convolution's result, or its sum with the
      // convolution's own input (timm's ConvPosEnc: x + conv(x)).
      const TensorRef top = v2.args[0].tensor();
      const int itop = g.producer(top);
      if (itop < 0 || sole_user(g, top) != iv2 || g.nodes()[size_t(itop)].outputs.size() != 1) continue;
      int ic = itop, ia = -1;
      TensorRef c = top;
      if (g.nodes()[size_t(itop)].op == "aten.add.Tensor") {
        const ir::Node& add = g.nodes()[size_t(itop)];
        if (!is_plain_add(add)) continue;
        ic = -1;
        for (size_t k = 0; k < 2 && ic < 0; ++k) {
          const TensorRef cand = add.args[k].tensor(), other = add.args[1 - k].tensor();
          const int pc = g.producer(cand);
          if (pc < 0 || sole_user(g, cand) != itop) continue;
          const auto a = as_padded(g, g.nodes()[size_t(pc)]);
          if (a && (*a)[0].is_tensor() && (*a)[0].tensor() == other) ic = pc, c = cand;
        }
        if (ic < 0) continue;
        ia = itop;
      }
      if (g.nodes()[size_t(ic)].outputs.size() != 1) continue;
      const ir::Node& conv = g.nodes()[size_t(ic)];
      const auto args = as_padded(g, conv);
      if (!args || !(*args)[0].is_tensor() || !(*args)[1].is_tensor()) continue;
      bool epilogue = false;
      for (size_t k = 12; k < args->size(); ++k) {
        epilogue = epilogue || !((*args)[k].is_none() || ((*args)[k].is_bool() && !std::get<bool>((*args)[k].v)));
      }
      if (epilogue) continue;
      const TensorRef u = (*args)[0].tensor(), w = (*args)[1].tensor();
      const int iv1 = g.producer(u);
      if (iv1 < 0) continue;
      const ir::Node& v1 = g.nodes()[size_t(iv1)];
      // u is a view of x [N, L, C] permuted to [N, C, L], or (`spatial`)
      // x [N, *size, C] permuted to channels first (DaViT's stem: its layer
      // norm's result), which the fused op reads through a view as [N, L, C].
      const bool spatial = is_to_channels_first(v1);
      if (!spatial && (v1.op != "aten.view.default" || v1.args.empty() || !v1.args[0].is_tensor())) continue;
      const TensorRef p = spatial ? u : v1.args[0].tensor();
      const int ip1 = spatial ? iv1 : g.producer(p);
      if (ip1 < 0 || (!spatial && !is_swap_last_two(g.nodes()[size_t(ip1)]))) continue;
      const ir::Node& p1 = g.nodes()[size_t(ip1)];
      const TensorRef x = p1.args[0].tensor();
      // Shapes: x [N, L, C] (or [N, *size, C]), u [N, C, *size] with
      // L = prod(size), w [Co, 1, *k], c [N, Co, *out], v [N, Co, L'],
      // y [N, L', Co].
      const auto x_known = g.known_shape(x), us = g.known_shape(u), ws = g.known_shape(w), cs = g.known_shape(c),
                 vs = g.known_shape(v), ys = g.known_shape(p2.outputs[0]);
      if (!x_known || !us || !ws || !cs || !vs || !ys || us->size() < 3 || us->size() > 5 ||
          ws->size() != us->size() || cs->size() != us->size() || vs->size() != 3) {
        continue;
      }
      std::optional<Shape> xs = x_known;
      if (spatial) {
        if (x_known->size() != us->size()) continue;
        int64_t l = 1;
        for (size_t k = 1; k + 1 < x_known->size(); ++k) l *= (*x_known)[k];
        xs = Shape{(*x_known)[0], l, x_known->back()};
      }
      if (xs->size() != 3) continue;
      const int64_t n = (*xs)[0], l = (*xs)[1], ch = (*xs)[2], co = (*ws)[0];
      const IntList size(us->begin() + 2, us->end());
      int64_t positions = 1, out_positions = 1;
      for (int64_t s : size) positions *= s;
      for (size_t k = 2; k < cs->size(); ++k) out_positions *= (*cs)[k];
      const Value& groups = (*args)[8];
      if ((*us)[0] != n || (*us)[1] != ch || positions != l || (*ws)[1] != 1 || !groups.is_int() ||
          std::get<int64_t>(groups.v) != ch || co % ch != 0 || *vs != Shape{n, co, out_positions} ||
          *ys != Shape{n, out_positions, co} || (ia >= 0 && *ys != *xs)) {
        continue;
      }
      // The first permute and view go when only this chain reads them.
      bool drop_v1 = !g.is_output(u);
      for (int k : g.users(u)) drop_v1 = drop_v1 && (k == ic || k == ia);
      const bool drop_p1 = !spatial && drop_v1 && sole_user(g, p) == iv1;
      // The spatial form reads x through a new view [N, L, C].
      TensorRef xr = x;
      if (spatial) {
        xr = g.new_result();
        g.set_seen_shape(xr, *xs);
      }
      ir::Node f;
      f.op = "wgnn.conv_depthwise_channels_last.default";
      f.args = {xr, w, (*args)[2], size, (*args)[3], (*args)[4], (*args)[5]};
      if (ia >= 0) f.args.push_back(xr);  // the residual: the convolution's input, channels last
      f.outputs = p2.outputs;
      f.label = conv.label.empty() ? name() : conv.label;
      f.origin = conv.origin;
      if (drop_p1) f.unfused.push_back(p1);
      if (drop_v1) f.unfused.push_back(v1);
      f.unfused.push_back(conv);
      if (ia >= 0) f.unfused.push_back(g.nodes()[size_t(ia)]);
      f.unfused.insert(f.unfused.end(), {v2, p2});
      if (drop_p1) g.nodes()[size_t(ip1)].dead = true;
      if (drop_v1) g.nodes()[size_t(iv1)].dead = true;
      if (ia >= 0) g.nodes()[size_t(ia)].dead = true;
      g.nodes()[size_t(ic)].dead = true;
      g.nodes()[size_t(iv2)].dead = true;
      g.replace_node(int(i), std::move(f));
      if (spatial) {
        ir::Node view;
        view.op = "aten.view.default";
        view.args = {x, IntList(xs->begin(), xs->end())};
        view.outputs = {xr};
        view.label = name();
        view.origin = conv.origin;
        g.insert_node(int(i), std::move(view));
        ++i;
      }
      ++fused;
    }
    return fused;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_conv_channels_last() { return std::make_unique<FuseConvChannelsLast>(); }

}  // namespace wgnn::passes
