#pragma once
// Uniform structs declared once: each is a list of fields from which both
// the C++ struct an op fills and the WGSL `struct Params` its kernel reads
// are made, so the two cannot drift apart. A kernel writes `{{PARAMS}}`
// where its struct goes; kernel() (ops/helpers.h) pastes the declaration
// registered for that kernel's path (kernel_uniforms() below). declare()
// lays the fields out by WGSL's rules and throws if C++ placed one
// elsewhere (tests/ops/uniforms_test checks every registered struct).
//
// Field types: uint32_t (u32), int32_t (i32), float (f32); U32x4 and I32x4
// (vec4<u32>, vec4<i32>), Dims (ops/layout.h: eight u32, a shape or
// strides of rank <= 8, array<vec4<u32>, 2>) and F32x8 (array<vec4<f32>,
// 2>), each aligned to 16 bytes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ops/layout.h"

namespace wgnn::ops {
struct alignas(16) U32x4 : std::array<uint32_t, 4> {};
struct alignas(16) I32x4 : std::array<int32_t, 4> {};
struct alignas(16) F32x8 : std::array<float, 8> {};  // array<vec4<f32>, 2>
}  // namespace wgnn::ops

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
template <>
struct Wgsl<U32x4> {
  static constexpr const char* name = "vec4<u32>";
};
template <>
struct Wgsl<I32x4> {
  static constexpr const char* name = "vec4<i32>";
};
template <>
struct Wgsl<F32x8> {
  static constexpr const char* name = "array<vec4<f32>, 2>";
};
template <>
struct Wgsl<Dims> {
  static constexpr const char* name = "array<vec4<u32>, 2>";
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

// kernels/rotary_half.wgsl: numel outputs, the half width, pairs (1: the
// interleaved form), and the grid cos and sin are read over: `rank` dims
// (shape: x's, or in the interleaved form x's with the last dim halved)
// with cos's and sin's broadcast strides.
#define WGNN_ROTARY_PARAMS(F) \
  F(uint32_t, numel) F(uint32_t, rank) F(uint32_t, half) F(uint32_t, pairs) F(Dims, shape) F(Dims, sc) F(Dims, ss)
WGNN_UNIFORM(RotaryParams, WGNN_ROTARY_PARAMS);

// kernels/copy_rows.wgsl (generate/generate.cpp: the cache's rows): rows
// of blocks [outer, src_rows, inner] into [outer, dst_rows, inner], in u32.
#define WGNN_COPY_ROWS_PARAMS(F)                                                                      \
  F(uint32_t, outer) F(uint32_t, rows) F(uint32_t, inner) F(uint32_t, src_rows) F(uint32_t, src_row) \
      F(uint32_t, dst_rows) F(uint32_t, dst_row) F(uint32_t, _pad0)
WGNN_UNIFORM(CopyRowsParams, WGNN_COPY_ROWS_PARAMS);

// kernels/kv_present.wgsl: count words out, rows of `inner` words, `len`
// rows out, `heads`, the past's rows, the fresh rows.
#define WGNN_KV_PRESENT_PARAMS(F)                                                                     \
  F(uint32_t, count) F(uint32_t, inner) F(uint32_t, len) F(uint32_t, heads) F(uint32_t, past)       \
      F(uint32_t, fresh) F(uint32_t, _pad0) F(uint32_t, _pad1)
WGNN_UNIFORM(KvPresentParams, WGNN_KV_PRESENT_PARAMS);

// kernels/cat.wgsl: the result as [outer, dim, inner] ({{T}}s), input k
// its rows [start_k, start_k + rows_k) of dim.
#define WGNN_CAT_PARAMS(F)                                                                                   \
  F(uint32_t, count) F(uint32_t, inner) F(uint32_t, dim) F(uint32_t, inputs) F(uint32_t, start0)             \
      F(uint32_t, start1) F(uint32_t, start2) F(uint32_t, start3) F(uint32_t, rows0) F(uint32_t, rows1)      \
          F(uint32_t, rows2) F(uint32_t, rows3)
WGNN_UNIFORM(CatParams, WGNN_CAT_PARAMS);

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

// kernels/pad_rows.wgsl: count = rows * cols_out halves written.
#define WGNN_PAD_ROWS_PARAMS(F) F(uint32_t, count) F(uint32_t, cols) F(uint32_t, cols_out) F(uint32_t, _pad)
WGNN_UNIFORM(PadRowsParams, WGNN_PAD_ROWS_PARAMS);

// kernels/depthwise_taps.wgsl: count = channels * taps elements written.
#define WGNN_DEPTHWISE_TAPS_PARAMS(F) F(uint32_t, count) F(uint32_t, channels) F(uint32_t, taps) F(uint32_t, _pad)
WGNN_UNIFORM(DepthwiseTapsParams, WGNN_DEPTHWISE_TAPS_PARAMS);

// kernels/window.wgsl: count = vec4s of the result, c4 = C / 4.
#define WGNN_WINDOW_PARAMS(F)                                                                              \
  F(uint32_t, count) F(uint32_t, h) F(uint32_t, w) F(uint32_t, c4) F(uint32_t, wh) F(uint32_t, ww) F(uint32_t, nh) \
      F(uint32_t, nw) F(uint32_t, has_res) F(uint32_t, _p0) F(uint32_t, _p1) F(uint32_t, _p2)
WGNN_UNIFORM(WindowParams, WGNN_WINDOW_PARAMS);

// kernels/batch_norm_fold.wgsl.
#define WGNN_FOLD_PARAMS(F) F(uint32_t, channels) F(float, eps) F(uint32_t, has_weight) F(uint32_t, has_bias)
WGNN_UNIFORM(FoldParams, WGNN_FOLD_PARAMS);

// kernels/batch_norm.wgsl: count elements of {{V}}, inner size in {{V}} units.
#define WGNN_BATCH_NORM_PARAMS(F) F(uint32_t, count) F(uint32_t, inner) F(uint32_t, channels) F(uint32_t, _pad)
WGNN_UNIFORM(BatchNormParams, WGNN_BATCH_NORM_PARAMS);

// kernels/layer_norm.wgsl: width_v the row width in {{V}} units, width in elements; parts and
// part_stride (in vec4s): a split product's float32 parts added to x (wgnn.matmul_add_layer_norm).
#define WGNN_LAYER_NORM_PARAMS(F)                                                                    \
  F(uint32_t, rows) F(uint32_t, width_v) F(float, width) F(float, eps) F(uint32_t, has_weight)       \
  F(uint32_t, has_bias) F(uint32_t, parts) F(uint32_t, part_stride)
WGNN_UNIFORM(LayerNormParams, WGNN_LAYER_NORM_PARAMS);

// kernels/group_norm.wgsl: as layer norm's, with hw_v = HxW in {{V}} units;
// kernels/group_norm_split.wgsl also: each row in `splits` slices of
// slice_v chunks.
#define WGNN_GROUP_NORM_PARAMS(F)                                                                    \
  F(uint32_t, rows) F(uint32_t, width_v) F(float, width) F(float, eps) F(uint32_t, has_weight)       \
  F(uint32_t, has_bias) F(uint32_t, groups) F(uint32_t, hw_v) F(uint32_t, channels_per_group)        \
  F(uint32_t, splits) F(uint32_t, slice_v) F(uint32_t, _pad2)
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

// kernels/matmul.wgsl: out[b] = alpha * op(A[b]) @ op(B[b]) + beta * bias[b]
// over `rank` batch dims of `shape`, with each operand's batch strides and
// element offset (a_off, b_off, c_off) and the result's (so, o_off, row
// stride ldc); with SPLITK, `splits` ranges of `kchunk` of K, each summed
// into its own part of `out` (kernels/matmul_splitk.wgsl adds them).
#define WGNN_MATMUL_PARAMS(F)                                                                               \
  F(uint32_t, M) F(uint32_t, N) F(uint32_t, K) F(uint32_t, batch) F(uint32_t, tiles_m) F(uint32_t, tiles_n)   \
      F(uint32_t, lda) F(uint32_t, ldb) F(uint32_t, bias_sm) F(uint32_t, bias_sn) F(uint32_t, rank)           \
          F(uint32_t, kchunk) F(float, alpha) F(float, beta) F(uint32_t, splits) F(uint32_t, ldc)               \
              F(uint32_t, a_off) F(uint32_t, b_off) F(uint32_t, c_off) F(uint32_t, o_off) F(Dims, shape)        \
                  F(Dims, sa) F(Dims, sb) F(Dims, sc) F(Dims, so)
WGNN_UNIFORM(MatmulParams, WGNN_MATMUL_PARAMS);

// kernels/matmul_splitk.wgsl: out[i] = act(alpha * sum over `splits` parts
// of part[s * count + i] + beta * bias[m * bias_sm + n * bias_sn]) + res[i],
// with i = (batch * M + m) * N + n.
#define WGNN_MATMUL_SPLITK_PARAMS(F)                                                                        \
  F(uint32_t, count) F(uint32_t, splits) F(float, alpha) F(float, beta) F(uint32_t, M) F(uint32_t, N)      \
      F(uint32_t, bias_sm) F(uint32_t, bias_sn)
WGNN_UNIFORM(MatmulSplitKParams, WGNN_MATMUL_SPLITK_PARAMS);

// kernels/binary.wgsl: count vec4 groups of numel outputs over `rank` dims
// of `shape`; sa, sb, sc the inputs' strides at the output's indices.
#define WGNN_BINARY_PARAMS(F)                                                                              \
  F(uint32_t, count) F(uint32_t, numel) F(uint32_t, rank) F(int32_t, ialpha) F(float, falpha)              \
      F(uint32_t, check_slot) F(uint32_t, _p1) F(uint32_t, _p2) F(Dims, shape) F(Dims, sa) F(Dims, sb)     \
          F(Dims, sc)
WGNN_UNIFORM(BinaryParams, WGNN_BINARY_PARAMS);

// kernels/conv.wgsl: the implicit GEMM per group (ops/conv.cpp), M = cout_g
// rows, npix columns, kred reduction steps; dims d, h, w in vec4 order.
#define WGNN_CONV_PARAMS(F)                                                                                  \
  F(uint32_t, cin) F(uint32_t, cout) F(uint32_t, cin_g) F(uint32_t, cout_g) F(uint32_t, kred) F(uint32_t, kvol) \
      F(uint32_t, npix) F(uint32_t, has_bias) F(uint32_t, in_d) F(uint32_t, in_h) F(uint32_t, in_w)            \
          F(uint32_t, in_vol) F(uint32_t, out_d) F(uint32_t, out_h) F(uint32_t, out_w) F(uint32_t, out_vol)    \
              F(I32x4, stride) F(I32x4, pad) F(uint32_t, mtiles) F(uint32_t, ntiles) F(uint32_t, tiles)        \
                  F(uint32_t, groups) F(uint32_t, kchunk) F(uint32_t, _p0) F(uint32_t, _p1) F(uint32_t, _p2)
WGNN_UNIFORM(ConvParams, WGNN_CONV_PARAMS);

// kernels/conv_splitk.wgsl: adds `splits` partial sums of count outputs.
#define WGNN_SPLITK_PARAMS(F)                                                                                \
  F(uint32_t, count) F(uint32_t, cout) F(uint32_t, out_vol) F(uint32_t, npix) F(uint32_t, splits)             \
      F(uint32_t, has_bias) F(uint32_t, _p0) F(uint32_t, _p1)
WGNN_UNIFORM(SplitKParams, WGNN_SPLITK_PARAMS);

// kernels/conv_depthwise.wgsl and conv_depthwise_cl.wgsl: one input channel per group, mult outputs each.
#define WGNN_DEPTHWISE_PARAMS(F)                                                                             \
  F(uint32_t, count) F(uint32_t, cout) F(uint32_t, mult) F(uint32_t, has_bias) F(uint32_t, in_d)              \
      F(uint32_t, in_h) F(uint32_t, in_w) F(uint32_t, in_vol) F(uint32_t, out_d) F(uint32_t, out_h)            \
          F(uint32_t, out_w) F(uint32_t, out_vol) F(uint32_t, k_d) F(uint32_t, k_h) F(uint32_t, k_w)           \
              F(uint32_t, kvol) F(I32x4, stride) F(I32x4, pad) F(I32x4, dil)
WGNN_UNIFORM(DepthwiseParams, WGNN_DEPTHWISE_PARAMS);

// kernels/im2col.wgsl: a convolution's patches, count = n * cin * kvol * out_vol.
#define WGNN_IM2COL_PARAMS(F)                                                                                \
  F(uint32_t, count) F(uint32_t, kvol) F(uint32_t, in_d) F(uint32_t, in_h) F(uint32_t, in_w) F(uint32_t, in_vol) \
      F(uint32_t, out_h) F(uint32_t, out_w) F(uint32_t, out_vol) F(uint32_t, k_h) F(uint32_t, k_w) F(uint32_t, _p0) \
          F(I32x4, stride) F(I32x4, pad) F(I32x4, dil)
WGNN_UNIFORM(Im2colParams, WGNN_IM2COL_PARAMS);

// kernels/pool.wgsl: one thread per output; dims d, h, w (in_dims[3]: volume).
#define WGNN_POOL_PARAMS(F)                                                                                  \
  F(uint32_t, count) F(uint32_t, divisor_override) F(uint32_t, count_include_pad) F(uint32_t, idx_plane)      \
      F(uint32_t, idx_col_major) F(uint32_t, _p0) F(uint32_t, _p1) F(uint32_t, _p2) F(U32x4, in_dims)          \
          F(U32x4, out_dims) F(I32x4, kernel) F(I32x4, stride) F(I32x4, pad_begin) F(I32x4, pad_end)            \
              F(I32x4, dil)
WGNN_UNIFORM(PoolParams, WGNN_POOL_PARAMS);

// kernels/copy.wgsl (ops/movement.cpp): a strided copy over an iteration shape of `rank` dims.
#define WGNN_COPY_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, rank) F(uint32_t, dst_base) F(uint32_t, src_base) F(Dims, shape) \
      F(Dims, dst_stride) F(Dims, src_stride) F(Dims, lo) F(Dims, in_dim)
WGNN_UNIFORM(CopyParams, WGNN_COPY_PARAMS);

// kernels/index.wgsl (ops/movement.cpp): a read through an index along `dim`.
#define WGNN_INDEX_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, rank) F(uint32_t, dim) F(uint32_t, dim_size) F(uint32_t, check_slot) \
      F(uint32_t, _p0) F(uint32_t, _p1) F(uint32_t, _p2) F(Dims, shape) F(Dims, src_stride) \
      F(uint32_t, first) F(uint32_t, row_lo) F(uint32_t, row_hi) F(uint32_t, _pad)
WGNN_UNIFORM(IndexParams, WGNN_INDEX_PARAMS);

// kernels/reduce.wgsl: rows outputs of count reduced elements each, in segs segments.
#define WGNN_REDUCE_PARAMS(F) \
  F(uint32_t, rows) F(uint32_t, count) F(float, scale) F(uint32_t, kept_rank) F(uint32_t, red_rank) \
      F(uint32_t, segs) F(uint32_t, seg_len) F(uint32_t, _pad) F(Dims, kept_shape) F(Dims, kept_stride) \
      F(Dims, red_shape) F(Dims, red_stride)
WGNN_UNIFORM(ReduceParams, WGNN_REDUCE_PARAMS);

// kernels/gather_nd.wgsl (ops/scatter.cpp).
#define WGNN_GATHER_ND_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, q) F(uint32_t, slice) F(uint32_t, check_slot) F(uint32_t, per_batch) \
      F(uint32_t, batch_stride) F(uint32_t, _p0) F(uint32_t, _p1) F(Dims, dims) F(Dims, strides)
WGNN_UNIFORM(GatherNdParams, WGNN_GATHER_ND_PARAMS);

// kernels/scatter.wgsl (ops/scatter.cpp): ScatterND and ScatterElements.
#define WGNN_SCATTER_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, q) F(uint32_t, slice) F(uint32_t, check_slot) F(Dims, dims) \
      F(Dims, strides) F(Dims, ushape)
WGNN_UNIFORM(ScatterParams, WGNN_SCATTER_PARAMS);

// kernels/cumsum.wgsl: cols columns of n values, inner apart.
#define WGNN_CUMSUM_PARAMS(F) \
  F(uint32_t, cols) F(uint32_t, n) F(uint32_t, inner) F(uint32_t, exclusive) F(uint32_t, reverse) \
      F(uint32_t, _p0) F(uint32_t, _p1) F(uint32_t, _p2)
WGNN_UNIFORM(CumsumParams, WGNN_CUMSUM_PARAMS);

// kernels/grid_sample.wgsl: count outputs of C planes, H x W in, OH x OW out.
#define WGNN_GRID_SAMPLE_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, C) F(uint32_t, H) F(uint32_t, W) F(uint32_t, OH) F(uint32_t, OW) \
      F(uint32_t, align) F(uint32_t, _p0)
WGNN_UNIFORM(GridSampleParams, WGNN_GRID_SAMPLE_PARAMS);

// kernels/roi_align.wgsl: count outputs [R, C, OH, OW] from N images of C
// planes H x W; sampling 0: adaptive (ceil(roi / bin) samples a bin).
#define WGNN_ROI_ALIGN_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, C) F(uint32_t, H) F(uint32_t, W) F(uint32_t, OH) F(uint32_t, OW) \
      F(uint32_t, N) F(uint32_t, sampling) F(float, scale) F(uint32_t, check_slot) F(uint32_t, _p0) F(uint32_t, _p1)
WGNN_UNIFORM(RoiAlignParams, WGNN_ROI_ALIGN_PARAMS);

// kernels/topk_select.wgsl (rows_or_count: the rows) and topk_sort.wgsl (rows * k).
#define WGNN_TOPK_PARAMS(F) \
  F(uint32_t, rows_or_count) F(uint32_t, n) F(uint32_t, inner) F(uint32_t, k) F(uint32_t, largest) \
      F(uint32_t, _p0) F(uint32_t, _p1) F(uint32_t, _p2)
WGNN_UNIFORM(TopkParams, WGNN_TOPK_PARAMS);

// kernels/quantize.wgsl (ops/quantized.cpp): mode 0 per tensor, 1 per axis, 2 blocked.
#define WGNN_QDQ_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, inner) F(uint32_t, dim) F(uint32_t, block) F(uint32_t, sdim) \
      F(uint32_t, mode) F(uint32_t, has_zp) F(int32_t, qmin) F(int32_t, qmax) F(uint32_t, _p0) \
      F(uint32_t, _p1) F(uint32_t, _p2)
WGNN_UNIFORM(QdqParams, WGNN_QDQ_PARAMS);

// kernels/qside.wgsl: the requantization side buffer's parts.
#define WGNN_SIDE_PARAMS(F) \
  F(uint32_t, nsa) F(uint32_t, nsb) F(uint32_t, nbias) F(uint32_t, total)
WGNN_UNIFORM(SideParams, WGNN_SIDE_PARAMS);

// kernels/matmul_integer.wgsl and matmul_integer_dot4.wgsl.
#define WGNN_MATMUL_INT_PARAMS(F) \
  F(uint32_t, M) F(uint32_t, N) F(uint32_t, K) F(uint32_t, batch) F(uint32_t, a_bstride) \
      F(uint32_t, b_bstride) F(uint32_t, a_zp_rows) F(uint32_t, b_zp_cols) F(uint32_t, tiles_m) \
      F(uint32_t, tiles_n) F(uint32_t, a_s_rows) F(uint32_t, b_s_cols) F(int32_t, qmin) F(int32_t, qmax) \
      F(uint32_t, off_sb) F(uint32_t, off_y)
WGNN_UNIFORM(MatmulIntParams, WGNN_MATMUL_INT_PARAMS);

// kernels/conv_integer.wgsl: the direct integer convolution (also the tiled one's geometry).
#define WGNN_CONV_INT_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, C) F(uint32_t, D) F(uint32_t, H) F(uint32_t, W) F(uint32_t, Co) \
      F(uint32_t, OD) F(uint32_t, OH) F(uint32_t, OW) F(uint32_t, KD) F(uint32_t, KH) F(uint32_t, KW) \
      F(uint32_t, sd) F(uint32_t, sh) F(uint32_t, sw) F(int32_t, pd) F(int32_t, ph) F(int32_t, pw) \
      F(uint32_t, dd) F(uint32_t, dh) F(uint32_t, dw) F(uint32_t, cin_g) F(uint32_t, cout_g) \
      F(uint32_t, w_zp_chan) F(uint32_t, w_s_chan) F(uint32_t, has_bias) F(int32_t, qmin) F(int32_t, qmax) \
      F(uint32_t, off_sb) F(uint32_t, off_y) F(uint32_t, _p0) F(uint32_t, _p1)
WGNN_UNIFORM(ConvIntParams, WGNN_CONV_INT_PARAMS);

// kernels/conv_integer_tiled.wgsl: the implicit GEMM per group.
#define WGNN_CONV_INT_TILED_PARAMS(F) \
  F(uint32_t, cin) F(uint32_t, cout) F(uint32_t, cin_g) F(uint32_t, cout_g) F(uint32_t, kred) \
      F(uint32_t, npix) F(uint32_t, in_d) F(uint32_t, in_h) F(uint32_t, in_w) F(uint32_t, in_vol) \
      F(uint32_t, out_d) F(uint32_t, out_h) F(uint32_t, out_w) F(uint32_t, out_vol) F(uint32_t, sd) \
      F(uint32_t, sh) F(uint32_t, sw) F(int32_t, pd) F(int32_t, ph) F(int32_t, pw) F(uint32_t, mtiles) \
      F(uint32_t, ntiles) F(uint32_t, tiles) F(uint32_t, groups) F(uint32_t, w_zp_chan) \
      F(uint32_t, w_s_chan) F(uint32_t, has_bias) F(int32_t, qmin) F(int32_t, qmax) F(uint32_t, off_sb) \
      F(uint32_t, off_y) F(uint32_t, _p0)
WGNN_UNIFORM(ConvIntTiledParams, WGNN_CONV_INT_TILED_PARAMS);

// kernels/attention.wgsl (ops/attention.cpp): element offsets of q, k, v, mask and (b, h, l/s, d) strides;
// kchunk and ksplits: the tensor-core kernel's ranges of keys (ops/subgroup_attention.h, `ksplit`).
#define WGNN_ATTENTION_PARAMS(F) \
  F(uint32_t, B) F(uint32_t, H) F(uint32_t, L) F(uint32_t, S) F(uint32_t, q_tiles) F(uint32_t, o_off) \
      F(float, scale) F(uint32_t, splits) F(U32x4, offs) F(U32x4, qs) F(U32x4, ks) F(U32x4, vs) \
      F(U32x4, ms) F(U32x4, os) F(uint32_t, kchunk) F(uint32_t, ksplits) F(uint32_t, apad0) F(uint32_t, apad1)
WGNN_UNIFORM(AttentionParams, WGNN_ATTENTION_PARAMS);

// kernels/resize.wgsl (ops/resize.cpp): up to two resampled dims per dispatch.
#define WGNN_RESIZE_PARAMS(F) \
  F(uint32_t, count) F(uint32_t, R) F(uint32_t, OW) F(uint32_t, Q) F(uint32_t, OH) F(uint32_t, IW) \
      F(uint32_t, IH) F(uint32_t, TH) F(uint32_t, TW) F(uint32_t, w_base) F(float, fill) F(uint32_t, pairwise)
WGNN_UNIFORM(ResizeParams, WGNN_RESIZE_PARAMS);

// kernels/matmul_qweight.wgsl: q0..q5 the weight function's parameters
// (ops/quantized.cpp: each weight format says what they hold).
#define WGNN_MATMUL_QWEIGHT_PARAMS(F) \
  F(uint32_t, M) F(uint32_t, N) F(uint32_t, K) F(uint32_t, tiles_m) F(uint32_t, tiles_n) F(uint32_t, has_bias) \
      F(uint32_t, q0) F(uint32_t, q1) F(uint32_t, q2) F(uint32_t, q3) F(uint32_t, q4) F(uint32_t, q5)
WGNN_UNIFORM(MatmulQWeightParams, WGNN_MATMUL_QWEIGHT_PARAMS);

// kernels/recurrent.wgsl (ops/recurrent.cpp): acts, alpha and beta hold
// direction d's activation k (f, g, h) at d * 4 + k.
#define WGNN_RECURRENT_PARAMS(F) \
  F(uint32_t, T) F(uint32_t, B) F(uint32_t, H) F(uint32_t, D) F(uint32_t, kind) F(uint32_t, flags) F(uint32_t, s) \
      F(uint32_t, rev) F(float, clip) F(uint32_t, off_rb) F(uint32_t, off_p) F(uint32_t, off_h0) \
          F(uint32_t, off_c0) F(uint32_t, pad0) F(uint32_t, pad1) F(uint32_t, pad2) F(Dims, acts) F(F32x8, alpha) \
              F(F32x8, beta)
WGNN_UNIFORM(RecurrentParams, WGNN_RECURRENT_PARAMS);

struct KernelUniform {
  const char* kernel;  // "ops/kernels/NAME.wgsl"
  const std::string& (*wgsl)();
};
// Every kernel whose Params is declared here.
const std::vector<KernelUniform>& kernel_uniforms();
// The declaration for a kernel's {{PARAMS}}; Error if none is registered.
const std::string& uniform_for(std::string_view kernel);

}  // namespace wgnn::ops
