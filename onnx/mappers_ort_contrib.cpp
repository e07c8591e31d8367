// ONNX Runtime's contrib operators that its transformer optimizer and its
// generative-AI model builder write, composed of wgnn ops:
// com.microsoft GroupQueryAttention, SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, RotaryEmbedding, and
// SimplifiedLayerNormalization (which ONNX Runtime registers in the ONNX
// domain, opset 1). Their semantics follow ONNX Runtime's CPU kernels;
// every attribute value or input those kernels accept and wgnn does not
// follow is Unsupported, naming the node.
// Internal to onnx/: added to the op table by make_mappers() (onnx/mappers.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "onnx/host_ops.h"
#include "onnx/mapper_util.h"
#include "onnx/mappers_transformer.h"
#include "onnx/subgraph.h"
#include "ops/layout.h"

namespace wgnn::onnx_import {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TensorRef call(NodeCtx& c, const char* op, const ValueList& args) { return c.call(op, args).tensor(); }

// An int64 scalar.
TensorRef i64(NodeCtx& c, int64_t v) {
  HostTensor t(DType::I64, {});
  t.as<int64_t>()[0] = v;
  return c.constant(t);
}

// An int64 table of the given shape, value f(flat index).
template <class F>
TensorRef int_table(NodeCtx& c, const Shape& s, F f) {
  HostTensor t(DType::I64, s);
  for (int64_t i = 0; i < numel(s); ++i) t.as<int64_t>()[i] = f(i);
  return c.constant(t);
}

// The value on the host where the build can know it (a constant, a graph
// input's value, or folded from those); nullptr where it is computed on
// the GPU.
const HostTensor* known(NodeCtx& c, size_t i) {
  if (c.is_host(i)) return &c.slot(i).value();
  if (c.builder && c.has(i)) return c.builder->host_value(c.node.input(int(i)));
  return nullptr;
}

// com.microsoft GroupQueryAttention (ONNX Runtime's CPU kernel):
//   query [B, S, Hq * D] (or packed [B, S, (Hq + 2 Hkv) * D] when key and
//   value are absent), key / value [B, S, Hkv * D], past_key / past_value
//   [B, Hkv, P, D], seqlens_k [B] (int32: n_b - 1, n_b the valid keys of
//   row b after this step), total_sequence_length T (int32, the largest
//   n_b), cos_cache / sin_cache [max_pos, R / 2] with do_rotary.
// A first prompt is S == T: its tokens are at positions 0 .. S - 1 and no
// past is read. Otherwise (a decoding step, or a chunk of tokens over a
// past with batch 1) row b has past_b = n_b - S valid past keys, and its
// new tokens take positions past_b .. n_b - 1. Query s of row b (position
// p = past_b + s) attends keys j <= p with j < n_b, and with a
// local_window_size w > 0 only j > p - w (w keys). Rotary embedding rotates Q and
// K at their positions. present_key / present_value [B, Hkv, max(T, P), D]
// hold row b's valid past, then its new keys, then zeros (as ONNX Runtime
// writes them into fresh outputs). That covers the mode where past and
// present share one buffer of a maximum length P > T too: the keys from
// n_b on, never read, are zeros here where a shared buffer keeps old ones.
std::vector<Slot> group_query_attention(NodeCtx& c) {
  const int64_t Hq = c.attr_int("num_heads", 0), Hkv = c.attr_int("kv_num_heads", 0);
  if (Hq <= 0 || Hkv <= 0 || Hq % Hkv != 0) {
    c.fail(fmt::format("num_heads {} must be a positive multiple of kv_num_heads {}", Hq, Hkv));
  }
  if (c.has_attr("causal") && c.attr_int("causal", 1) != 1) c.unsupported(fmt::format("causal {} (supported: 1)", c.attr_int("causal", 1)));
  if (c.attr_int("smooth_softmax", -1) == 1) c.unsupported("smooth_softmax 1 (a softmax with 1 added to its denominator)");
  if (c.attr_int("qk_output", 0) != 0 || wanted(c, 3)) c.unsupported("qk_output / output_qk (the attention scores as an output)");
  if (c.attr_int("sliding_window_cache", 0) != 0) c.unsupported("sliding_window_cache 1 (window-sized KV buffers)");
  for (const char* a : {"k_quant_type", "v_quant_type"}) {
    if (c.attr_string(a, "NONE") != "NONE") c.unsupported(fmt::format("{} '{}' (a quantized KV cache; supported: NONE)", a, c.attr_string(a, "NONE")));
  }
  if (c.has(9)) c.unsupported("the position_ids input (positions follow seqlens_k)");
  if (c.has(11)) c.unsupported("the head_sink input (a per-head sink in the softmax)");
  if (c.has(12) || c.has(13)) c.unsupported("k_scale / v_scale (a quantized KV cache)");
  if (c.has(14) || c.has(15)) c.unsupported("q_norm_weight / k_norm_weight (a per-head RMS norm of Q and K)");
  if (!c.has(5) || !c.has(6)) c.fail("seqlens_k and total_sequence_length are required");

  const DType dt = c.dtype(0);
  const Shape qs = c.shape(0);
  if (qs.size() != 3) c.fail(fmt::format("query {} must be 3-D [batch, sequence, hidden]", shape_str(qs)));
  const int64_t B = qs[0], S = qs[1];
  const bool packed = !c.has(1);
  if (packed != !c.has(2)) c.fail("key and value must be given together (both absent: query is packed Q, K and V)");
  const int64_t D = packed ? qs[2] / (Hq + 2 * Hkv) : qs[2] / Hq;
  TensorRef q, k, v;
  if (packed) {
    if (qs[2] != (Hq + 2 * Hkv) * D) c.fail(fmt::format("packed query {} must end in (num_heads + 2 kv_num_heads) * head_size", shape_str(qs)));
    ValueList p = c.call("aten.split_with_sizes.default", {c.tensor(0), IntList{Hq * D, Hkv * D, Hkv * D}, int64_t(2)}).list();
    q = p[0].tensor(), k = p[1].tensor(), v = p[2].tensor();
  } else {
    if (qs[2] != Hq * D) c.fail(fmt::format("query {} must end in num_heads {} * head_size", shape_str(qs), Hq));
    for (size_t i : {size_t(1), size_t(2)}) {
      if (c.shape(i) != Shape{B, S, Hkv * D}) {
        c.fail(fmt::format("{} {} must be [{}, {}, {}] (kv_num_heads * head_size)", i == 1 ? "key" : "value", shape_str(c.shape(i)), B, S, Hkv * D));
      }
      if (c.dtype(i) != dt) c.fail("query, key and value must have one dtype");
    }
    q = c.tensor(0), k = c.tensor(1), v = c.tensor(2);
  }
  q = c.view(q, {B, S, Hq, D});
  k = c.view(k, {B, S, Hkv, D});
  v = c.view(v, {B, S, Hkv, D});

  const bool has_past = c.has(3) || c.has(4);
  if (has_past && !(c.has(3) && c.has(4))) c.fail("past_key and past_value must be given together");
  int64_t P = 0;
  if (has_past) {
    P = c.shape(3).size() == 4 ? c.shape(3)[2] : -1;
    for (size_t i : {size_t(3), size_t(4)}) {
      if (c.shape(i) != Shape{B, Hkv, P, D}) {
        c.fail(fmt::format("{} {} must be [batch, kv_num_heads, past length, head_size] = [{}, {}, {}, {}]",
                           i == 3 ? "past_key" : "past_value", shape_str(c.shape(i)), B, Hkv, P, D));
      }
      if (c.dtype(i) != dt) c.unsupported(fmt::format("a past of dtype {} (a quantized KV cache; supported: query's dtype)", dtype_name(c.slot_dtype(i))));
    }
  }
  if (c.slot_dtype(5) != DType::I32 || c.shape(5) != Shape{B}) {
    c.fail(fmt::format("seqlens_k ({} {}) must be int32 [{}]", dtype_name(c.slot_dtype(5)), shape_str(c.shape(5)), B));
  }
  const HostTensor& tt = c.host(6, "total_sequence_length");
  if (tt.numel() != 1) c.fail(fmt::format("total_sequence_length {} must hold one value", shape_str(tt.shape)));
  const int64_t T = host::to_ints(tt)[0];
  const bool first = S == T;
  if (!first && S != 1 && B != 1) {
    c.fail(fmt::format("a query of {} tokens that is not the first prompt (total_sequence_length {}) needs batch 1, not {}", S, T, B));
  }
  const int64_t Tp = std::max(T, P);  // the present's length
  if (T < S || T < 1) c.fail(fmt::format("total_sequence_length {} is less than the query's {} tokens", T, S));

  // n_b = seqlens_k + 1 and past_b (0 for a first prompt) as int64 [B].
  TensorRef n = call(c, "aten.add.Tensor", {cast_to(c, c.tensor(5), DType::I64), i64(c, 1)});
  const std::optional<TensorRef> past_b =
      first ? std::nullopt : std::optional<TensorRef>(call(c, "aten.sub.Tensor", {n, i64(c, S)}));

  if (c.attr_int("do_rotary", 0) != 0) {
    if (!c.has(7) || !c.has(8)) c.fail("do_rotary 1 needs cos_cache and sin_cache");
    const Shape cs = c.shape(7);
    if (cs.size() != 2 || c.shape(8) != cs) {
      c.fail(fmt::format("cos_cache {} and sin_cache {} must be one shape [max_position, rotary_dim / 2]", shape_str(cs), shape_str(c.shape(8))));
    }
    if (cs[0] < T) c.fail(fmt::format("cos_cache {} has fewer positions than total_sequence_length {}", shape_str(cs), T));
    // Positions past_b + s, [B * S].
    TensorRef ids = int_table(c, {B, S}, [&](int64_t i) { return i % S; });
    if (past_b) ids = call(c, "aten.add.Tensor", {ids, c.view(*past_b, {B, 1})});
    ids = c.view(ids, {B * S});
    TensorRef cos = call(c, "aten.index_select.default", {c.tensor(7), int64_t(0), ids});
    TensorRef sin = call(c, "aten.index_select.default", {c.tensor(8), int64_t(0), ids});
    const bool inter = c.attr_int("rotary_interleaved", 0) != 0;
    if (packed && 2 * cs[1] == D) {
      // q and k are the packed query's first Hq + Hkv heads: rotated as one
      // (one dispatch a layer), then split by head (views where the heads
      // of a row are the whole row: a decoding step at batch 1). v is its
      // own slice, so the three-way split above goes unread and is dropped.
      auto columns = [&](TensorRef t, int64_t from, int64_t to) {
        return call(c, "aten.slice.Tensor", {t, int64_t(2), from, to, int64_t(1)});
      };
      TensorRef qk = rotate(c, c.view(columns(c.tensor(0), 0, (Hq + Hkv) * D), {B, S, Hq + Hkv, D}), cos, sin, D, inter);
      q = columns(qk, 0, Hq);
      k = columns(qk, Hq, Hq + Hkv);
      v = c.view(columns(c.tensor(0), (Hq + Hkv) * D, (Hq + 2 * Hkv) * D), {B, S, Hkv, D});
    } else {
      q = rotate(c, q, cos, sin, 2 * cs[1], inter);
      k = rotate(c, k, cos, sin, 2 * cs[1], inter);
    }
  }
  q = call(c, "aten.permute.default", {q, IntList{0, 2, 1, 3}});  // [B, Hq, S, D]
  k = call(c, "aten.permute.default", {k, IntList{0, 2, 1, 3}});  // [B, Hkv, S, D]
  v = call(c, "aten.permute.default", {v, IntList{0, 2, 1, 3}});

  // The present [B, Hkv, Tp, D].
  auto present = [&](size_t past, TensorRef fresh) {
    if (first) {
      // No past read: the new keys, then zeros up to the past's length.
      return Tp == S ? fresh : call(c, "aten.pad.default", {fresh, IntList{0, 0, 0, Tp - S}, std::string("constant"), 0.0});
    }
    TensorRef all = has_past ? call(c, "aten.cat.default", {ValueList{c.tensor(past), fresh}, int64_t(2)}) : fresh;  // [B, Hkv, P + S, D]
    if (const HostTensor* sk = known(c, 5)) {
      // Every row full (n_b = T = P + S): the past, then the new keys.
      const std::vector<int64_t> lens = host::to_ints(*sk);
      if (P + S == T && std::all_of(lens.begin(), lens.end(), [&](int64_t l) { return l + 1 == T; })) return all;
    }
    // Row b's key j: past j (j < past_b), new j - past_b (j < n_b), else 0:
    // one dispatch.
    if (has_past && P > 0) {
      return call(c, "wgnn.kv_present.default", {c.tensor(past), fresh, *past_b, n, Tp});
    }
    TensorRef j = int_table(c, {1, Tp}, [](int64_t i) { return i; });
    TensorRef pb = c.view(*past_b, {B, 1});
    TensorRef from_new = call(c, "aten.add.Tensor", {call(c, "aten.sub.Tensor", {j, pb}), i64(c, P)});
    TensorRef last = i64(c, P + S - 1);
    from_new = call(c, "aten.where.self", {call(c, "aten.gt.Tensor", {from_new, last}), last, from_new});
    TensorRef idx = call(c, "aten.where.self", {call(c, "aten.lt.Tensor", {j, pb}), call(c, "aten.expand.default", {j, IntList{B, Tp}}), from_new});
    idx = call(c, "aten.expand.default", {c.view(idx, {B, 1, Tp, 1}), IntList{B, Hkv, Tp, D}});
    TensorRef got = call(c, "aten.gather.default", {all, int64_t(2), idx});
    TensorRef keep = c.view(call(c, "aten.lt.Tensor", {j, c.view(n, {B, 1})}), {B, 1, Tp, 1});
    return call(c, "aten.where.self", {keep, got, scalar(c, dt, 0.0)});
  };
  TensorRef pk = present(3, k);
  TensorRef pv = present(4, v);

  // The mask [B, 1, S, Tp]: key j of row b for query s at p = past_b + s.
  TensorRef j = int_table(c, {1, 1, 1, Tp}, [](int64_t i) { return i; });
  TensorRef p = int_table(c, {1, 1, S, 1}, [](int64_t i) { return i; });
  if (past_b) p = call(c, "aten.add.Tensor", {p, c.view(*past_b, {B, 1, 1, 1})});
  TensorRef ok = call(c, "aten.logical_and.default", {call(c, "aten.le.Tensor", {j, p}), call(c, "aten.lt.Tensor", {j, c.view(n, {B, 1, 1, 1})})});
  const int64_t w = c.attr_int("local_window_size", -1);
  // ONNX Runtime's CPU kernel windows only for w > 0 (0 is no window):
  // w keys, the query's own position the last.
  if (w > 0) {
    TensorRef lo = call(c, "aten.sub.Tensor", {p, i64(c, w)});
    ok = call(c, "aten.logical_and.default", {ok, call(c, "aten.gt.Tensor", {j, lo})});
  }
  TensorRef bias = call(c, "aten.where.self", {ok, scalar(c, dt, 0.0), scalar(c, dt, -kInf)});
  bool guard = w > 0;
  if (c.has(10)) {
    // attention_bias [B or 1, Hq or 1, S, T], added; keys from T on are masked.
    const Shape bs = c.shape(10);
    if (bs.size() != 4 || (bs[0] != 1 && bs[0] != B) || (bs[1] != 1 && bs[1] != Hq) || bs[2] != S || bs[3] != T) {
      c.fail(fmt::format("attention_bias {} must be [{} or 1, {} or 1, {}, {}]", shape_str(bs), B, Hq, S, T));
    }
    if (c.dtype(10) != dt) c.fail("attention_bias must have query's dtype");
    TensorRef ab = c.tensor(10);
    if (Tp > T) ab = call(c, "aten.pad.default", {ab, IntList{0, Tp - T}, std::string("constant"), 0.0});
    bias = call(c, "aten.add.Tensor", {bias, ab});
    guard = true;
  }
  const double scale = c.attr_float("scale", 0.f) != 0.f ? double(c.attr_float("scale", 0.f)) : 1.0 / std::sqrt(double(D));
  const double softcap = double(c.attr_float("softcap", 0.f));
  if (softcap < 0) c.fail(fmt::format("softcap {} must be >= 0", softcap));
  Attended r = attend(c, {q, pk, pv, bias, guard, scale, softcap, true, -1});

  std::vector<Slot> out(size_t(std::max(1, c.node.output_size())));
  out[0] = c.out(r.y);
  if (wanted(c, 1)) out[1] = c.out(pk);
  if (wanted(c, 2)) out[2] = c.out(pv);
  return out;
}

// SimplifiedLayerNormalization (ONNX domain, as ONNX Runtime registers it):
// RMS normalization over the dims from axis on, times scale; the second
// output inv_std_var is 1 / sqrt(mean(x^2) + epsilon) (float32).
std::vector<Slot> simplified_layer_norm(NodeCtx& c) {
  const int64_t axis = ops::normalize_axis(c.attr_int("axis", -1), int64_t(c.shape(0).size()), "SimplifiedLayerNormalization", "axis");
  if (c.attr_int("stash_type", 1) != 1) c.unsupported(fmt::format("stash_type {} (supported: 1 float)", c.attr_int("stash_type", 1)));
  if (c.has(2)) c.unsupported("a third input (bias)");
  RmsNormed r = rms_norm(c, c.tensor(0), axis, double(c.attr_float("epsilon", 1e-5f)), wanted(c, 1));
  std::vector<Slot> out{c.out(call(c, "aten.mul.Tensor", {r.y, c.tensor(1)}))};
  if (wanted(c, 1)) out.push_back(c.out(r.inv_std));
  return out;
}

// com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization:
// s = input + skip (+ bias) over the last dim H, then layer norm (gamma,
// beta) or RMS norm (gamma). Outputs: output, mean (layer norm only),
// inv_std_var, input_skip_bias_sum (s).
OpMapper skip_norm(bool simplified) {
  OpMapper m;
  m.dtypes = kFloat;
  m.build = [simplified](NodeCtx& c) {
    const Shape xs = c.shape(0);
    if (xs.size() < 2) c.fail(fmt::format("input {} must have 2 or 3 dims", shape_str(xs)));
    const int64_t H = xs.back();
    const DType dt = c.dtype(0);
    if (c.dtype(1) != dt) c.fail("input and skip must have one dtype");
    const size_t bias_at = simplified ? 3 : 4;
    if (c.shape(2) != Shape{H}) c.fail(fmt::format("gamma {} must be [{}]", shape_str(c.shape(2)), H));
    if (!simplified && c.has(3) && c.shape(3) != Shape{H}) c.fail(fmt::format("beta {} must be [{}]", shape_str(c.shape(3)), H));
    if (c.has(bias_at) && c.shape(bias_at) != Shape{H}) c.fail(fmt::format("bias {} must be [{}]", shape_str(c.shape(bias_at)), H));
    if (simplified && wanted(c, 1)) c.unsupported("the mean output (RMS normalization has no mean; ONNX Runtime leaves it zeros)");
    TensorRef s = call(c, "aten.add.Tensor", {c.tensor(0), c.tensor(1)});
    if (c.g.info(s).shape != xs) c.fail(fmt::format("skip {} must broadcast to input {}", shape_str(c.shape(1)), shape_str(xs)));
    if (c.has(bias_at)) s = call(c, "aten.add.Tensor", {s, c.tensor(bias_at)});
    const int64_t r = int64_t(xs.size());
    const double eps = double(c.attr_float("epsilon", 1e-12f));
    std::vector<Slot> out(4);
    if (simplified) {
      RmsNormed n = rms_norm(c, s, r - 1, eps, wanted(c, 2));
      out[0] = c.out(call(c, "aten.mul.Tensor", {n.y, c.tensor(2)}));
      if (wanted(c, 2)) out[2] = c.out(n.inv_std);
    } else {
      ValueList l = c.call("aten.native_layer_norm.default", {s, IntList{H}, c.tensor(2), c.tensor_or_none(3), eps}).list();
      out[0] = c.out(l[0]);
      // Mean and inv_std_var are float32: float16 in fp16 mode.
      for (int i : {1, 2}) {
        if (!wanted(c, i)) continue;
        TensorRef t = l[size_t(i)].tensor();
        if (c.gpu_dtype(DType::F32) != DType::F32) t = cast_to(c, t, c.gpu_dtype(DType::F32));
        out[size_t(i)] = c.out(t);
      }
    }
    if (wanted(c, 3)) out[3] = c.out(s);
    out.resize(size_t(std::max(1, c.node.output_size())));
    return out;
  };
  return m;
}

// com.microsoft RotaryEmbedding: input [B, S, H * D] or [B, H, S, D];
// position_ids [B, S], or [1] (an offset: positions offset + s); cos_cache
// / sin_cache [max_pos, R / 2]. num_heads is needed for a 3-D input with
// rotary_embedding_dim; otherwise the head size is 2 * cos_cache's last
// dim. See rotate().
std::vector<Slot> ort_rotary_embedding(NodeCtx& c) {
  if (c.attr_int("is_packed_batching", 0) != 0) c.unsupported("is_packed_batching 1 (sequences packed without padding)");
  if (c.has_attr("scale") && c.attr_float("scale", 1.f) != 1.f) c.unsupported(fmt::format("scale {} (supported: 1)", c.attr_float("scale", 1.f)));
  const Shape xs = c.shape(0);
  const Shape cs = c.shape(2);
  if (cs.size() != 2 || c.shape(3) != cs) {
    c.fail(fmt::format("cos_cache {} and sin_cache {} must be one shape [max_position, rotary_dim / 2]", shape_str(cs), shape_str(c.shape(3))));
  }
  const int64_t rdim = c.attr_int("rotary_embedding_dim", 0);
  const int64_t R = rdim > 0 ? rdim : 2 * cs[1];
  if (R != 2 * cs[1]) c.fail(fmt::format("rotary_embedding_dim {} must be twice cos_cache's last dim ({})", R, cs[1]));
  TensorRef x = c.tensor(0);
  int64_t B, S, H, D;
  const bool three_d = xs.size() == 3;
  if (three_d) {
    H = c.attr_int("num_heads", 0);
    if (H <= 0) {
      if (rdim > 0) c.fail("a 3-D input with rotary_embedding_dim needs num_heads");
      H = xs[2] / R;
    }
    if (H <= 0 || xs[2] % H != 0) c.fail(fmt::format("input {}: num_heads {} must divide its last dim", shape_str(xs), H));
    B = xs[0], S = xs[1], D = xs[2] / H;
    x = c.view(x, {B, S, H, D});
  } else if (xs.size() == 4) {
    B = xs[0], H = xs[1], S = xs[2], D = xs[3];
    x = call(c, "aten.permute.default", {x, IntList{0, 2, 1, 3}});
  } else {
    c.fail(fmt::format("input {} must be 3-D or 4-D", shape_str(xs)));
  }
  (void)H;
  TensorRef ids = cast_to(c, c.tensor(1), DType::I64);
  const Shape ps = c.shape(1);
  if (numel(ps) == 1 && !(B == 1 && S == 1 && ps == Shape{1, 1})) {
    ids = call(c, "aten.add.Tensor", {int_table(c, {B, S}, [&](int64_t i) { return i % S; }), c.view(ids, {1, 1})});
  } else if (ps != Shape{B, S}) {
    c.fail(fmt::format("position_ids {} must be [{}, {}] or [1]", shape_str(ps), B, S));
  }
  ids = c.view(ids, {B * S});
  TensorRef cos = call(c, "aten.index_select.default", {c.tensor(2), int64_t(0), ids});
  TensorRef sin = call(c, "aten.index_select.default", {c.tensor(3), int64_t(0), ids});
  TensorRef y = rotate(c, x, cos, sin, R, c.attr_int("interleaved", 0) != 0);
  if (three_d) return one(c.out(c.view(y, xs)));
  return one(c.out(call(c, "aten.permute.default", {y, IntList{0, 2, 1, 3}})));
}

}  // namespace

void add_ort_contrib_mappers(Mappers& m) {
  m["com.microsoft.GroupQueryAttention"] = {kFloat, group_query_attention, nullptr};
  m["SimplifiedLayerNormalization"] = {kFloat, simplified_layer_norm, nullptr};
  m["com.microsoft.SkipLayerNormalization"] = skip_norm(false);
  m["com.microsoft.SkipSimplifiedLayerNormalization"] = skip_norm(true);
  m["com.microsoft.RotaryEmbedding"] = {kFloat, ort_rotary_embedding, nullptr};
}

}  // namespace wgnn::onnx_import
