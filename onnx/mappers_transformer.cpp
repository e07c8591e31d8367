// The transformer operators of ONNX opsets 23 to 28: Attention (23, 24's
// nonpad_kv_seqlen, 25's sliding windows), RMSNormalization (23),
// RotaryEmbedding (23), Swish (24), SwiGLU (28). Each is composed of wgnn
// ops as the operator's ONNX function body defines it, so every attribute
// the standard gives is followed; what is not (a double or bfloat16
// softmax) is Unsupported.
// Internal to onnx/: added to the op table by make_mappers() (onnx/mappers.cpp).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "onnx/host_ops.h"
#include "onnx/mapper_util.h"
#include "onnx/mappers_transformer.h"
#include "onnx/node_ctx.h"
#include "ops/attention.h"
#include "ops/layout.h"

namespace wgnn::onnx_import {

TensorRef scalar(NodeCtx& c, DType d, double v) { return c.constant(host::scalar_like(d, v)); }

bool wanted(const NodeCtx& c, int k) { return k < c.node.output_size() && !c.node.output(k).empty(); }

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Attention (opsets 23 to 25), the function body of the standard:
//   scores = (Q * sqrt(scale)) (K * sqrt(scale))^T, softcap, + bias,
//   softmax (a row with every key masked gives zeros), @ V.
// Q [B, Hq, L, D] or [B, L, Hq * D]; K, V [B, Hkv, S, D(v)] or 3-D; Hq a
// multiple of Hkv (grouped queries: each K / V head serves Hq / Hkv query
// heads). past_key / past_value are concatenated before K / V (present_key
// and present_value). The bias: attn_mask (bool: True attends; float:
// added; a last dim shorter than the keys is padded with -inf), is_causal
// (query i attends key j <= i + offset) and the sliding window (opset 25:
// offset + i - left <= j <= offset + i + right), where offset is the past
// length, or nonpad_kv_seqlen[b] - L with opset 24's nonpad_kv_seqlen (keys
// from nonpad_kv_seqlen[b] on are masked).
std::vector<Slot> attention(NodeCtx& c) {
  const DType dt = c.dtype(0);
  const bool three_d = c.shape(0).size() == 3;
  if (c.shape(0).size() != 3 && c.shape(0).size() != 4) c.fail(fmt::format("Q {} must be 3-D or 4-D", shape_str(c.shape(0))));
  for (size_t i : {size_t(1), size_t(2)}) {
    if (c.shape(i).size() != c.shape(0).size()) {
      c.fail(fmt::format("Q {} and {} {} must have the same rank", shape_str(c.shape(0)), i == 1 ? "K" : "V",
                         shape_str(c.shape(i))));
    }
    if (c.dtype(i) != dt) c.fail("Q, K and V must have one dtype");
  }
  TensorRef q = c.tensor(0), k = c.tensor(1), v = c.tensor(2);
  if (three_d) {
    if (!c.has_attr("q_num_heads") || !c.has_attr("kv_num_heads")) {
      c.fail("3-D Q, K and V need the attributes q_num_heads and kv_num_heads");
    }
    q = heads_first(c, q, c.attr_int("q_num_heads", 0), "Q");
    k = heads_first(c, k, c.attr_int("kv_num_heads", 0), "K");
    v = heads_first(c, v, c.attr_int("kv_num_heads", 0), "V");
  }
  const bool has_past = c.has(4) || c.has(5);
  if (has_past && !(c.has(4) && c.has(5))) c.fail("past_key and past_value must be given together");
  const bool has_nonpad = c.opset >= 24 && c.has(6);
  if (has_nonpad && has_past) c.fail("nonpad_kv_seqlen cannot be used with past_key and past_value");
  int64_t past = 0;
  if (has_past) {
    past = c.shape(4)[2];
    k = c.call("aten.cat.default", {ValueList{c.tensor(4), k}, int64_t(2)}).tensor();
    v = c.call("aten.cat.default", {ValueList{c.tensor(5), v}, int64_t(2)}).tensor();
  }
  const Shape qs = c.g.info(q).shape, ks = c.g.info(k).shape, vs = c.g.info(v).shape;
  const int64_t B = qs[0], Hq = qs[1], L = qs[2], D = qs[3], Hkv = ks[1], S = ks[2];
  if (ks[0] != B || vs[0] != B || vs[1] != Hkv || vs[2] != S || ks[3] != D) {
    c.fail(fmt::format("Q {}, K {} and V {} (as [batch, heads, sequence, head size]) do not agree", shape_str(qs),
                       shape_str(ks), shape_str(vs)));
  }
  if (Hkv <= 0 || Hq % Hkv != 0) c.fail(fmt::format("q_num_heads {} must be a multiple of kv_num_heads {}", Hq, Hkv));

  const int64_t sp = c.attr_int("softmax_precision", 0);
  // The softmax runs in float32 (its sums and its result, before the cast
  // to Q's dtype): what 1 asks, and 10 for float16 inputs. 11 (double) runs
  // so too: its result is cast to Q's dtype, float32 at most, so double
  // would change only the last bits of the sums.
  if (sp != 0 && sp != 1 && sp != 11 && !(sp == 10 && dt == DType::F16)) {
    c.unsupported(fmt::format("softmax_precision {} (supported: 1 float, 11 double (run as float); 10 float16 for float16 inputs)", sp));
  }
  const int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) c.fail(fmt::format("qk_matmul_output_mode {} (0 to 3)", mode));
  const double scale = c.has_attr("scale") ? double(c.attr_float("scale", 0.f)) : 1.0 / std::sqrt(double(D));
  const double softcap = double(c.attr_float("softcap", 0.f));
  const bool causal = c.attr_int("is_causal", 0) != 0;
  const int64_t left = c.opset >= 25 ? c.attr_int("left_window_size", -1) : -1;
  const int64_t right = c.opset >= 25 ? c.attr_int("right_window_size", -1) : -1;

