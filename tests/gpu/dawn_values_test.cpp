// Proves the numbers of gpu/dawn_values.h against the loaded Dawn: asking for
// a feature the adapter lacks makes Dawn name it in its error, and a device
// granted a feature must accept what that feature enables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "gpu/dawn_values.h"
#include "gpu/recorder.h"
#include "gpu_fixture.h"

using namespace wgnn;
using testing::HasSubstr;
using wgnn::test::ctx;

namespace {
bool adapter_offers(const std::string& name) {
  const auto& f = ctx().features().adapter_features;
  return std::find(f.begin(), f.end(), name) != f.end();
}
}  // namespace

TEST(DawnValues, ShaderF16NumberEnablesF16) {
  if (!adapter_offers("shader-f16")) GTEST_SKIP() << "adapter has no shader-f16";
  ASSERT_TRUE(ctx().features().shader_f16);
  EXPECT_NO_THROW(ctx().pipeline("f16 probe",
                                 "enable f16;\n@group(0) @binding(0) var<storage, read_write> x: array<f16>;\n"
                                 "@compute @workgroup_size(1) fn main() { x[0] = 1.5h; }\n"));
}

TEST(DawnValues, SubgroupsNumberEnablesSubgroups) {
  if (!adapter_offers("subgroups")) GTEST_SKIP() << "adapter has no subgroups";
  ASSERT_TRUE(ctx().features().subgroups);
  EXPECT_NO_THROW(ctx().pipeline("subgroup probe",
                                 "enable subgroups;\n@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
                                 "@compute @workgroup_size(32) fn main() { x[0] = subgroupAdd(1.0); }\n"));
}

// The language feature's number: the instance says it has it exactly when a
// shader that requires it compiles.
TEST(DawnValues, Packed4x8DotProductLanguageFeatureNumber) {
  bool compiles = true;
  try {
    ctx().pipeline("dot4 probe",
                   "requires packed_4x8_integer_dot_product;\n"
                   "@group(0) @binding(0) var<storage, read_write> x: array<i32>;\n"
                   "@compute @workgroup_size(1) fn main() { x[0] = dot4I8Packed(u32(x[1]), u32(x[2])); }\n");
  } catch (const std::exception&) {
    compiles = false;
  }
  EXPECT_EQ(ctx().features().packed_4x8_dot, compiles);
}

TEST(DawnValues, TimestampQueryNumberAllowsQuerySets) {
  if (!adapter_offers("timestamp-query")) GTEST_SKIP() << "adapter has no timestamp-query";
  gpu::Buffer a = ctx().create_buffer(1024, gpu::kStorageUsage, "a");
  gpu::Buffer b = ctx().create_buffer(1024, gpu::kStorageUsage, "b");
  gpu::Recorder rec(ctx(), gpu::Timing::Total);
  rec.dispatch(ctx().kernel("gpu/kernels/copy_vec4.wgsl"), {{&a}, {&b}}, gpu::Grid{1, 1, 1});
  EXPECT_NO_THROW(rec.finish());
  EXPECT_EQ(rec.timings().size(), 1u);
}

TEST(DawnValues, DawnNamesTheTextureFeatures) {
  // ETC2 and ASTC are absent on desktop Vulkan drivers; their numbers are the
  // same in both numberings and anchor the probe itself.
  EXPECT_THAT(gpu::probe_feature_request(ctx(), 0x6), HasSubstr("TextureCompressionETC2"));
}

TEST(DawnValues, SubgroupMatrixFeatureNumber) {
  if (adapter_offers("chromium-experimental-subgroup-matrix")) {
    EXPECT_EQ(gpu::probe_feature_request(ctx(), gpu::dawn::kFeatureSubgroupMatrix), "");
  } else {
    // Named either way, depending on whether the adapter knows it at all.
    EXPECT_THAT(gpu::probe_feature_request(ctx(), gpu::dawn::kFeatureSubgroupMatrix),
                testing::AnyOf(HasSubstr("ChromiumExperimentalSubgroupMatrix"),
                               HasSubstr("chromium-experimental-subgroup-matrix")));
  }
}

