// wgnn.sample: the next token of each sequence from its logits, on the GPU
// (kernels/sample.wgsl), so that a generation step reads back one id per
// sequence instead of a row of logits.
//
//   wgnn.sample.default(logits, rng, temperature, top_k, top_p) -> ids
//
// logits [B, V] or [B, S, V] (float32 or float16; of [B, S, V] the last
// position S-1 of each sequence); ids int64 [B]. temperature <= 0 is greedy
// (the first largest logit, as argmax), and then rng may be None.
// Otherwise rng is an int32 tensor of at least 3 values (seed low word,
// seed high word, step), written by the caller before each run, top_k 0
// keeps every token, top_p 1 turns nucleus filtering off.
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

Value sample(Graph& g, const ValueList& args) {
  Args a{"wgnn.sample.default", args, g};
  TensorRef x = a.tensor(0, "logits");
  a.require_float(x, "logits");
  a.require_fits_binding(x, "logits");
  const Shape in = g.info(x).shape;
  if (in.size() != 2 && in.size() != 3) {
    a.fail(fmt::format("argument 'logits' {} must be [batch, vocab] or [batch, seq, vocab]", shape_str(in)));
  }
  const int64_t rows = in[0], seq = in.size() == 3 ? in[1] : 1, vocab = in.back();
  if (rows < 1 || seq < 1 || vocab < 1) a.fail(fmt::format("argument 'logits' {} is empty", shape_str(in)));
  if (vocab > int64_t(INT32_MAX) || rows > 65535) {
    a.fail(fmt::format("argument 'logits' {}: at most 65535 sequences of at most 2^31-1 logits", shape_str(in)));
  }
  const double temperature = a.scalar(2, "temperature", 0.0);
  const int64_t top_k = a.integer(3, "top_k", 0);
  const double top_p = a.scalar(4, "top_p", 1.0);
  if (top_k < 0) a.fail(fmt::format("argument 'top_k' is {}; accepted: 0 (off) or more", top_k));
  if (!(top_p > 0.0 && top_p <= 1.0)) a.fail(fmt::format("argument 'top_p' is {}; accepted: (0, 1]", top_p));
  if (!(temperature == temperature)) a.fail("argument 'temperature' is NaN");
  const bool greedy = temperature <= 0.0;
  TensorRef rng = a.optional_tensor(1, "rng");
  if (!greedy) {
    if (rng.id < 0) a.fail("argument 'rng' is None; sampling (temperature > 0) needs the seed and step tensor");
    if (g.info(rng).dtype != DType::I32 || g.info(rng).numel() < 3) {
      a.fail(fmt::format("argument 'rng' is {} {}; accepted: int32 with at least 3 values (seed low, seed high, "
                         "step)",
                         dtype_name(g.info(rng).dtype), shape_str(g.info(rng).shape)));
    }
  }
  TensorRef y = g.add_tensor({rows}, DType::I64);
  SampleParams p{uint32_t(rows),          uint32_t(vocab), uint32_t(seq), uint32_t(std::min<int64_t>(top_k, vocab)),
                 float(greedy ? 1.0 : temperature), float(top_p), greedy ? 1u : 0u, 0u};
  Subs subs = float_subs(g, g.info(x).dtype, a.op);
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/sample.wgsl", subs);
  g.add_dispatch(pl,
                 {Binding::of(y), g.uniform(p), Binding::of(x),
                  rng.id >= 0 ? Binding::of(rng) : optional_input(g, Value())},
                 gpu::Grid{uint32_t(rows), 1, 1}, std::string(a.op), greedy ? "sample_greedy" : "sample");
  return y;
}

}  // namespace

void register_sample_ops(OpRegistry& r) { r.add("wgnn.sample.default", sample); }

}  // namespace wgnn::ops