  std::vector<Slot> out(size_t(std::max(1, c.node.output_size())));

  // The bias, broadcast to [B, Hq, L, S]: the mask's and the causal /
  // window rule's, added. `guard`: a row may have every key masked (then
  // its result is zeros, not NaN); not so for the causal rule alone.
  std::optional<TensorRef> bias;
  bool guard = false;
  auto add_bias = [&](TensorRef b) {
    bias = bias ? c.call("aten.add.Tensor", {*bias, b}).tensor() : b;
  };
  if (c.has(3)) {
    TensorRef m = c.tensor(3);
    Shape ms = c.g.info(m).shape;
    if (ms.empty() || ms.size() > 4) c.fail(fmt::format("attn_mask {} must have 1 to 4 dims", shape_str(ms)));
    if (c.g.info(m).dtype == DType::Bool) {
      m = c.call("aten.where.self", {m, scalar(c, dt, 0.0), scalar(c, dt, -kInf)}).tensor();
    } else if (c.g.info(m).dtype != dt) {
      c.fail(fmt::format("attn_mask has dtype {}; it must be bool or Q's dtype", dtype_name(c.slot_dtype(3))));
    }
    if (ms.back() > S) c.fail(fmt::format("attn_mask {} is longer than the {} keys", shape_str(ms), S));
    if (ms.back() < S) m = c.call("aten.pad.default", {m, IntList{0, S - ms.back()}, std::string("constant"), -kInf}).tensor();
    add_bias(m);
    guard = true;
  }
  if (causal || left >= 0 || right >= 0 || has_nonpad) {
    guard = guard || left >= 0 || right >= 0 || has_nonpad;
    if (!has_nonpad) {
      // Known when the plan is made: one [L, S] bias for every batch.
      HostTensor b(DType::F32, {L, S});
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < S; ++j) {
          const int64_t p = past + i;
          bool ok = !causal || j <= p;
          if (left >= 0) ok = ok && j >= p - left;
          if (right >= 0) ok = ok && j <= p + right;
          b.as<float>()[i * S + j] = ok ? 0.f : -std::numeric_limits<float>::infinity();
        }
      }
      add_bias(float_table(c, b));
    } else {
      // Per batch: with n = nonpad_kv_seqlen[b] and t[i, j] = j - i + L,
      // key j is kept iff j < n; causal: t <= n; window: t + left >= n
      // and t - right <= n.
      if (c.shape(6) != Shape{B}) c.fail(fmt::format("nonpad_kv_seqlen {} must be [{}]", shape_str(c.shape(6)), B));
      TensorRef n = c.view(c.tensor(6), {B, 1, 1, 1});
      const DType id = c.g.info(n).dtype;
      auto grid = [&](int64_t add, bool rows) {
        HostTensor t(DType::I64, {1, 1, rows ? L : 1, S});
        for (int64_t i = 0; i < (rows ? L : 1); ++i)
          for (int64_t j = 0; j < S; ++j) t.as<int64_t>()[i * S + j] = rows ? j - i + L + add : j;
        return c.constant(id == DType::I64 ? t : host::cast(t, id));
      };
      TensorRef ok = c.call("aten.lt.Tensor", {grid(0, false), n}).tensor();
      auto both = [&](TensorRef a) { ok = c.call("aten.logical_and.default", {ok, a}).tensor(); };
      if (causal) both(c.call("aten.le.Tensor", {grid(0, true), n}).tensor());
      if (left >= 0) both(c.call("aten.ge.Tensor", {grid(left, true), n}).tensor());
      if (right >= 0) both(c.call("aten.le.Tensor", {grid(-right, true), n}).tensor());
      add_bias(c.call("aten.where.self", {ok, scalar(c, dt, 0.0), scalar(c, dt, -kInf)}).tensor());
    }
  }
  // present_key / present_value: K and V with the past before them.
  auto presents = [&]() {
    if (!wanted(c, 1) && !wanted(c, 2)) return;
    if (!has_past && (wanted(c, 1) != wanted(c, 2))) c.fail("present_key and present_value must be asked for together");
    if (wanted(c, 1)) out[1] = c.out(k);
    if (wanted(c, 2)) out[2] = c.out(v);
  };
  Attended r = attend(c, {q, k, v, bias, guard, scale, softcap, three_d, wanted(c, 3) ? int(mode) : -1});
  out[0] = c.out(r.y);
  presents();
  if (wanted(c, 3)) out[3] = c.out(r.qk);
  return out;
}

}  // namespace

