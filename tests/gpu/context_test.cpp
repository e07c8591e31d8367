#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "scoped_env.h"
#include "gpu/recorder.h"
#include "gpu/shaders.h"
#include "error_of.h"
#include "gpu/dispatch.h"
#include "gpu_fixture.h"

using namespace wgnn;
using wgnn::test::ScopedSetting;
using testing::HasSubstr;
using wgnn::test::ctx;

TEST(Context, ReportsAdapterAndLimits) {
  const auto& a = ctx().adapter();
  EXPECT_FALSE(a.name.empty());
  EXPECT_EQ(a.backend, "Vulkan");
  EXPECT_GE(ctx().limits().max_storage_buffer_binding_size, 128ull << 20);
  EXPECT_GE(ctx().limits().max_compute_invocations_per_workgroup, 256u);
  EXPECT_GE(ctx().limits().max_compute_workgroups_per_dimension, 65535u);
}

class RoundTrip : public testing::TestWithParam<size_t> {};

TEST_P(RoundTrip, UploadDownload) {
  const size_t bytes = GetParam();
  std::vector<unsigned char> in(bytes), out(bytes, 0xEE);
  for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>((i * 131 + 7) & 0xFF);
  gpu::Buffer b = ctx().create_buffer(bytes, gpu::kStorageUsage, "roundtrip");
  ctx().write(b, in.data(), bytes);
  ctx().read(b, out.data(), bytes);
  EXPECT_EQ(in, out);
}
INSTANTIATE_TEST_SUITE_P(Sizes, RoundTrip, testing::Values(1, 3, 4, 17, 4096, 65537, (size_t(1) << 22) + 5));

TEST(Context, WriteAtOffsetAndClear) {
  std::vector<uint32_t> ones(64, 0xFFFFFFFFu), back(64);
  gpu::Buffer b = ctx().create_buffer(256, gpu::kStorageUsage, "clear");
  ctx().write(b, ones.data(), 256);
  ctx().clear(b, 64, 128);
  ctx().read(b, back.data(), 256);
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(back[i], (i >= 16 && i < 48) ? 0u : 0xFFFFFFFFu) << i;
}

// Large writes go through the Context's two kept staging buffers in parts
// (Context::kStagedWriteChunk): across parts, with an odd tail, at an
// offset, one after another over the same bytes and mixed with queue writes
// (later wins), the bytes are those of queue writes alone.
TEST(Context, StagedWritesGiveWhatQueueWritesGive) {
  const uint64_t n = 2 * gpu::Context::kStagedWriteChunk + 4099;  // three parts, a 3-byte tail
  std::vector<uint8_t> a(n), b(n);
  for (uint64_t i = 0; i < n; ++i) {
    a[i] = uint8_t(i * 131 + 7);
    b[i] = uint8_t(i * 29 + 3);
  }
  const std::vector<uint8_t> small(1024, 0xab);
  std::vector<std::vector<uint8_t>> got;
  for (const char* staged : {"1", "0"}) {
    ScopedSetting env("WGNN_STAGED_WRITES", staged);
    gpu::Context c(test::options());
    gpu::Buffer buf = c.create_buffer(n + 4 + 16);
    c.write(buf, a.data(), n, 4);
    c.write(buf, b.data(), gpu::Context::kStagedWriteChunk + 1, 4);  // over the first part and one byte
    c.write(buf, small.data(), small.size(), 4 + 100);               // a queue write after a staged one
    c.write(buf, a.data() + 4096, gpu::Context::kStagedWriteMin, 4 + 4096);
    std::vector<uint8_t> out(n);
    c.read(buf, out.data(), n, 4);
    got.push_back(out);
  }
  std::vector<uint8_t> want = a;
  std::copy(b.begin(), b.begin() + long(gpu::Context::kStagedWriteChunk + 1), want.begin());
  // Writes move whole words: the 1-byte tail of that write is padded with zeros.
  for (uint64_t i = 1; i < 4; ++i) want[gpu::Context::kStagedWriteChunk + i] = 0;
  std::copy(small.begin(), small.end(), want.begin() + 100);
  std::copy(a.begin() + 4096, a.begin() + 4096 + long(gpu::Context::kStagedWriteMin), want.begin() + 4096);
  ASSERT_EQ(got[0].size(), want.size());
  EXPECT_TRUE(got[0] == want) << "staged";
  EXPECT_TRUE(got[1] == want) << "queue writes";
}

TEST(Context, OversizeBufferNamesSizeAndLimit) {
  const uint64_t limit = ctx().limits().max_buffer_size;
  try {
    ctx().create_buffer(limit + 4096, gpu::kStorageUsage, "too big");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("too big"));
    EXPECT_THAT(e.what(), HasSubstr("maxBufferSize"));
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(limit)));
  }
}

