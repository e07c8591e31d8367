// wgnn.recurrent: the recurrence of ONNX's RNN, GRU and LSTM
// (kernels/recurrent.wgsl). The input projection of every time step is one
// matrix product made by the caller (onnx/mappers_rnn.cpp); this op runs
// the steps, every direction at once.
//
//   wgnn.recurrent.default(kind, proj, r, rb, seq, h0, c0, p, acts, alpha,
//                          beta, reverse, clip, linear_before_reset,
//                          input_forget, mode) -> [y, y_h, y_c]
//
// kind "rnn" (1 gate), "gru" (3: z, r, h), "lstm" (4: i, o, f, c);
// proj [T, B, D*G*H] (x_t W^T + Wb); r [D, G*H, H]; rb [D, G*H]; seq [B]
// int32; h0, c0 [D, B, H]; p [D, 3*H] (LSTM peepholes i, o, f); acts, alpha,
// beta: 3 per direction (codes below, unused entries ignored); reverse: one
// 0/1 per direction; clip: None or the threshold. y [T, D, B, H] (zero past
// a row's length), y_h [D, B, H], y_c [D, B, H] (LSTM only; else absent).
//
// mode "persistent": one dispatch, one workgroup per (direction, batch
// row) looping over the steps; "step": a dispatch per step (two for GRU
// without linear_before_reset), one invocation per hidden unit; "auto"
// (default) is "step", unless WGNN_RECURRENT names the other. On lavapipe
// the persistent kernel was as fast at 32 hidden units and 2 to 4 times
// slower from 128 (docs/results/recurrent_lavapipe.md): one workgroup per
// row computes every unit of the row one after another, where the steps
// spread the units over workgroups.
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/uniforms.h"
#include "ops/registry.h"