TensorRef heads_first(NodeCtx& c, TensorRef x, int64_t heads, const char* what) {
  const Shape s = c.g.info(x).shape;
  if (heads <= 0 || s[2] % heads != 0) {
    c.fail(fmt::format("{} {} is 3-D: its last dim must be a multiple of the number of heads ({})", what,
                       shape_str(s), heads));
  }
  TensorRef v = c.view(x, {s[0], s[1], heads, s[2] / heads});
  return c.call("aten.permute.default", {v, IntList{0, 2, 1, 3}}).tensor();
}

Attended attend(NodeCtx& c, const AttendSpec& a) {
  const TensorRef q = a.q, k = a.k, v = a.v;
  const std::optional<TensorRef>& bias = a.bias;
  const bool guard = a.guard, three_d = a.three_d;
  const double scale = a.scale, softcap = a.softcap;
  const DType dt = c.g.info(q).dtype;
  const Shape qs = c.g.info(q).shape, ks = c.g.info(k).shape, vs = c.g.info(v).shape;
  const int64_t B = qs[0], Hq = qs[1], L = qs[2], D = qs[3], Hkv = ks[1], S = ks[2], Dv = vs[3];
  const int64_t g = Hq / Hkv;
  // Grouped queries, where the one dispatch does not take them as they are
  // (below): each K / V head repeated for its g = Hq / Hkv query heads.
  auto repeated = [&](TensorRef t, int64_t d) {
    if (g == 1) return t;
    return c.view(c.call("aten.repeat.default", {c.view(t, {B, Hkv, 1, S, d}), IntList{1, 1, g, 1, 1}}).tensor(),
                  {B, Hq, S, d});
  };
  // Rows with every key masked: [.., L, 1], true where the bias's maximum is
  // -inf (the scores themselves are finite).
  auto masked_rows = [&]() {
    TensorRef mx = c.call("aten.amax.default", {*bias, IntList{-1}, true}).tensor();
    return c.call("wgnn.isinf.default", {mx, false, true}).tensor();
  };

  // The bias as [B, Hq, L, S] with a stride of 0 where it broadcasts:
  // [sB, sH, sL, sS].
  IntList bstride;
  Shape bshape;
  if (bias) {
    bshape = c.g.info(*bias).shape;
    while (bshape.size() < 4) bshape.insert(bshape.begin(), 1);
    const Shape full{B, Hq, L, S};
    for (size_t d = 0; d < 4; ++d) {
      if (bshape[d] != 1 && bshape[d] != full[d]) {
        c.fail(fmt::format("attn_mask {} does not broadcast to [{}, {}, {}, {}]", shape_str(c.g.info(*bias).shape), B, Hq, L, S));
      }
    }
    bstride = {0, 0, 0, 0};
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      bstride[size_t(d)] = bshape[size_t(d)] == 1 ? 0 : stride;
      stride *= bshape[size_t(d)];
    }
  }
  // Grouped queries without the repeat: query head h = kh * g + j reads K /
  // V head kh, and Q [B, Hq, L, D] is [B, Hkv, g * L, D] as it lies (row r
  // = j * L + l), so the dispatch runs Hkv heads of g * L queries each,
  // reading K and V once. The bias must then step one stride along r: it
  // does when L is 1 (decoding: the head's stride) or when a head's rows
  // follow each other (sH = L * sL, as when it broadcasts over both).
  int64_t rstride = 0;
  bool grouped = g > 1;
  if (grouped && bias) {
    if (L == 1) {
      rstride = bstride[1];
    } else if (bstride[1] == L * bstride[2]) {
      rstride = bstride[2];
    } else {
      grouped = false;
    }
  }
  const int64_t heads = grouped ? Hkv : Hq, rows = grouped ? g * L : L;

  // One dispatch (wgnn.attention) unless the scores are asked for, soft
  // capped, or the kernel does not take the sizes.
  if (a.qk_mode < 0 && softcap == 0 && D <= 128 && Dv <= 128 && S >= 1 && L >= 1 &&
      (S <= ops::attention_max_keys(c.mut_graph().ctx().settings()) || dt == DType::F32 ||
       ops::attention_on_tensor_cores(c.mut_graph().ctx(), B * heads, rows, D, Dv))) {
    auto view = [](int64_t b, int64_t h, int64_t l, int64_t d) {
      return IntList{0, b, h, l, d, h * l * d, l * d, d, 1};
    };
    Value mask = None{};
    IntList mview;
    if (bias) {
      mview = grouped ? IntList{0, bstride[0], g * bstride[1], rstride, bstride[3]}
                      : IntList{0, bstride[0], bstride[1], bstride[2], bstride[3]};
      mask = c.view(*bias, bshape);
    }
    const Shape out_shape = three_d ? Shape{B, L, Hq * Dv} : Shape{B, Hq, L, Dv};
    // The result [B, L, Hq, Dv] of 3-D inputs: written so at once, unless
    // grouped rows span several positions (then [B, Hq, L, Dv] and a permute).
    const bool permute_after = three_d && grouped && L > 1;
    const Shape y_shape = permute_after ? Shape{B, Hq, L, Dv} : out_shape;
    // (3-D and grouped here means L = 1: row r is query head j of the group.)
    const IntList ov = three_d && !permute_after
                           ? IntList{0, L * Hq * Dv, grouped ? g * Dv : Dv, grouped ? Dv : Hq * Dv, 1}
                           : IntList{0, Hq * L * Dv, rows * Dv, Dv, 1};
    TensorRef y = c.call("wgnn.attention.default", {q, grouped ? k : repeated(k, D), grouped ? v : repeated(v, Dv), mask,
                                                    scale, view(B, heads, rows, D), view(B, heads, S, D),
                                                    view(B, heads, S, Dv), mview, IntList(y_shape.begin(), y_shape.end()), ov})
                      .tensor();
    if (permute_after) {
      y = c.view(c.call("aten.permute.default", {y, IntList{0, 2, 1, 3}}).tensor(), out_shape);
    }
    if (guard) {
      TensorRef none = masked_rows();  // [.., L, 1]
      if (three_d) {
        Shape ns = c.g.info(none).shape;  // [Bm, Hm, L, 1] (or fewer dims)
        while (ns.size() < 4) ns.insert(ns.begin(), 1);
        none = c.call("aten.permute.default", {c.view(none, ns), IntList{0, 2, 1, 3}}).tensor();  // [Bm, L, Hm, 1]
        TensorRef y4 = c.view(y, {B, L, Hq, Dv});
        y = c.view(c.call("aten.where.self", {none, scalar(c, dt, 0.0), y4}).tensor(), out_shape);
      } else {
        y = c.call("aten.where.self", {none, scalar(c, dt, 0.0), y}).tensor();
      }
    }
    return {y, TensorRef{-1}};
  }

  const TensorRef root = scalar(c, dt, std::sqrt(scale));
  TensorRef qs_ = c.call("aten.mul.Tensor", {q, root}).tensor();
  TensorRef ks_ = c.call("aten.mul.Tensor", {repeated(k, D), root}).tensor();
  TensorRef kt = c.call("aten.permute.default", {ks_, IntList{0, 1, 3, 2}}).tensor();
  TensorRef scores = c.call("aten.matmul.default", {qs_, kt}).tensor();  // [B, Hq, L, S]
  TensorRef qk = scores;
  if (softcap > 0) {
    TensorRef t = c.call("aten.tanh.default", {c.call("aten.div.Tensor", {scores, scalar(c, dt, softcap)}).tensor()}).tensor();
    scores = c.call("aten.mul.Tensor", {t, scalar(c, dt, softcap)}).tensor();
  }
  if (a.qk_mode == 1) qk = scores;
  if (bias) scores = c.call("aten.add.Tensor", {scores, *bias}).tensor();
  if (a.qk_mode == 2) qk = scores;
  TensorRef p = c.call("aten._softmax.default", {scores, int64_t(-1), false}).tensor();
  // A row with no key left gives zeros, not NaN.
  if (guard) p = c.call("aten.where.self", {masked_rows(), scalar(c, dt, 0.0), p}).tensor();
  if (a.qk_mode == 3) qk = p;
  TensorRef y = c.call("aten.matmul.default", {p, repeated(v, Dv)}).tensor();  // [B, Hq, L, Dv]
  if (three_d) {
    y = c.call("aten.permute.default", {y, IntList{0, 2, 1, 3}}).tensor();
    y = c.view(y, {B, L, Hq * Dv});
  }
  return {y, a.qk_mode >= 0 ? qk : TensorRef{-1}};
}

