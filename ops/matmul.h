#pragma once
// The regular GEMM kernel for ops that read their operands through views
// (ops/attention.cpp's long-sequence form): no copy of a permuted or sliced
// operand, and the result written through a view of its tensor.
#include <cstdint>
#include <optional>

#include "graph/graph.h"
#include "ops/epilogue.h"
#include "ops/helpers.h"

namespace wgnn::ops {

// C[b] = alpha * op(A[b]) @ op(B[b]) + beta * bias[b] over batch dims
// `batch`, every operand read through element offsets and strides of its
// tensor: A [M, K] rows lda apart (or, a_trans, [K, M]), B [K, N] rows ldb
// apart (or, b_trans, [N, K]), the bias at bias_sm / bias_sn along M / N, C
// written at o_off + b-offsets (so) + m * ldc + n. Batch strides sa, sb, sc,
// so have one value per batch dim (0 where an operand broadcasts).
struct StridedGemm {
  TensorRef a, b, bias{-1}, out;
  int64_t M = 0, N = 0, K = 0;
  Shape batch, sa, sb, sc, so;
  int64_t a_off = 0, b_off = 0, c_off = 0, o_off = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool a_trans = false, b_trans = false;
  int64_t bias_sm = 0, bias_sn = 0;
  double alpha = 1, beta = 1;
  ActivationSpec act;  // applied in the epilogue (ops/epilogue.h)
};

// Records the product (float32 or float16, the operands', bias' and
// result's dtypes alike). Fails (a.fail) where a view reaches outside its
// tensor; the caller makes sure every element of C is written once.
void record_strided_gemm(const Args& a, const StridedGemm& s);

// A product split along K, its sum left to the op that reads the result:
// the float32 parts [splits, count] and the bias [N] (or none) that the sum
// pass would add, in that order, before rounding to the result's dtype.
struct SplitSum {
  TensorRef part{-1};
  uint64_t splits = 0, count = 0;
  TensorRef bias{-1};
};

// While one is alive on this thread, the first product recorded whose sum
// pass would be exactly the parts plus a bias of N values (no factor,
// activation or residual), with N = `width` (a multiple of 4) and `count`
// elements in all, is recorded without that pass: `taken` holds its parts,
// and its result tensor is left unwritten for the reader to do without
// (wgnn.matmul_add_layer_norm, ops/norm.cpp).
class SplitSumCapture {
 public:
  SplitSumCapture(int64_t width, int64_t count);
  ~SplitSumCapture();
  SplitSumCapture(const SplitSumCapture&) = delete;
  SplitSumCapture& operator=(const SplitSumCapture&) = delete;
  std::optional<SplitSum> taken;
  const int64_t width, count;

 private:
  SplitSumCapture* prev_;
};

}  // namespace wgnn::ops
