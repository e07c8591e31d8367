// Subgroup matrices (tensor cores), reached with allow_unsafe_apis on a Dawn
// built from source whose Vulkan driver has VK_KHR_cooperative_matrix. One
// multiply per f16 configuration the adapter lists, against the CPU; small
// integers make the f16 products and sums exact. Skips where the feature is
// absent (the npm Dawn has no cooperative-matrix support at all).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <vector>

#include "graph/half.h"
#include "gpu/recorder.h"

using namespace wgnn;

namespace {
gpu::Context& unsafe_ctx() {
  static gpu::Context* c = [] {
    gpu::ContextOptions opts;
    opts.allow_unsafe_apis = true;
    return new gpu::Context(opts);
  }();
  return *c;
}
}  // namespace

TEST(SubgroupMatrix, EachF16ConfigMultipliesLikeTheCpu) {
  gpu::Context& c = unsafe_ctx();
  if (!c.features().subgroup_matrix) GTEST_SKIP() << "no subgroup matrices with this Dawn and adapter";
  ASSERT_FALSE(c.features().subgroup_matrix_configs.empty());
  int tested = 0;
  for (const auto& cfg : c.features().subgroup_matrix_configs) {
    if (cfg.component != "f16" || (cfg.result != "f16" && cfg.result != "f32")) continue;
    SCOPED_TRACE(fmt::format("f16 -> {} M{} N{} K{}", cfg.result, cfg.m, cfg.n, cfg.k));
    const uint32_t M = cfg.m, N = cfg.n, K = cfg.k;
    // Row-major: lhs is MxK (stride K), rhs KxN (stride N), result MxN (stride N).
    const std::string wgsl = fmt::format(R"(enable f16;
enable chromium_experimental_subgroup_matrix;
const M = {0}u; const N = {1}u; const K = {2}u;
@group(0) @binding(0) var<storage, read> inputs: array<f16, K * M + N * K>;
@group(0) @binding(1) var<storage, read_write> output: array<{3}, M * N>;
@compute @workgroup_size({4})
fn main() {{
  let lhs = subgroupMatrixLoad<subgroup_matrix_left<f16, K, M>>(&inputs, 0, false, K);
  let rhs = subgroupMatrixLoad<subgroup_matrix_right<f16, N, K>>(&inputs, K * M, false, N);
  let result = subgroupMatrixMultiply<{3}>(lhs, rhs);
  subgroupMatrixStore(&output, 0, result, false, N);
}}
)",
                                         M, N, K, cfg.result, c.adapter().subgroup_max_size);
    std::vector<float> a(size_t(M) * K), b(size_t(K) * N), want(size_t(M) * N, 0.0f);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i * 7 % 9) - 4);
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i * 5 % 7) - 3);
    for (uint32_t i = 0; i < M; ++i)
      for (uint32_t j = 0; j < N; ++j)
        for (uint32_t k = 0; k < K; ++k) want[i * N + j] += a[i * K + k] * b[k * N + j];
    std::vector<float> ab = a;
    ab.insert(ab.end(), b.begin(), b.end());
    const std::vector<uint16_t> in = to_half(ab);
    const size_t out_bytes = want.size() * (cfg.result == "f16" ? 2 : 4);
    gpu::Buffer ib = c.create_buffer(in.size() * 2, gpu::kStorageUsage, "subgroup matrix inputs");
    gpu::Buffer ob = c.create_buffer(out_bytes, gpu::kStorageUsage, "subgroup matrix output");
    c.write(ib, in.data(), in.size() * 2);
    gpu::Recorder rec(c);
    rec.dispatch(c.pipeline("subgroup matrix multiply", wgsl), {{&ib}, {&ob}}, gpu::Grid{1, 1, 1});
    rec.finish();
    std::vector<float> got(want.size());
    if (cfg.result == "f16") {
      std::vector<uint16_t> h(want.size());
      c.read(ob, h.data(), out_bytes);
      got = from_half(h);
    } else {
      c.read(ob, got.data(), out_bytes);
    }
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
    ++tested;
  }
  EXPECT_GT(tested, 0) << "no f16 configuration listed";
}