RmsNormed rms_norm(NodeCtx& c, TensorRef x, int64_t axis, double epsilon, bool want_inv_std) {
  const Shape s = c.g.info(x).shape;
  const int64_t r = int64_t(s.size());
  const DType dt = c.g.info(x).dtype;
  if (dt != DType::F32) x = c.call("aten._to_copy.default", {x, int64_t(6)}).tensor();
  IntList dims;
  for (int64_t d = axis; d < r; ++d) dims.push_back(d);
  TensorRef ms = c.call("aten.mean.dim", {c.call("aten.mul.Tensor", {x, x}).tensor(), dims, true}).tensor();
  TensorRef eps = c.constant(host::scalar_like(DType::F32, epsilon));
  if (c.g.info(eps).dtype != DType::F32) eps = c.call("aten._to_copy.default", {eps, int64_t(6)}).tensor();
  TensorRef rms = c.call("aten.sqrt.default", {c.call("aten.add.Tensor", {ms, eps}).tensor()}).tensor();
  TensorRef y = c.call("aten.div.Tensor", {x, rms}).tensor();
  if (dt != DType::F32) y = c.call("aten._to_copy.default", {y, aten_dtype_code(dt)}).tensor();
  RmsNormed out{y, TensorRef{-1}};
  if (want_inv_std) {
    out.inv_std = c.call("aten.reciprocal.default", {rms}).tensor();
    // float32, as the model has it: float16 on the GPU in fp16 mode.
    if (c.gpu_dtype(DType::F32) != DType::F32) out.inv_std = cast_to(c, out.inv_std, c.gpu_dtype(DType::F32));
  }
  return out;
}

