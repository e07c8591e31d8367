#pragma once
// Helpers every op uses, each written once: reading arguments with clear
// errors, specializing and compiling a kernel, binding an optional input,
// and sizing a dispatch grid.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace wgnn::ops {

// "{{NAME}}" -> text substitutions applied to a kernel file before compiling.
using Subs = std::vector<std::pair<std::string, std::string>>;

// The pipeline of kernel file `path` (see gpu/shaders.h) after `subs`, with
// override `constants`. Compiled once per process per distinct source.
const gpu::Pipeline& kernel(Graph& g, std::string_view path, const Subs& subs = {},
                            const gpu::Constants& constants = {}, std::string_view entry = "main");
// The same on a Context, for GPU work recorded outside a Graph.
const gpu::Pipeline& kernel(gpu::Context& ctx, std::string_view path, const Subs& subs = {},
                            const gpu::Constants& constants = {}, std::string_view entry = "main");

// What kernel() returns in a graph that only follows shapes (Graph::meta):
// a pipeline never made, which such a graph never dispatches.
const gpu::Pipeline& meta_pipeline();

// Subs for a float storage type: {{T}} -> f32/f16, {{ENABLE}} -> "enable f16;"
// or "". Throws if f16 is asked for on a device without shader-f16.
Subs float_subs(Graph& g, DType dtype, std::string_view op);

// float_subs plus the names of a kernel that moves data as {{V}}: vec4<T>
// when `vec4` (then {{F32V}} is vec4<f32>, {{VW}} 4), else T (f32, 1), and
// the per-chunk reductions {{CSUM}}, {{CSQ}} and {{FIRST}} over a chunk `v`
// and its deviations `d`.
Subs vector_subs(Graph& g, DType dtype, bool vec4, std::string_view op);

// kernels/conv_depthwise_cl.wgsl's vector of `vw` (4, 2 or 1) elements of
// dtype: {{VW}}, {{XV}} (the vector type), {{WIDEN}} (one as vec4<f32>)
// and {{PACK}} (a vec4's first vw lanes as the vector).
Subs depthwise_vector_subs(DType dtype, uint32_t vw);

// A kernel's run-time check (Graph::add_check): {{CHECK_DECL}} becomes the
// graph's flag buffer at `binding` and `fn report(slot: u32, value: i32)`,
// which sets the slot's flag and value; unchecked, a report() that does
// nothing and no binding. {{CHECKED}} keeps the two pipelines apart.
Subs check_subs(bool checked, uint32_t binding);

// A binding for an optional tensor argument: the tensor, or a small
// zero-filled dummy buffer (valid for vec4 views) when the argument is None.
Binding optional_input(Graph& g, const Value& v);

// A dispatch grid of `workgroups` workgroups folded within the device's
// maxComputeWorkgroupsPerDimension (kernels decode the flat index).
gpu::Grid grid_for(Graph& g, uint64_t workgroups);

// Splitting work over maxStorageBufferBindingSize: a tensor too large to
// bind whole is bound in parts, byte ranges whose offsets are multiples of
// binding_alignment() and whose sizes are multiples of 16 bytes, one
// dispatch per part. Every op that splits cuts its work with binding_spans
// and binds each part with bind_bytes.
struct Span {
  uint64_t start = 0, count = 0;
};
// minStorageBufferOffsetAlignment, at least 16 (vec4 views).
uint64_t binding_alignment(Graph& g);
// The largest binding wgnn makes: maxStorageBufferBindingSize rounded down
// to 16 bytes.
uint64_t binding_limit(Graph& g);
// Consecutive spans covering [0, total) units (elements, rows, ...). Each
// span starts at a multiple of `multiple` units and at a unit whose byte
// offset, for every entry of `unit_bytes` (the bytes one unit takes in each
// tensor the spans bind), is a multiple of binding_alignment(); the span's
// bytes, count * unit_bytes[k] + extra_bytes[k] (extra_bytes may be
// shorter, missing entries 0), stay within binding_limit(). One span
// [0, total) when everything fits. An Error naming `what` when even the
// smallest aligned span is over the limit.
std::vector<Span> binding_spans(Graph& g, uint64_t total, const std::vector<uint64_t>& unit_bytes,
                                uint64_t multiple, std::string_view what,
                                const std::vector<uint64_t>& extra_bytes = {});
// A binding of `bytes` of tensor `t` from `offset` (a multiple of
// binding_alignment()), the size rounded up to 16 and kept within the
// tensor's storage; the whole tensor when that is the range.
Binding bind_bytes(Graph& g, TensorRef t, uint64_t offset, uint64_t bytes);

// Argument access with errors that name the op, the argument, what it got
// and what it accepts.
struct Args {
  std::string_view op;
  const ValueList& args;
  Graph& g;

  const Value& at(size_t i, std::string_view name) const;
  TensorRef tensor(size_t i, std::string_view name) const;
  // None (or a missing trailing argument) -> std::nullopt-like -1 id.
  TensorRef optional_tensor(size_t i, std::string_view name) const;
  // Double or Int; None or missing -> def; anything else -> error.
  double scalar(size_t i, std::string_view name, double def) const;
  int64_t integer(size_t i, std::string_view name, int64_t def) const;
  bool boolean(size_t i, std::string_view name, bool def) const;
  IntList int_list(size_t i, std::string_view name) const;
  std::string string(size_t i, std::string_view name, std::string def) const;

  // Checks: dtype is f32 or f16; the tensor fits one storage binding.
  void require_float(TensorRef t, std::string_view name) const;
  void require_fits_binding(TensorRef t, std::string_view name) const;
  [[noreturn]] void fail(std::string_view msg) const;
};

}  // namespace wgnn::ops