TEST(Context, BindingOverStorageLimitNamesLimit) {
  // A buffer over maxStorageBufferBindingSize (128 MiB on lavapipe) can exist
  // where maxBufferSize allows, but binding it whole must fail loud.
  const auto& l = ctx().limits();
  if (l.max_buffer_size <= l.max_storage_buffer_binding_size) {
    GTEST_SKIP() << "maxBufferSize does not exceed maxStorageBufferBindingSize here";
  }
  const uint64_t size = l.max_storage_buffer_binding_size + 1024;
  gpu::Buffer big = ctx().create_buffer(size, gpu::kStorageUsage, "big");
  gpu::Buffer small = ctx().create_buffer(1024, gpu::kStorageUsage, "small");
  const auto& p = ctx().kernel("gpu/kernels/copy_vec4.wgsl");
  try {
    ctx().bind_group(p, {{&big}, {&small}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("maxStorageBufferBindingSize"));
    EXPECT_THAT(e.what(), HasSubstr("'big'"));
  }
}

TEST(Context, InvalidWgslNamesTheLine) {
  const char* bad =
      "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
      "@compute @workgroup_size(1)\n"
      "fn main() {\n"
      "  x[0] = undefined_thing + 1.0;\n"
      "}\n";
  try {
    ctx().pipeline("bad.wgsl", bad);
    FAIL() << "expected an error";
  } catch (const gpu::GpuError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.wgsl"));
    EXPECT_THAT(e.what(), HasSubstr("line 4"));
    EXPECT_THAT(e.what(), HasSubstr("undefined_thing"));
  }
}

TEST(Context, PipelineCacheHitsOnSecondRequest) {
  const char* src =
      "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
      "override V: f32 = 1.0;\n"
      "@compute @workgroup_size(1) fn main() { x[0] = V; }\n";
  const uint64_t misses = ctx().pipeline_cache_misses();
  const uint64_t hits = ctx().pipeline_cache_hits();
  const auto& p1 = ctx().pipeline("cache.wgsl", src, {{"V", 2.0}});
  const auto& p2 = ctx().pipeline("cache.wgsl", src, {{"V", 2.0}});
  EXPECT_EQ(&p1, &p2);
  EXPECT_EQ(ctx().pipeline_cache_misses(), misses + 1);
  EXPECT_EQ(ctx().pipeline_cache_hits(), hits + 1);
  const auto& p3 = ctx().pipeline("cache.wgsl", src, {{"V", 3.0}});  // other constants: a new pipeline
  EXPECT_NE(&p1, &p3);
  EXPECT_EQ(ctx().pipeline_cache_misses(), misses + 2);
}

TEST(Context, EveryEmbeddedKernelCompiles) {
  ASSERT_FALSE(gpu::embedded_shaders().empty());
  for (const auto& [name, text] : gpu::embedded_shaders()) {
    SCOPED_TRACE(std::string(name));
    // Templates ("{{T}}" ...) are compiled per variant by tests/ops/kernels_test,
    // library code (ops/kernels/lib/) inside the kernels that include it.
    if (text.find("{{") != std::string_view::npos || name.find("/lib/") != std::string_view::npos) continue;
    // Kernels needing f16 are compiled only where the device offers it.
    if (text.find("enable f16;") != std::string_view::npos && !ctx().features().shader_f16) continue;
    if (text.find("enable subgroups;") != std::string_view::npos && !ctx().features().subgroups) continue;
    EXPECT_NO_THROW(ctx().pipeline(name, text));
  }
}

TEST(Context, UnknownKernelNamesFile) {
  EXPECT_THROW(
      {
        try {
          ctx().kernel("ops/kernels/nope.wgsl");
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("nope.wgsl"));
          throw;
        }
      },
      Error);
}


// A wait that times out is an Error, and the Context then closes cleanly:
// Dawn calls the pending map's callback from ~Context, after the waiting
// function has returned (its state once lived on that function's stack).
TEST(Context, GpuWaitTimeoutIsAnErrorAndTheContextClosesCleanly) {
  ScopedSetting env("WGNN_GPU_TIMEOUT_S", "0.05");
  std::string error;
  {
    gpu::Context c(test::options());
    // Long enough to outlast the limit: 2M steps a thread on a CPU adapter
    // (lavapipe), 200M on a GPU (an H200 does 2M in a few ms).
    const double steps = c.adapter().adapter_type == "CPU" ? 2e6 : 2e8;
    const gpu::Pipeline& spin = c.pipeline("spin", R"(
override STEPS: u32;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  var x = id.x;
  for (var i = 0u; i < STEPS; i++) { x = x * 1664525u + 1013904223u + (x >> 7u); }
  out[id.x] = x;
})", {{"STEPS", steps}});
    gpu::Buffer b = c.create_buffer(256 * 4, gpu::kStorageUsage, "spun");
    gpu::Recorder r(c);
    r.dispatch(spin, {{&b}}, gpu::Grid{4, 1, 1});
    r.submit();
    std::vector<uint32_t> out(256);
    error = test::error_of([&] { c.read(b, out.data(), out.size() * 4); });
  }
  EXPECT_THAT(error, HasSubstr("mapping a readback buffer: the GPU did not finish within 0.05 s"));
  EXPECT_THAT(error, HasSubstr("WGNN_GPU_TIMEOUT_S"));
}

TEST(Context, JunkTimeoutIsAnError) {
  for (const char* junk : {"abc", "", "10s", "-1", "0", "nan", "inf", "1e99", "0x10", " 5"}) {
    ScopedSetting env("WGNN_GPU_TIMEOUT_S", junk);
    EXPECT_THAT(test::error_of([] { gpu::Context c(test::options()); }),
                HasSubstr(std::string("WGNN_GPU_TIMEOUT_S='") + junk + "': give the GPU wait limit in seconds"));
  }
}