TensorRef rotate(NodeCtx& c, TensorRef x, TensorRef cs, TensorRef sn, int64_t R, bool interleaved) {
  const Shape xs = c.g.info(x).shape;
  const int64_t B = xs[0], S = xs[1], H = xs[2], D = xs[3];
  if (R > D || R <= 0 || R % 2 != 0) c.fail(fmt::format("the rotary dim {} must be even and at most the head size {}", R, D));
  if (numel(c.g.info(cs).shape) != B * S * R / 2 || numel(c.g.info(sn).shape) != B * S * R / 2) {
    c.fail(fmt::format("cos_cache {} and sin_cache {} must hold [{}, {}, {}] (batch, sequence, rotary dim / 2)",
                       shape_str(c.g.info(cs).shape), shape_str(c.g.info(sn).shape), B, S, R / 2));
  }
  cs = c.view(cs, {B, S, 1, R / 2});
  sn = c.view(sn, {B, S, 1, R / 2});
  if (R == D) {
    // The whole head rotates: one dispatch (ops/rotary.cpp). The halves
    // form reads cos and sin over the whole width (each angle twice, as
    // transformers' cos is).
    if (interleaved) return c.call("wgnn.rotary_pairs.default", {x, cs, sn}).tensor();
    TensorRef cw = c.call("aten.cat.default", {ValueList{cs, cs}, int64_t(3)}).tensor();
    TensorRef sw = c.call("aten.cat.default", {ValueList{sn, sn}, int64_t(3)}).tensor();
    return c.call("wgnn.rotary_half.default", {x, cw, sw, R / 2}).tensor();
  }
  // Part of the head rotates: that part as pairs [.., R / 2, 2]
  // (interleaved) or halves [.., 2, R / 2], the rest passed through.
  ValueList parts = c.call("aten.split_with_sizes.default", {x, IntList{R, D - R}, int64_t(3)}).list();
  TensorRef rot = parts[0].tensor();
  TensorRef x1, x2;
  if (interleaved) {
    TensorRef pr = c.view(rot, {B, S, H, R / 2, 2});
    ValueList h = c.call("aten.split_with_sizes.default", {pr, IntList{1, 1}, int64_t(4)}).list();
    x1 = c.view(h[0].tensor(), {B, S, H, R / 2});
    x2 = c.view(h[1].tensor(), {B, S, H, R / 2});
  } else {
    ValueList h = c.call("aten.split_with_sizes.default", {rot, IntList{R / 2, R / 2}, int64_t(3)}).list();
    x1 = h[0].tensor();
    x2 = h[1].tensor();
  }
  auto mul = [&](TensorRef a, TensorRef b) { return c.call("aten.mul.Tensor", {a, b}).tensor(); };
  TensorRef r1 = c.call("aten.sub.Tensor", {mul(x1, cs), mul(x2, sn)}).tensor();
  TensorRef r2 = c.call("aten.add.Tensor", {mul(x2, cs), mul(x1, sn)}).tensor();
  TensorRef y;
  if (interleaved) {
    y = c.call("aten.cat.default", {ValueList{c.view(r1, {B, S, H, R / 2, 1}), c.view(r2, {B, S, H, R / 2, 1})}, int64_t(4)}).tensor();
    y = c.view(y, {B, S, H, R});
  } else {
    y = c.call("aten.cat.default", {ValueList{r1, r2}, int64_t(3)}).tensor();
  }
  return c.call("aten.cat.default", {ValueList{y, parts[1]}, int64_t(3)}).tensor();
}

