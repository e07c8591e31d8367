// Tensors over maxStorageBufferBindingSize (128 MiB on lavapipe): the ops
// that split them (ops/helpers.h binding_spans) run several dispatches, each
// binding a byte range; an op that binds a tensor whole fails with an Error
// naming the op, the tensor, its bytes and the limit, before any GPU memory
// is allocated. tests/ops/binding_split_test covers each split at its edges
// under a small cap.
#include <gmock/gmock.h>

#include <fmt/format.h>

#include <cstring>

#include "op_test_util.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

namespace {

// Elements of float32 over the binding limit, not a multiple of 4 (a partial
// vec4 in the last chunk), or 0 when the device cannot hold them.
int64_t elements_over_limit() {
  const auto& l = ctx().limits();
  const uint64_t n = l.max_storage_buffer_binding_size / 4 + l.max_storage_buffer_binding_size / 16 + 7;
  return n * 4 <= l.max_buffer_size && n * 4 <= (uint64_t(1) << 31) ? int64_t(n) : 0;
}

}  // namespace

TEST(BindingLimit, UnaryOpsSplitTensorsOverTheLimit) {
  const int64_t n = elements_over_limit();
  if (n == 0) GTEST_SKIP() << "this device's maxBufferSize cannot hold a tensor over its binding limit (< 2 GiB)";
  Graph g(ctx());
  std::vector<float> xs = random_floats(size_t(n), -1.f, 1.f, 7);
  TensorRef x = upload(g, {n}, xs, DType::F32);
  TensorRef r = ops::call(g, "aten.relu.default", {x}).tensor();
  const size_t relu_dispatches = g.dispatches().size();
  ops::call(g, "aten.neg_.default", {r});  // in place, also split
  EXPECT_GE(relu_dispatches, 2u);
  EXPECT_GE(g.dispatches().size(), 2 * relu_dispatches);
  g.mark_output(r);
  g.run();
  const std::vector<float> got = g.read<float>(r);
  ASSERT_EQ(got.size(), xs.size());
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = -(xs[i] > 0 ? xs[i] : 0.f);
    if (std::memcmp(&got[i], &want, 4) != 0 && !(want == 0 && got[i] == 0)) {
      if (bad++ == 0) first_bad = i;
    }
  }
  EXPECT_EQ(bad, 0u) << "first wrong element " << first_bad << " of " << n;
}

TEST(BindingLimit, WholeBindingOverTheLimitFailsBeforeGpuWork) {
  const int64_t n = elements_over_limit();
  if (n == 0) GTEST_SKIP() << "this device's maxBufferSize cannot hold a tensor over its binding limit (< 2 GiB)";
  const uint64_t limit = ctx().limits().max_storage_buffer_binding_size;
  Graph g(ctx());
  TensorRef x = g.add_tensor({n}, DType::F32, TensorKind::Input, "big");
  TensorRef y = ops::call(g, "aten.relu.default", {x}).tensor();
  // An op that checks its arguments itself fails at once.
  try {
    ops::call(g, "aten.argmax.default", {y, int64_t(0), false});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("aten.argmax.default"));
    EXPECT_THAT(e.what(), HasSubstr("maxStorageBufferBindingSize of " + std::to_string(limit)));
  }
  // Any other whole binding is caught by prepare(), before any buffer exists.
  TensorRef out = g.add_tensor({n}, DType::F32, TensorKind::Output, "copy");
  g.add_dispatch(ctx().kernel("gpu/kernels/copy_vec4.wgsl"), {Binding::of(y), Binding::of(out)}, gpu::Grid{1, 1, 1},
                 "test.whole_copy");
  try {
    g.prepare();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("test.whole_copy"));
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("float32 [{}] is {} bytes", n, n * 4)));
    EXPECT_THAT(e.what(), HasSubstr("maxStorageBufferBindingSize of " + std::to_string(limit)));
  }
  EXPECT_FALSE(g.info(x).buffer.valid());
  EXPECT_FALSE(g.info(out).buffer.valid());
}
