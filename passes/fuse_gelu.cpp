// GELU as exporters write it, in ATen ops -> one aten.gelu.default:
//   x * 0.5 * (1 + erf(x / sqrt(2)))      (or x * (1 / sqrt(2)) inside erf)
//   0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
// with x^3 as pow(x, 3) or x * (x * x), the products and sums in any operand
// order, and the final products as (t * x) * 0.5, (t * 0.5) * x or
// t * (x * 0.5). Every value inside the chain is read by the next node
// alone; the constants are float scalars within 1e-5 of their value (1e-3
// for float16 ones; the model's values, before a plan's conversion) of a
// rank no larger than x's. fuse_matmul_activation may then move the GELU
// into a product's epilogue.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "passes/passes.h"

namespace wgnn::passes {
namespace {

struct Chain {
  TensorRef x{-1};
  std::vector<int> nodes;
};

class Matcher {
 public:
  explicit Matcher(const ir::Graph& g) : g_(g) {}

  // Node i is `op` with two tensor arguments (add: alpha 1 or none).
  bool binary(int i, const char* op) const {
    if (i < 0) return false;
    const ir::Node& n = g_.nodes()[size_t(i)];
    if (n.dead || n.op != op || n.outputs.size() != 1 || n.args.size() < 2 || !n.args[0].is_tensor() ||
        !n.args[1].is_tensor()) {
      return false;
    }
    if (n.args.size() == 2) return true;
    if (n.args.size() != 3 || std::string(op) != "aten.add.Tensor") return false;
    return is_number(n.args[2], 1.0);
  }
  bool unary(int i, const char* op) const {
    if (i < 0) return false;
    const ir::Node& n = g_.nodes()[size_t(i)];
    return !n.dead && n.op == op && n.outputs.size() == 1 && n.args.size() == 1 && n.args[0].is_tensor();
  }
  TensorRef arg(int i, size_t k) const { return g_.nodes()[size_t(i)].args[k].tensor(); }
  TensorRef out(int i) const { return g_.nodes()[size_t(i)].outputs[0]; }
  // The other argument of binary node i, or -1 when v is not one of them.
  TensorRef other(int i, TensorRef v) const {
    if (arg(i, 0) == v) return arg(i, 1);
    if (arg(i, 1) == v) return arg(i, 0);
    return TensorRef{-1};
  }
  int producer(TensorRef v) const { return v.id < 0 ? -1 : g_.producer(v); }
  // The node that alone reads v (once), or -1.
  int next(TensorRef v) const { return sole_user(g_, v); }
  bool is_constant(TensorRef v) const { return v.id >= 0 && g_.is_constant(v); }
  // A constant float scalar near `want`; rank checked against x once known.
  void want(TensorRef k, double v) { constants_.emplace_back(k, v); }
  bool constants_ok(TensorRef x) const {
    const std::optional<Shape> xs = g_.known_shape(x);
    for (const auto& [k, want] : constants_) {
      const std::optional<double> v = scalar_value(g_, k);
      const HostTensor* t = g_.model_values(k);
      if (!v || t->shape.size() > (xs ? xs->size() : 0)) return false;
      const double tol = t->dtype == DType::F16 ? 1e-3 : 1e-5;
      if (!(std::abs(*v - want) <= tol * std::abs(want))) return false;
    }
    return true;
  }

 private:
  const ir::Graph& g_;
  std::vector<std::pair<TensorRef, double>> constants_;
};

// After t = 1 + erf(..) (or tanh): t * x * 0.5 in one of its three forms.
bool tail(Matcher& m, TensorRef t, TensorRef x, Chain& c) {
  const int m1 = m.next(t);
  if (!m.binary(m1, "aten.mul.Tensor")) return false;
  const TensorRef o = m.other(m1, t);
  c.nodes.push_back(m1);
  if (o == x || m.is_constant(o)) {  // (t * x) * 0.5 or (t * 0.5) * x
    const int m2 = m.next(m.out(m1));
    if (!m.binary(m2, "aten.mul.Tensor")) return false;
    const TensorRef o2 = m.other(m2, m.out(m1));
    if (o == x) {
      if (!m.is_constant(o2)) return false;
      m.want(o2, 0.5);
    } else {
      if (o2 != x) return false;
      m.want(o, 0.5);
    }
    c.nodes.push_back(m2);
    return true;
  }
  // t * (x * 0.5)
  if (o.id < 0 || m.next(o) != m1) return false;
  const int h = m.producer(o);
  if (!m.binary(h, "aten.mul.Tensor")) return false;
  const TensorRef k = m.other(h, x);
  if (k.id < 0 || !m.is_constant(k)) return false;
  m.want(k, 0.5);
  c.nodes.push_back(h);
  return true;
}

class FuseGelu final : public Pass {
 public:
  const char* name() const override { return "fuse_gelu"; }
  size_t apply(ir::Graph& g, const PassContext&) const override {
    size_t fused = 0;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const bool erf = g.nodes()[i].op == "aten.erf.default", tanh = g.nodes()[i].op == "aten.tanh.default";
      if (!erf && !tanh) continue;
      Matcher m(g);
      Chain c;
      if (!(erf ? match_erf(g, m, int(i), c) : match_tanh(g, m, int(i), c))) continue;
      // 1 + erf(..) / 1 + tanh(..), then the tail.
      const int a = m.next(m.out(int(i)));
      if (!m.binary(a, "aten.add.Tensor")) continue;
      const TensorRef one = m.other(a, m.out(int(i)));
      if (!m.is_constant(one)) continue;
      m.want(one, 1.0);
      c.nodes.push_back(int(i));
      c.nodes.push_back(a);
      if (!tail(m, m.out(a), c.x, c) || m.is_constant(c.x) || !m.constants_ok(c.x)) continue;
      std::sort(c.nodes.begin(), c.nodes.end());
      if (std::adjacent_find(c.nodes.begin(), c.nodes.end()) != c.nodes.end()) continue;
      const int last = c.nodes.back();
      ir::Node n;
      n.op = "aten.gelu.default";
      n.args = {c.x, std::string(erf ? "none" : "tanh")};
      n.outputs = g.nodes()[size_t(last)].outputs;
      n.label = g.nodes()[size_t(last)].label.empty() ? name() : g.nodes()[size_t(last)].label;
      n.origin = g.nodes()[size_t(last)].origin;
      for (int k : c.nodes) n.unfused.push_back(g.nodes()[size_t(k)]);
      for (int k : c.nodes) g.nodes()[size_t(k)].dead = true;
      g.replace_node(last, std::move(n));
      g.nodes()[size_t(last)].dead = false;
      ++fused;
    }
    return fused;
  }