namespace {

// RMSNormalization (opset 23): X / sqrt(mean(X^2) + epsilon) * scale over
// the dims from axis on; stash_type 1 (the default) computes in float32,
// which a float16 X gets by a cast there and back.
std::vector<Slot> rms_normalization(NodeCtx& c) {
  const int64_t axis = ops::normalize_axis(c.attr_int("axis", -1), int64_t(c.shape(0).size()), "RMSNormalization", "axis");
  if (c.attr_int("stash_type", 1) != 1) c.unsupported(fmt::format("stash_type {} (supported: 1 float)", c.attr_int("stash_type", 1)));
  TensorRef y = rms_norm(c, c.tensor(0), axis, double(c.attr_float("epsilon", 1e-5f)), false).y;
  return one(c.out(c.call("aten.mul.Tensor", {y, c.tensor(1)})));
}

// RotaryEmbedding (opset 23). X [B, H, S, D] or [B, S, H * D] (num_heads
// given); cos_cache / sin_cache [B, S, R / 2], or [max_pos, R / 2] indexed
// by position_ids [B, S]; R = rotary_embedding_dim (default D); see rotate().
std::vector<Slot> rotary_embedding(NodeCtx& c) {
  const Shape xs = c.shape(0);
  const bool three_d = xs.size() == 3;
  if (xs.size() != 3 && xs.size() != 4) c.fail(fmt::format("X {} must be 3-D or 4-D", shape_str(xs)));
  TensorRef x = c.tensor(0);
  int64_t B, S, D;
  if (three_d) {
    const int64_t H = c.attr_int("num_heads", 0);
    if (H <= 0 || xs[2] % H != 0) c.fail(fmt::format("3-D X {} needs num_heads dividing its last dim", shape_str(xs)));
    B = xs[0], S = xs[1], D = xs[2] / H;
    x = c.view(x, {B, S, H, D});  // [B, S, H, D]: heads inside
  } else {
    B = xs[0], S = xs[2], D = xs[3];
    x = c.call("aten.permute.default", {x, IntList{0, 2, 1, 3}}).tensor();  // [B, S, H, D]
  }
  const int64_t R = c.attr_int("rotary_embedding_dim", 0) > 0 ? c.attr_int("rotary_embedding_dim", 0) : D;
  TensorRef cs = c.tensor(1), sn = c.tensor(2);
  if (c.has(3)) {
    // Caches [max_pos, R / 2] gathered at position_ids [B, S].
    if (c.shape(1).size() != 2 || c.shape(2) != c.shape(1)) {
      c.fail(fmt::format("with position_ids, cos_cache {} and sin_cache {} must be [max_position, {}]",
                         shape_str(c.shape(1)), shape_str(c.shape(2)), R / 2));
    }
    if (c.shape(3) != Shape{B, S}) c.fail(fmt::format("position_ids {} must be [{}, {}]", shape_str(c.shape(3)), B, S));
    TensorRef ids = c.view(c.tensor(3), {B * S});
    cs = c.call("aten.index_select.default", {cs, int64_t(0), ids}).tensor();
    sn = c.call("aten.index_select.default", {sn, int64_t(0), ids}).tensor();
  }
  TensorRef y = rotate(c, x, cs, sn, R, c.attr_int("interleaved", 0) != 0);
  if (three_d) return one(c.out(c.view(y, xs)));
  return one(c.out(c.call("aten.permute.default", {y, IntList{0, 2, 1, 3}})));
}

}  // namespace

