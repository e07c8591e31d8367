#pragma once
// Uniform structs declared once: each is a list of fields from which both
// the C++ struct an op fills and the WGSL `struct Params` its kernel reads
// are made, so the two cannot drift apart. A kernel writes `{{PARAMS}}`
// where its struct goes; kernel() (ops/helpers.h) pastes the declaration
// registered for that kernel's path (kernel_uniforms() below). declare()
// lays the fields out by WGSL's rules and throws if C++ placed one
// elsewhere (tests/ops/uniforms_test checks every registered struct).
//
// Field types: uint32_t (u32), int32_t (i32), float (f32).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wgnn::ops::uniform {

template <class T>
struct Wgsl;
template <>
struct Wgsl<uint32_t> {
  static constexpr const char* name = "u32";
};
template <>
struct Wgsl<int32_t> {
  static constexpr const char* name = "i32";
};
template <>
struct Wgsl<float> {
  static constexpr const char* name = "f32";
};

struct Field {
  const char* name;
  const char* type;
  size_t offset;  // where C++ put it
  size_t size;
};

// `struct Params { ... }` in WGSL for these fields; throws Error when a
// field's C++ offset is not its WGSL offset or the size is not a multiple
// of 16 bytes.
std::string declare(std::string_view cpp_name, size_t cpp_size, const std::vector<Field>& fields);

}  // namespace wgnn::ops::uniform

