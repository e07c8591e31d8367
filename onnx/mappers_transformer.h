#pragma once
// Internal to onnx/: the pieces of the transformer operators' mappers
// (onnx/mappers_transformer.cpp) that other families build on: ONNX
// Runtime's contrib operators (onnx/mappers_ort_contrib.cpp) compose the
// same attention, RMS norm and rotation.
#include <cstdint>
#include <optional>

#include "onnx/node_ctx.h"

namespace wgnn::onnx_import {

// A scalar of dtype d (broadcast by the binary ops).
TensorRef scalar(NodeCtx& c, DType d, double v);
// Whether the node's output k is there and named (asked for).
bool wanted(const NodeCtx& c, int k);

// [B, S, H * D] -> [B, H, S, D]; `what` names x in the error.
TensorRef heads_first(NodeCtx& c, TensorRef x, int64_t heads, const char* what);

// Scaled dot-product attention: softmax(scale Q K^T, soft capped, + bias) V
// over heads-first Q [B, Hq, L, D], K [B, Hkv, S, D], V [B, Hkv, S, Dv], Hq
// a multiple of Hkv (each K / V head serves Hq / Hkv query heads).
struct AttendSpec {
  TensorRef q, k, v;
  // Added to the scores: Q's dtype, broadcast to [B, Hq, L, S]; -inf masks.
  std::optional<TensorRef> bias;
  // A row may have every key masked: its result is then zeros, not NaN.
  bool guard = false;
  double scale = 1.0;
  double softcap = 0;  // > 0: softcap * tanh(scores / softcap) before the bias
  // The result [B, L, Hq * Dv] (3-D) rather than [B, Hq, L, Dv].
  bool three_d = false;
  // The scores wanted as ONNX Attention's qk_matmul_output_mode (0 to 3);
  // -1: not wanted (then one dispatch, wgnn.attention, where it can).
  int qk_mode = -1;
};
struct Attended {
  TensorRef y;
  TensorRef qk{-1};  // when qk_mode >= 0
};
Attended attend(NodeCtx& c, const AttendSpec& a);

// x / sqrt(mean(x^2) + epsilon) over the dims from `axis` on, in float32
// (a float16 x is cast there and back): y in x's dtype, and with
// want_inv_std the float32 statistic 1 / sqrt(mean(x^2) + epsilon), its
// reduced dims kept (float16 on the GPU in fp16 mode).
struct RmsNormed {
  TensorRef y;
  TensorRef inv_std{-1};
};
RmsNormed rms_norm(NodeCtx& c, TensorRef x, int64_t axis, double epsilon, bool want_inv_std);

// Rotary position embedding of x [B, S, H, D]: cs / sn hold [B, S, R / 2]
// (cosines and sines per position); the first R dims of each head rotate,
// halves x1 | x2 (interleaved: even | odd) becoming x1 cos - x2 sin,
// x2 cos + x1 sin; the rest pass through. Returns [B, S, H, D].
TensorRef rotate(NodeCtx& c, TensorRef x, TensorRef cs, TensorRef sn, int64_t R, bool interleaved);

}  // namespace wgnn::onnx_import