void add_transformer_mappers(Mappers& m) {
  m["Attention"] = {kFloat, attention, nullptr};
  m["RMSNormalization"] = {kFloat, rms_normalization, nullptr};
  m["RotaryEmbedding"] = {kFloat, rotary_embedding, nullptr};
  // Swish (opset 24): x * sigmoid(alpha * x).
  m["Swish"] = {kFloat, [](NodeCtx& c) {
                  const DType dt = c.dtype(0);
                  TensorRef x = c.tensor(0);
                  const double alpha = double(c.attr_float("alpha", 1.f));
                  TensorRef ax = alpha == 1.0 ? x : c.call("aten.mul.Tensor", {x, scalar(c, dt, alpha)}).tensor();
                  return one(c.out(c.call("aten.mul.Tensor", {x, c.call("aten.sigmoid.default", {ax}).tensor()})));
                }, nullptr};
  // SwiGLU (opset 28): A * sigmoid(alpha * A) * B.
  m["SwiGLU"] = {kFloat, [](NodeCtx& c) {
                   const DType dt = c.dtype(0);
                   if (c.dtype(1) != dt) c.fail("A and B must have one dtype");
                   TensorRef a = c.tensor(0);
                   const double alpha = double(c.attr_float("alpha", 1.f));
                   TensorRef aa = alpha == 1.0 ? a : c.call("aten.mul.Tensor", {a, scalar(c, dt, alpha)}).tensor();
                   TensorRef s = c.call("aten.mul.Tensor", {a, c.call("aten.sigmoid.default", {aa}).tensor()}).tensor();
                   return one(c.out(c.call("aten.mul.Tensor", {s, c.tensor(1)})));
                 }, nullptr};
}

}  // namespace wgnn::onnx_import