#define WGNN_UNIFORM_FIELD_DECL(T, n) T n;
#define WGNN_UNIFORM_FIELD_INFO(T, n) \
  ::wgnn::ops::uniform::Field{#n, ::wgnn::ops::uniform::Wgsl<T>::name, offsetof(Self, n), sizeof(T)},
// struct NAME { the fields; static const std::string& wgsl(); }
#define WGNN_UNIFORM(NAME, FIELDS)                                                                   \
  struct NAME {                                                                                      \
    FIELDS(WGNN_UNIFORM_FIELD_DECL)                                                                  \
    static const std::string& wgsl() {                                                               \
      using Self = NAME;                                                                             \
      static const std::string text = ::wgnn::ops::uniform::declare(#NAME, sizeof(NAME),            \
                                                                    {FIELDS(WGNN_UNIFORM_FIELD_INFO)}); \
      return text;                                                                                   \
    }                                                                                                \
  }

namespace wgnn::ops {

// ---- The uniform structs, each with the kernel(s) reading it -------------

// kernels/unary.wgsl: count = vec4 groups; p0, p1 the op's parameters.
#define WGNN_UNARY_PARAMS(F) F(uint32_t, count) F(float, p0) F(float, p1) F(uint32_t, _pad)
WGNN_UNIFORM(UnaryParams, WGNN_UNARY_PARAMS);

// kernels/softmax.wgsl: rows of `width` along the last axis.
#define WGNN_SOFTMAX_PARAMS(F) F(uint32_t, rows) F(uint32_t, width) F(uint32_t, _pad0) F(uint32_t, _pad1)
WGNN_UNIFORM(SoftmaxParams, WGNN_SOFTMAX_PARAMS);

// kernels/softmax_strided.wgsl: columns = outer * inner, n the axis' length.
#define WGNN_SOFTMAX_STRIDED_PARAMS(F) F(uint32_t, columns) F(uint32_t, n) F(uint32_t, inner) F(uint32_t, _pad)
WGNN_UNIFORM(SoftmaxStridedParams, WGNN_SOFTMAX_STRIDED_PARAMS);

// kernels/argmax.wgsl: count = outer * inner outputs, n the reduced dim's size (>= 1).
#define WGNN_ARG_PARAMS(F) F(uint32_t, count) F(uint32_t, n) F(uint32_t, inner) F(uint32_t, _pad)
WGNN_UNIFORM(ArgParams, WGNN_ARG_PARAMS);

// kernels/trilu.wgsl: diagonal clamped to [-rows, cols] on the host.
#define WGNN_TRILU_PARAMS(F) F(uint32_t, count) F(uint32_t, rows) F(uint32_t, cols) F(int32_t, diagonal)
WGNN_UNIFORM(TriluParams, WGNN_TRILU_PARAMS);

// kernels/batch_norm_fold.wgsl.
#define WGNN_FOLD_PARAMS(F) F(uint32_t, channels) F(float, eps) F(uint32_t, has_weight) F(uint32_t, has_bias)
WGNN_UNIFORM(FoldParams, WGNN_FOLD_PARAMS);

// kernels/batch_norm.wgsl: count elements of {{V}}, inner size in {{V}} units.
#define WGNN_BATCH_NORM_PARAMS(F) F(uint32_t, count) F(uint32_t, inner) F(uint32_t, channels) F(uint32_t, _pad)
WGNN_UNIFORM(BatchNormParams, WGNN_BATCH_NORM_PARAMS);

// kernels/layer_norm.wgsl: width_v the row width in {{V}} units, width in elements.
#define WGNN_LAYER_NORM_PARAMS(F)                                                                    \
  F(uint32_t, rows) F(uint32_t, width_v) F(float, width) F(float, eps) F(uint32_t, has_weight)       \
  F(uint32_t, has_bias) F(uint32_t, _pad0) F(uint32_t, _pad1)
WGNN_UNIFORM(LayerNormParams, WGNN_LAYER_NORM_PARAMS);

// kernels/group_norm.wgsl: as layer norm's, with hw_v = HxW in {{V}} units.
#define WGNN_GROUP_NORM_PARAMS(F)                                                                    \
  F(uint32_t, rows) F(uint32_t, width_v) F(float, width) F(float, eps) F(uint32_t, has_weight)       \
  F(uint32_t, has_bias) F(uint32_t, groups) F(uint32_t, hw_v) F(uint32_t, channels_per_group)        \
  F(uint32_t, _pad0) F(uint32_t, _pad1) F(uint32_t, _pad2)
WGNN_UNIFORM(GroupNormParams, WGNN_GROUP_NORM_PARAMS);

// kernels/global_pool.wgsl: rows (planes) of `width` values.
#define WGNN_GLOBAL_POOL_PARAMS(F) F(uint32_t, rows) F(uint32_t, width) F(uint32_t, _p0) F(uint32_t, _p1)
WGNN_UNIFORM(GlobalPoolParams, WGNN_GLOBAL_POOL_PARAMS);

// kernels/gemv.wgsl: out [M, N] = alpha * A [M, K] @ op(B) + beta * bias.
#define WGNN_GEMV_PARAMS(F)                                                                                   \
  F(uint32_t, M) F(uint32_t, N) F(uint32_t, K) F(uint32_t, lda) F(uint32_t, ldb) F(uint32_t, bias_sm)       \
      F(uint32_t, bias_sn) F(uint32_t, _pad) F(float, alpha) F(float, beta) F(uint32_t, _p1) F(uint32_t, _p2)
WGNN_UNIFORM(GemvParams, WGNN_GEMV_PARAMS);

// kernels/sample.wgsl: `rows` sequences of `seq` positions of `vocab` logits.
#define WGNN_SAMPLE_PARAMS(F)                                                                            \
  F(uint32_t, rows) F(uint32_t, vocab) F(uint32_t, seq) F(uint32_t, top_k) F(float, temperature) F(float, top_p) \
      F(uint32_t, greedy) F(uint32_t, _pad)
WGNN_UNIFORM(SampleParams, WGNN_SAMPLE_PARAMS);

// kernels/dft.wgsl (ops/spectral.cpp): count = outer * frames * bins * inner.
#define WGNN_DFT_PARAMS(F)                                                                               \
  F(uint32_t, count) F(uint32_t, frames) F(uint32_t, bins) F(uint32_t, inner) F(uint32_t, len)           \
      F(uint32_t, comps) F(uint32_t, n) F(uint32_t, step) F(uint32_t, inverse) F(uint32_t, hermitian)    \
          F(uint32_t, has_window) F(uint32_t, out_comps)
WGNN_UNIFORM(DftParams, WGNN_DFT_PARAMS);

// kernels/nonzero.wgsl (ops/dynamic.cpp): count elements in blocks of 256;
// found = the number of nonzero elements (the write phase), rank of x.
#define WGNN_NONZERO_PARAMS(F) F(uint32_t, count) F(uint32_t, blocks) F(uint32_t, found) F(uint32_t, rank)
WGNN_UNIFORM(NonzeroParams, WGNN_NONZERO_PARAMS);

// kernels/unique.wgsl (ops/dynamic.cpp): x viewed as [outer, rows, inner];
// a slice (one row over outer and inner) has outer * inner elements.
#define WGNN_UNIQUE_PARAMS(F) F(uint32_t, outer) F(uint32_t, rows) F(uint32_t, inner) F(uint32_t, found) \
      F(uint32_t, sorted) F(uint32_t, is_float) F(uint32_t, _p0) F(uint32_t, _p1)
WGNN_UNIFORM(UniqueParams, WGNN_UNIQUE_PARAMS);

// kernels/nms.wgsl (ops/dynamic.cpp): boxes [batches, boxes, 4], scores
// [batches, classes, boxes]; at most max_out kept per batch and class.
#define WGNN_NMS_PARAMS(F)                                                                                  \
  F(uint32_t, batches) F(uint32_t, classes) F(uint32_t, boxes) F(uint32_t, max_out) F(float, iou_threshold)   \
      F(float, score_threshold) F(uint32_t, has_score_threshold) F(uint32_t, center_point_box)                 \
          F(uint32_t, found) F(uint32_t, _p0) F(uint32_t, _p1) F(uint32_t, _p2)
WGNN_UNIFORM(NmsParams, WGNN_NMS_PARAMS);

struct KernelUniform {
  const char* kernel;  // "ops/kernels/NAME.wgsl"
  const std::string& (*wgsl)();
};
// Every kernel whose Params is declared here.
const std::vector<KernelUniform>& kernel_uniforms();
// The declaration for a kernel's {{PARAMS}}; Error if none is registered.
const std::string& uniform_for(std::string_view kernel);

}  // namespace wgnn::ops