namespace wgnn::ops {
namespace {

constexpr uint64_t kWg = 64;

static_assert(sizeof(RecurrentParams) == 64 + 3 * 32);  // ops/uniforms.h

void require_shape(const Args& a, TensorRef t, const Shape& want, std::string_view name) {
  const Shape& s = a.g.info(t).shape;
  if (s != want) a.fail(fmt::format("argument '{}' has shape {}; expected {}", name, shape_str(s), shape_str(want)));
}

double number(const Value& v) {
  if (v.is_double()) return std::get<double>(v.v);
  if (v.is_int()) return double(std::get<int64_t>(v.v));
  return 0.0;
}

Value recurrent(Graph& g, const ValueList& args) {
  Args a{"wgnn.recurrent.default", args, g};
  if (args.size() != 16) a.fail(fmt::format("takes 16 arguments, got {}", args.size()));
  const std::string kind = a.string(0, "kind", "");
  const uint32_t kind_code = kind == "rnn" ? 0 : kind == "gru" ? 1 : kind == "lstm" ? 2 : 99;
  if (kind_code == 99) a.fail(fmt::format("argument 'kind' is '{}'; accepted: rnn, gru, lstm", kind));
  const int64_t G = kind_code == 0 ? 1 : kind_code == 1 ? 3 : 4;
  const TensorRef proj = a.tensor(1, "proj");
  const TensorRef r = a.tensor(2, "r");
  a.require_float(proj, "proj");
  const DType dt = g.info(proj).dtype;
  const Shape& rs = g.info(r).shape;
  if (rs.size() != 3 || rs[1] != G * rs[2] || rs[0] < 1 || rs[0] > 2) {
    a.fail(fmt::format("argument 'r' has shape {}; expected [D, {}*H, H] with D 1 or 2", shape_str(rs), G));
  }
  const int64_t D = rs[0], H = rs[2];
  const Shape& ps = g.info(proj).shape;
  if (ps.size() != 3 || ps[2] != D * G * H) {
    a.fail(fmt::format("argument 'proj' has shape {}; expected [T, B, {}]", shape_str(ps), D * G * H));
  }
  const int64_t T = ps[0], B = ps[1];
  if (T < 1 || B < 1 || H < 1) a.fail(fmt::format("empty sequence, batch or hidden size (proj {}, r {})", shape_str(ps), shape_str(rs)));
  auto same_dtype = [&](TensorRef t, std::string_view name) {
    if (g.info(t).dtype != dt) {
      a.fail(fmt::format("argument '{}' has dtype {}; expected {} as 'proj'", name, dtype_name(g.info(t).dtype), dtype_name(dt)));
    }
  };
  same_dtype(r, "r");
  const TensorRef rb = a.optional_tensor(3, "rb");
  const TensorRef seq = a.optional_tensor(4, "seq");
  const TensorRef h0 = a.optional_tensor(5, "h0");
  const TensorRef c0 = a.optional_tensor(6, "c0");
  const TensorRef p = a.optional_tensor(7, "p");
  if (kind_code != 2 && (c0.id >= 0 || p.id >= 0)) a.fail("c0 and p are for LSTM only");
  if (seq.id >= 0) {
    require_shape(a, seq, {B}, "seq");
    if (g.info(seq).dtype != DType::I32) a.fail(fmt::format("argument 'seq' has dtype {}; expected int32", dtype_name(g.info(seq).dtype)));
  }
  RecurrentParams prm{};
  prm.T = uint32_t(T);
  prm.B = uint32_t(B);
  prm.H = uint32_t(H);
  prm.D = uint32_t(D);
  prm.kind = kind_code;
  // aux: the small parameters in one binding (WebGPU's default limits allow
  // 8 storage buffers per stage), concatenated in the order of the offsets.
  ValueList parts;
  uint32_t off = 0;
  auto pack = [&](TensorRef t, const Shape& want, std::string_view name, uint32_t bit, uint32_t& at) {
    if (t.id < 0) return;
    require_shape(a, t, want, name);
    same_dtype(t, name);
    prm.flags |= bit;
    at = off;
    off += uint32_t(numel(want));
    parts.push_back(g.add_view(t, {numel(want)}));
  };
  pack(rb, {D, G * H}, "rb", 16, prm.off_rb);
  pack(p, {D, 3 * H}, "p", 8, prm.off_p);
  pack(h0, {D, B, H}, "h0", 2, prm.off_h0);
  pack(c0, {D, B, H}, "c0", 4, prm.off_c0);
  if (seq.id >= 0) prm.flags |= 1;
  const IntList acts = a.int_list(8, "acts");
  const Value& alpha = a.at(9, "alpha");
  const Value& beta = a.at(10, "beta");
  const IntList rev = a.int_list(11, "reverse");
  if (acts.size() != size_t(3 * D) || !alpha.is_list() || alpha.list().size() != size_t(3 * D) || !beta.is_list() ||
      beta.list().size() != size_t(3 * D) || rev.size() != size_t(D)) {
    a.fail(fmt::format("acts, alpha and beta take 3 entries per direction and reverse one ({} directions)", D));
  }
  for (int64_t d = 0; d < D; ++d) {
    for (int k = 0; k < 3; ++k) {
      const int64_t code = acts[size_t(3 * d + k)];
      if (code < 0 || code > 10) a.fail(fmt::format("activation code {} is not one of 0..10", code));
      prm.acts[size_t(4 * d + k)] = uint32_t(code);
      prm.alpha[size_t(4 * d + k)] = float(number(alpha.list()[size_t(3 * d + k)]));
      prm.beta[size_t(4 * d + k)] = float(number(beta.list()[size_t(3 * d + k)]));
    }
    if (rev[size_t(d)]) prm.rev |= 1u << d;
  }
  if (!a.at(12, "clip").is_none()) {
    prm.clip = float(a.scalar(12, "clip", 0));
    if (!(prm.clip > 0)) a.fail(fmt::format("clip is {}; it must be positive", prm.clip));
    prm.flags |= 128;
  }
  if (a.boolean(13, "linear_before_reset", false)) prm.flags |= 32;
  if (a.boolean(14, "input_forget", false)) prm.flags |= 64;
  std::string mode = a.string(15, "mode", "auto");
  if (const char* e = g.ctx().settings().get("WGNN_RECURRENT"); e && *e && mode == "auto") mode = e;
  if (mode == "auto") mode = "step";
  if (mode != "persistent" && mode != "step") a.fail(fmt::format("mode '{}'; accepted: auto, persistent, step", mode));
  for (TensorRef t : {proj, r}) a.require_fits_binding(t, t.id == proj.id ? "proj" : "r");
  if (uint64_t(T) * uint64_t(B) * uint64_t(D * G * H) > uint64_t(INT32_MAX) || uint64_t(D * G * H) * uint64_t(H) > uint64_t(INT32_MAX)) {
    a.fail("more than 2^31 elements in proj or r (32-bit offsets)");
  }

  const TensorRef aux = parts.empty() ? TensorRef{-1}
                        : parts.size() == 1 ? parts[0].tensor()
                                            : call(g, "aten.cat.default", {parts, int64_t(0)}).tensor();
  const int64_t S = kind_code == 2 ? 2 : 1;
  const TensorRef y = g.add_tensor({T, D, B, H}, dt);
  const TensorRef state = g.add_tensor({S, D, B, H}, dt);
  const TensorRef work = g.add_tensor({D * B * 4 * H}, DType::F32);
  const Subs subs = float_subs(g, dt, a.op);
  auto bindings = [&](const RecurrentParams& q) {
    return std::vector<Binding>{Binding::of(y), Binding::of(state), Binding::of(work), g.uniform(q),
                                Binding::of(proj), Binding::of(r),
                                aux.id >= 0 ? Binding::of(aux) : Binding::of(g.ctx().dummy_buffer()),
                                seq.id >= 0 ? Binding::of(seq) : Binding::of(g.ctx().dummy_buffer())};
  };
  if (mode == "persistent") {
    const gpu::Pipeline& pl = kernel(g, "ops/kernels/recurrent.wgsl", subs, {}, "persistent");
    g.add_dispatch(pl, bindings(prm), gpu::Grid{uint32_t(D * B), 1, 1}, std::string(a.op), kind + "_persistent");
  } else {
    const bool two_phase = kind_code == 1 && !(prm.flags & 32);
    const gpu::Pipeline& p1 = kernel(g, "ops/kernels/recurrent.wgsl", subs, {{"PHASE", 1.0}}, "step");
    const gpu::Pipeline* p0 = two_phase ? &kernel(g, "ops/kernels/recurrent.wgsl", subs, {{"PHASE", 0.0}}, "step") : nullptr;
    const gpu::Grid grid = grid_for(g, gpu::ceil_div(uint64_t(D * B * H), kWg));
    for (int64_t s = 0; s < T; ++s) {
      RecurrentParams q = prm;
      q.s = uint32_t(s);
      if (p0) g.add_dispatch(*p0, bindings(q), grid, std::string(a.op), kind + "_step_reset");
      g.add_dispatch(p1, bindings(q), grid, std::string(a.op), kind + "_step");
    }
  }
  // y_h (and y_c): views of state where aligned, else copies.
  ValueList out{y};
  for (int64_t k = 0; k < S; ++k) {
    const TensorRef part = call(g, "aten.slice.Tensor", {state, int64_t(0), k, k + 1, int64_t(1)}).tensor();
    out.push_back(g.add_view(part, {D, B, H}));
  }
  return out;
}

}  // namespace

void register_recurrent_ops(OpRegistry& r) { r.add("wgnn.recurrent.default", recurrent); }

}  // namespace wgnn::ops
