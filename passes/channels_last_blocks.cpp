// Residual blocks whose stream is channels first and whose branches run
// channels last (ConvNeXt, as torchvision and timm export it): each block
// reads x [N, C, H, W] with a depthwise convolution, permutes its result
// to [N, H, W, C] for a layer norm and an MLP, and adds the MLP's result z
// back channels first:
//   c = convolution(x, w [C', 1, kh, kw], b, groups C);  p = aten.permute(c, [0, 2, 3, 1])
//   x2 = wgnn.add_permuted(x, z, [0, 3, 1, 2])      (fuse_permute_add's x + permute(z))
// -> the stream runs channels last, x' = x as [N, H, W, C]:
//   p = wgnn.conv_depthwise_channels_last(x', w, b, [H, W], ...)
//   x2' = aten.add(x', z)                              (then the product's residual:
//                                                       fuse_matmul_residual runs again after)
// and a permute(x, [0, 2, 3, 1]) (a downsampling layer norm's) reads x'.
// Each block loses its permute, and its add goes into the MLP's last
// product. x' is the value x was permuted from where x is such a permute
// (the stem's layer norm), x2' where x is a rewritten block's sum, else a
// new permute of x (a stage's first block, after a strided convolution).
// A sum something else reads as well (a pooling, the model's output) is
// permuted back for it.
//
// Applies where the IR knows the shapes (the ONNX importer's seen shapes)
// and every reader of x is one of the three forms above; a depthwise
// convolution with an epilogue, or whose result anything else reads, keeps
// its stream channels first.
#include <fmt/format.h>

#include <unordered_map>

#include "gpu/error.h"

#include "passes/conv_args.h"
#include "passes/passes.h"

