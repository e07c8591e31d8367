// wgnn.kv_present.default(past, fresh, past_len, valid_len, length) -> out:
// the present key or value of ONNX Runtime's GroupQueryAttention in one
// dispatch (onnx/mappers_ort_contrib.cpp). past [B, H, P, D], fresh
// [B, H, S, D] (one float dtype), past_len and valid_len int64 [B]; out
// [B, H, length, D], row j of batch b:
//   past[b, :, j]               for j < past_len[b]   (zeros from P on),
//   fresh[b, :, j - past_len[b]] for j < valid_len[b] (zeros from S on),
//   zeros                       otherwise.
// The concatenation, index table, gather and mask it replaces took five.
#include <fmt/format.h>

#include "ops/helpers.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

Value kv_present(Graph& g, const ValueList& args) {
  const char* op = "wgnn.kv_present.default";
  Args a{op, args, g};
  const TensorRef past = a.tensor(0, "past"), fresh = a.tensor(1, "fresh");
  const TensorRef past_len = a.tensor(2, "past_len"), valid_len = a.tensor(3, "valid_len");
  const int64_t len = a.integer(4, "length", -1);
  a.require_float(past, "past");
  const TensorInfo pi = g.info(past), fi = g.info(fresh);
  if (pi.shape.size() != 4 || fi.shape.size() != 4 || pi.shape[0] != fi.shape[0] || pi.shape[1] != fi.shape[1] ||
      pi.shape[3] != fi.shape[3]) {
    a.fail(fmt::format("past {} and fresh {} must be [batch, heads, rows, row] with one batch, heads and row",
                       shape_str(pi.shape), shape_str(fi.shape)));
  }
  if (fi.dtype != pi.dtype) a.fail(fmt::format("fresh is {}; expected past's {}", dtype_name(fi.dtype), dtype_name(pi.dtype)));
  const int64_t B = pi.shape[0], H = pi.shape[1], P = pi.shape[2], S = fi.shape[2], D = pi.shape[3];
  for (auto [t, name] : {std::pair{past_len, "past_len"}, std::pair{valid_len, "valid_len"}}) {
    const TensorInfo& ti = g.info(t);
    if ((ti.dtype != DType::I64 && ti.dtype != DType::I32) || ti.shape != Shape{B}) {
      a.fail(fmt::format("argument '{}' ({} {}) must be int64 or int32 [{}]", name, dtype_name(ti.dtype),
                         shape_str(ti.shape), B));
    }
  }
  if (len < 0) a.fail(fmt::format("length {} must be >= 0", len));
  const size_t row_bytes = size_t(D) * dtype_size(pi.dtype);
  if (row_bytes % 4 != 0) a.fail(fmt::format("rows of {} bytes; a multiple of 4 is needed", row_bytes));
  const TensorRef y = g.add_tensor({B, H, len, D}, pi.dtype);
  const uint64_t count = uint64_t(B) * uint64_t(H) * uint64_t(len) * (row_bytes / 4);
  if (count == 0) return y;
  if (count > 0xFFFFFFFFull) a.fail("the result is too large for 32-bit indexing");
  for (auto [t, name] : {std::pair{past, "past"}, std::pair{fresh, "fresh"}}) a.require_fits_binding(t, name);
  // An empty past or fresh binds the other in its place (never read).
  const TensorRef past_bound = P > 0 ? past : fresh, fresh_bound = S > 0 ? fresh : past;
  if (P == 0 && S == 0) a.fail("past and fresh are both empty");
  const gpu::Pipeline& p = kernel(g, "ops/kernels/kv_present.wgsl", {});
  Binding params = g.uniform(KvPresentParams{uint32_t(count), uint32_t(row_bytes / 4), uint32_t(len), uint32_t(H),
                                             uint32_t(P), uint32_t(S), 0, 0});
  g.add_dispatch(p, {Binding::of(y), params, Binding::of(past_bound), Binding::of(fresh_bound), Binding::of(past_len),
                     Binding::of(valid_len)},
                 grid_for(g, gpu::ceil_div(count, 256)), op, "kv_present");
  return y;
}

}  // namespace

void register_kv_present_ops(OpRegistry& r) { r.add("wgnn.kv_present.default", kv_present); }

}  // namespace wgnn::ops