 private:
  // The producer of v among the live nodes, if it is `op` (binary).
  static int producer_if(const ir::Graph& g, const Matcher& m, TensorRef v, const char* op) {
    const int p = g.producer(v);
    return m.binary(p, op) ? p : -1;
  }

  // x / sqrt(2) or x * (1 / sqrt(2)) into erf (node e).
  static bool match_erf(const ir::Graph& g, Matcher& m, int e, Chain& c) {
    if (!m.unary(e, "aten.erf.default")) return false;
    const TensorRef in = m.arg(e, 0);
    if (m.next(in) != e) return false;
    if (const int p = producer_if(g, m, in, "aten.div.Tensor"); p >= 0) {
      if (!m.is_constant(m.arg(p, 1))) return false;
      c.x = m.arg(p, 0);
      m.want(m.arg(p, 1), std::sqrt(2.0));
      c.nodes.push_back(p);
      return true;
    }
    if (const int p = producer_if(g, m, in, "aten.mul.Tensor"); p >= 0) {
      const bool k0 = m.is_constant(m.arg(p, 0)), k1 = m.is_constant(m.arg(p, 1));
      if (k0 == k1) return false;
      c.x = m.arg(p, k1 ? 0 : 1);
      m.want(m.arg(p, k1 ? 1 : 0), std::sqrt(0.5));
      c.nodes.push_back(p);
      return true;
    }
    return false;
  }

  // sqrt(2 / pi) * (x + 0.044715 * x^3) into tanh (node th).
  static bool match_tanh(const ir::Graph& g, Matcher& m, int th, Chain& c) {
    if (!m.unary(th, "aten.tanh.default")) return false;
    const TensorRef in = m.arg(th, 0);
    if (m.next(in) != th) return false;
    const int p = producer_if(g, m, in, "aten.mul.Tensor");
    if (p < 0) return false;
    const bool b0 = m.is_constant(m.arg(p, 0)), b1 = m.is_constant(m.arg(p, 1));
    if (b0 == b1) return false;
    const TensorRef s = m.arg(p, b1 ? 0 : 1), beta = m.arg(p, b1 ? 1 : 0);
    if (m.next(s) != p) return false;
    const int a = producer_if(g, m, s, "aten.add.Tensor");
    if (a < 0) return false;
    for (int choice = 0; choice < 2; ++choice) {
      const TensorRef x = m.arg(a, size_t(choice)), k = m.arg(a, size_t(1 - choice));
      if (m.next(k) != a) continue;
      const int km = producer_if(g, m, k, "aten.mul.Tensor");
      if (km < 0) continue;
      const bool c0 = m.is_constant(m.arg(km, 0)), c1 = m.is_constant(m.arg(km, 1));
      if (c0 == c1) continue;
      const TensorRef cube = m.arg(km, c1 ? 0 : 1), kappa = m.arg(km, c1 ? 1 : 0);
      if (m.next(cube) != km) continue;
      std::vector<int> nodes = {km, a, p};
      const int cp = g.producer(cube);
      if (m.binary(cp, "aten.pow.Tensor_Tensor")) {
        if (m.arg(cp, 0) != x || !m.is_constant(m.arg(cp, 1))) continue;
        m.want(m.arg(cp, 1), 3.0);
        nodes.push_back(cp);
      } else if (m.binary(cp, "aten.mul.Tensor")) {
        const TensorRef sq = m.other(cp, x);
        if (sq.id < 0 || sq == x || m.next(sq) != cp) continue;
        const int sp = g.producer(sq);
        if (!m.binary(sp, "aten.mul.Tensor") || m.arg(sp, 0) != x || m.arg(sp, 1) != x) continue;
        nodes.push_back(cp);
        nodes.push_back(sp);
      } else {
        continue;
      }
      m.want(kappa, 0.044715);
      m.want(beta, std::sqrt(2.0 / std::numbers::pi));
      c.x = x;
      c.nodes = nodes;
      return true;
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> fuse_gelu() { return std::make_unique<FuseGelu>(); }

}  // namespace wgnn::passes