namespace wgnn::passes {
namespace {

const IntList kToLast{0, 2, 3, 1}, kToFirst{0, 3, 1, 2};

bool is_permute(const ir::Node& n, const IntList& dims) {
  return !n.dead && n.op == "aten.permute.default" && n.args.size() == 2 && n.args[0].is_tensor() &&
         n.args[1].is_int_list() && std::get<IntList>(n.args[1].v) == dims && n.outputs.size() == 1;
}

// The convolution node's arguments as wgnn.convolution_padded's where it is
// a 2-d depthwise convolution of x [N, C, H, W] (weight [C * m, 1, kh, kw],
// groups C) with no epilogue, whose result only a permute to channels last
// reads; nullopt otherwise.
std::optional<ValueList> depthwise_of(const ir::Graph& g, const ir::Node& conv, TensorRef x, const Shape& xs) {
  if (conv.dead || conv.outputs.size() != 1) return std::nullopt;
  auto args = as_padded(g, conv);
  if (!args || !(*args)[0].is_tensor() || (*args)[0].tensor() != x || !(*args)[1].is_tensor() ||
      (*args)[1].tensor() == x || ((*args)[2].is_tensor() && (*args)[2].tensor() == x)) {
    return std::nullopt;
  }
  for (size_t k = 9; k < args->size(); ++k) {
    const Value& v = (*args)[k];
    const bool off = v.is_none() || (v.is_bool() && !std::get<bool>(v.v)) || (k == 9 && std::holds_alternative<std::string>(v.v) &&
                                                                            std::get<std::string>(v.v) == "none") ||
                     ((k == 10 || k == 11) && is_number(v, 0.0));
    if (!off) return std::nullopt;
  }
  const auto ws = g.known_shape((*args)[1].tensor());
  const Value& groups = (*args)[8];
  if (!ws || ws->size() != 4 || (*ws)[1] != 1 || (*ws)[0] % xs[1] != 0 || !groups.is_int() ||
      std::get<int64_t>(groups.v) != xs[1]) {
    return std::nullopt;
  }
  const TensorRef c = conv.outputs[0];
  const int ip = sole_user(g, c);
  if (ip < 0 || !is_permute(g.nodes()[size_t(ip)], kToLast)) return std::nullopt;
  return args;
}

bool is_residual_of(const ir::Graph& g, const ir::Node& n, TensorRef x, const Shape& xs) {
  if (n.dead || n.op != "wgnn.add_permuted.default" || n.args.size() != 3 || !n.args[0].is_tensor() ||
      n.args[0].tensor() != x || !n.args[1].is_tensor() || n.args[1].tensor() == x || !n.args[2].is_int_list() ||
      std::get<IntList>(n.args[2].v) != kToFirst || n.outputs.size() != 1) {
    return false;
  }
  const auto zs = g.known_shape(n.args[1].tensor());
  return zs && *zs == Shape{xs[0], xs[2], xs[3], xs[1]};
}

// Whether every reader of x [N, C, H, W] takes it in one of the forms the
// pass rewrites, and how many of them are depthwise convolutions.
bool stream_readers(const ir::Graph& g, TensorRef x, const Shape& xs, int& convs) {
  convs = 0;
  if (g.is_output(x)) return false;
  for (int u : g.users(x)) {
    const ir::Node& n = g.nodes()[size_t(u)];
    if (is_permute(n, kToLast)) continue;
    if (is_residual_of(g, n, x, xs)) continue;
    if (depthwise_of(g, n, x, xs)) {
      ++convs;
      continue;
    }
    return false;
  }
  return true;
}

ir::Node permute_node(TensorRef in, TensorRef out, const IntList& dims, const ir::Node& from) {
  ir::Node p;
  p.op = "aten.permute.default";
  p.args = {in, dims};
  p.outputs = {out};
  p.label = "channels_last_blocks";
  p.origin = from.origin;
  return p;
}

class ChannelsLastBlocks final : public Pass {
 public:
  const char* name() const override { return "channels_last_blocks"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t rewrites = 0;
    std::unordered_map<int64_t, TensorRef> last;  // x -> x as [N, H, W, C]
    auto shape4 = [&](TensorRef v) -> std::optional<Shape> {
      auto s = g.known_shape(v);
      if (!s || s->size() != 4) return std::nullopt;
      return s;
    };
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (g.nodes()[i].dead) continue;
      const ir::Node n = g.nodes()[i];  // a copy: the rewrites below replace it
      // A block's sum whose stream runs channels last: x2' = x' + z.
      if (n.op == "wgnn.add_permuted.default" && n.args.size() == 3 && n.args[0].is_tensor() &&
          last.count(n.args[0].tensor().id)) {
        const TensorRef x = n.args[0].tensor(), x2 = n.outputs[0];
        const auto xs = shape4(x);
        if (!xs || !is_residual_of(g, n, x, *xs)) {
          throw Error(fmt::format("channels_last_blocks: node {} reads the channels-last stream in a form the pass "
                                  "did not expect", i));
        }
        const TensorRef z = n.args[1].tensor(), x2l = g.new_result();
        g.set_seen_shape(x2l, *g.known_shape(z));
        ir::Node add;
        add.op = "aten.add.Tensor";
        add.args = {last.at(x.id), z};
        add.outputs = {x2l};
        add.label = n.label;
        add.origin = n.origin;
        g.replace_node(int(i), std::move(add));
        last[x2.id] = x2l;
        ++rewrites;
        int convs = 0;
        if (!stream_readers(g, x2, *xs, convs)) {  // others read x2 channels first: permuted back for them
          g.insert_node(int(i) + 1, permute_node(x2l, x2, kToFirst, n));
          ++i;
        }
        continue;
      }
      // A reader of the stream that wants it channels last: the stream itself.
      if (is_permute(n, kToLast) && last.count(n.args[0].tensor().id)) {
        g.replace_uses(n.outputs[0], last.at(n.args[0].tensor().id));
        g.nodes()[i].dead = true;
        ++rewrites;
        continue;
      }
      // A depthwise convolution's permuted result: the convolution channels last.
      if (is_permute(n, kToLast)) {
        const TensorRef c = n.args[0].tensor();
        const int ic = g.producer(c);
        if (ic >= 0 && !g.nodes()[size_t(ic)].args.empty() && g.nodes()[size_t(ic)].args[0].is_tensor()) {
          const TensorRef x = g.nodes()[size_t(ic)].args[0].tensor();
          const auto xs = shape4(x);
          const auto args = xs && last.count(x.id) ? depthwise_of(g, g.nodes()[size_t(ic)], x, *xs) : std::nullopt;
          if (args) {
            const ir::Node conv = g.nodes()[size_t(ic)];
            // Where a plan's shapes refuse the channels-last op: the
            // convolution channels first, between two permutes.
            const TensorRef xf = g.new_result();
            g.set_seen_shape(xf, *xs);
            ir::Node conv_first = conv;
            conv_first.args[0] = xf;
            ir::Node f;
            f.op = "wgnn.conv_depthwise_channels_last.default";
            f.args = {last.at(x.id), (*args)[1], (*args)[2], IntList{(*xs)[2], (*xs)[3]}, (*args)[3], (*args)[4],
                      (*args)[5]};
            f.outputs = n.outputs;
            f.label = conv.label.empty() ? name() : conv.label;
            f.origin = conv.origin;
            f.unfused = {permute_node(last.at(x.id), xf, kToFirst, conv), conv_first, n};
            g.nodes()[size_t(ic)].dead = true;
            g.replace_node(int(i), std::move(f));
            ++rewrites;
            continue;
          }
        }
      }
      // A stream's start: a value whose readers are all such blocks, at
      // least one of them a depthwise convolution.
      for (const TensorRef x : n.outputs) {
        const auto xs = shape4(x);
        int convs = 0;
        if (!xs || last.count(x.id) || !stream_readers(g, x, *xs, convs) || convs == 0) continue;
        if (is_permute(n, kToFirst)) {
          last[x.id] = n.args[0].tensor();  // x is a permute of the stream channels last
        } else {
          const TensorRef xl = g.new_result();
          g.set_seen_shape(xl, Shape{(*xs)[0], (*xs)[2], (*xs)[3], (*xs)[1]});
          g.insert_node(int(i) + 1, permute_node(x, xl, kToLast, n));
          last[x.id] = xl;
          ++i;
        }
        ++rewrites;
      }
    }
    return rewrites;
  }
};

}  // namespace

std::unique_ptr<Pass> channels_last_blocks() { return std::make_unique<ChannelsLastBlocks>(); }

}  // namespace wgnn::passes