TEST(DawnValues, TimestampInsidePassesFeatureNumber) {
  // Without allow_unsafe_apis this feature is refused, and named.
  gpu::ContextOptions opts;
  opts.allow_unsafe_apis = false;
  gpu::Context safe(opts);
  EXPECT_FALSE(safe.features().unsafe_apis);
  EXPECT_THAT(gpu::probe_feature_request(safe, gpu::dawn::kFeatureTimestampQueryInsidePasses),
              HasSubstr("chromium-experimental-timestamp-query-inside-passes"));
}

// allow_unsafe_apis must reach the adapter (which lists the experimental
// features only then) and the device (which grants them only then); the
// timestamp-inside-passes feature shows both on any adapter with timestamps.
TEST(DawnValues, AllowUnsafeApisReachesAdapterAndDevice) {
  if (!adapter_offers("timestamp-query")) GTEST_SKIP() << "adapter has no timestamp-query";
  gpu::ContextOptions opts;
  opts.allow_unsafe_apis = true;
  gpu::Context unsafe(opts);
  EXPECT_TRUE(unsafe.features().unsafe_apis);
  const auto& f = unsafe.features().adapter_features;
  ASSERT_NE(std::find(f.begin(), f.end(), "chromium-experimental-timestamp-query-inside-passes"), f.end());
  EXPECT_EQ(gpu::probe_feature_request(unsafe, gpu::dawn::kFeatureTimestampQueryInsidePasses), "");
  gpu::ContextOptions safe_opts;
  safe_opts.allow_unsafe_apis = false;
  gpu::Context safe(safe_opts);
  const auto& g = safe.features().adapter_features;
  EXPECT_EQ(std::find(g.begin(), g.end(), "chromium-experimental-timestamp-query-inside-passes"), g.end());
  // Subgroup matrices are granted whenever offered, with their configurations.
  const bool offered =
      std::find(f.begin(), f.end(), "chromium-experimental-subgroup-matrix") != f.end();
  EXPECT_EQ(unsafe.features().subgroup_matrix, offered);
#if !WGNN_DAWN_NPM
  EXPECT_EQ(!unsafe.features().subgroup_matrix_configs.empty(), offered);
#endif
}

// The configurations of subgroup matrices are read at the binary's stride
// (dawn::kSubgroupMatrixConfigStride): read at the header's, a Dawn whose
// struct grew gave shifted words (types "unknown", M2 N2 K16) and the
// tensor-core kernels found no f16 config. Every config must name known
// component types and tile sizes a GPU has, and at least one must be f16.
TEST(DawnValues, SubgroupMatrixConfigsAreReadAtTheBinarysStride) {
  gpu::ContextOptions opts;
  opts.allow_unsafe_apis = true;
  gpu::Context unsafe(opts);
  if (!unsafe.features().subgroup_matrix) GTEST_SKIP() << "no subgroup matrices with this Dawn and adapter";
  const auto& configs = unsafe.features().subgroup_matrix_configs;
  ASSERT_FALSE(configs.empty());
  const std::vector<std::string> types = {"f32", "f16", "u32", "i32", "u8", "i8"};
  auto known = [&](const std::string& t) { return std::find(types.begin(), types.end(), t) != types.end(); };
  auto tile = [](uint32_t v) { return v >= 4 && v <= 64 && (v & (v - 1)) == 0; };
  bool f16 = false;
  for (const auto& c : configs) {
    SCOPED_TRACE(c.component + " -> " + c.result + " M" + std::to_string(c.m) + " N" + std::to_string(c.n) + " K" +
                 std::to_string(c.k));
    EXPECT_TRUE(known(c.component));
    EXPECT_TRUE(known(c.result));
    EXPECT_TRUE(tile(c.m) && tile(c.n) && tile(c.k));
    f16 |= c.component == "f16";
  }
  EXPECT_TRUE(f16);
}
