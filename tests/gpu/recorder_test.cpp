#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu/recorder.h"
#include "gpu_fixture.h"

using namespace wgnn;
using wgnn::test::ctx;

namespace {
const char* kPattern =
    "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,\n"
    "        @builtin(local_invocation_index) lid: u32) {\n"
    "  let i = (wid.x + wid.y * nwg.x) * 64u + lid;\n"
    "  if (i < arrayLength(&x)) { x[i] = i * 2654435761u; }\n"
    "}\n";
// y[i] = x[i] * 3 + 1, reading what the previous dispatch wrote.
const char* kStep =
    "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
    "  if (g.x < arrayLength(&y)) { y[g.x] = x[g.x] * 3u + 1u; }\n"
    "}\n";
}  // namespace

TEST(Recorder, KernelWritesKnownPattern) {
  const size_t n = 100003;  // not a multiple of the workgroup size
  gpu::Buffer b = ctx().create_buffer(n * 4, gpu::kStorageUsage, "pattern");
  gpu::Recorder rec(ctx());
  rec.dispatch(ctx().pipeline("pattern", kPattern), {{&b, 0, n * 4}},
               gpu::RowDispatchGrid(gpu::ceil_div(n, 64), ctx().limits().max_compute_workgroups_per_dimension));
  rec.finish();
  std::vector<uint32_t> out(n);
  ctx().read(b, out.data(), n * 4);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], uint32_t(i) * 2654435761u) << i;
}

TEST(Recorder, FoldedGridCoversMoreThan65535Workgroups) {
  const size_t n = size_t(70000) * 64 + 5;
  gpu::Grid g = gpu::RowDispatchGrid(gpu::ceil_div(n, 64), 65535);
  EXPECT_GT(g.y, 1u);
  EXPECT_GE(g.count(), gpu::ceil_div(n, 64));
  gpu::Buffer b = ctx().create_buffer(n * 4, gpu::kStorageUsage, "pattern");
  gpu::Recorder rec(ctx());
  rec.dispatch(ctx().pipeline("pattern", kPattern), {{&b, 0, n * 4}}, g);
  rec.finish();
  std::vector<uint32_t> out(n);
  ctx().read(b, out.data(), n * 4);
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(out[i], uint32_t(i) * 2654435761u) << i;
  ASSERT_EQ(out[n - 1], uint32_t(n - 1) * 2654435761u);
}

TEST(Recorder, ReadAfterWriteAcrossDispatchesInOnePass) {
  // A chain of 40 dependent dispatches ping-ponging between two buffers in
  // one compute pass and one submit: each reads what the previous wrote.
  const size_t n = 1 << 16;
  const int steps = 40;
  std::vector<uint32_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = uint32_t(i);
  gpu::Buffer a = ctx().create_buffer(n * 4, gpu::kStorageUsage, "a");
  gpu::Buffer b = ctx().create_buffer(n * 4, gpu::kStorageUsage, "b");
  ctx().write(a, host.data(), n * 4);
  const auto& p = ctx().pipeline("step", kStep);
  gpu::Recorder rec(ctx());
  for (int s = 0; s < steps; ++s) {
    const gpu::Buffer& src = (s % 2 == 0) ? a : b;
    const gpu::Buffer& dst = (s % 2 == 0) ? b : a;
    rec.dispatch(p, {{&src}, {&dst}}, gpu::Grid{uint32_t(n / 64), 1, 1});
  }
  EXPECT_EQ(rec.dispatch_count(), size_t(steps));
  rec.finish();
  for (int s = 0; s < steps; ++s)
    for (auto& v : host) v = v * 3u + 1u;
  std::vector<uint32_t> out(n);
  ctx().read(steps % 2 == 0 ? a : b, out.data(), n * 4);
  EXPECT_EQ(out, host);
}

TEST(Recorder, TimestampsPerDispatch) {
  if (!ctx().features().timestamp_query) GTEST_SKIP() << "no timestamp-query on this adapter";
  const size_t n = 1 << 20;
  gpu::Buffer b = ctx().create_buffer(n * 4, gpu::kStorageUsage, "pattern");
  gpu::Recorder rec(ctx(), gpu::Timing::PerDispatch);
  const auto& p = ctx().pipeline("pattern", kPattern);
  for (int i = 0; i < 3; ++i) rec.dispatch(p, {{&b}}, gpu::RowDispatchGrid(n / 64, 65535), "pattern");
  rec.finish();
  auto t = rec.timings();
  ASSERT_EQ(t.size(), 3u);
  for (const auto& s : t) {
    EXPECT_EQ(s.label, "pattern");
    EXPECT_GT(s.ms, 0.0);
    EXPECT_LT(s.ms, 10000.0);
  }
}

TEST(DispatchGrid, Folding) {
  EXPECT_EQ(gpu::RowDispatchGrid(1, 65535).count(), 1u);
  EXPECT_EQ(gpu::RowDispatchGrid(65535, 65535).y, 1u);
  auto g = gpu::RowDispatchGrid(65536, 65535);
  EXPECT_EQ(g.y, 2u);
  EXPECT_GE(g.count(), 65536u);
  EXPECT_LE(g.x, 65535u);
  auto big = gpu::RowDispatchGrid(uint64_t(65535) * 65535 + 1, 65535);
  EXPECT_EQ(big.z, 2u);
  EXPECT_THROW(gpu::RowDispatchGrid(uint64_t(65535) * 65535 * 65535 + 1, 65535), Error);
}
