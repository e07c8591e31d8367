// The pipeline cache on disk (Dawn's blob cache, gpu/disk_cache.h): a
// second Context with a warm cache compiles nothing new, damaged entries are
// ignored, the off switches work, the size bound evicts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu_fixture.h"

#include <unistd.h>

#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "error_of.h"
#include "gpu/context.h"
#include "gpu/disk_cache.h"
#include "gpu/recorder.h"
#include "util/file.h"

using namespace wgnn;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

// A fresh folder per test, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           fmt::format("wgnn-pipeline-cache-{}-{}", ::getpid(),
                       testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

gpu::ContextOptions with_cache(const fs::path& dir, uint64_t max_bytes = 0) {
  gpu::ContextOptions o;
  o.cache_dir = dir.string();
  o.pipeline_cache_max_bytes = max_bytes;
  return o;
}

// Kernels that differ in their text: each a pipeline of its own.
std::string kernel_wgsl(int k) {
  return fmt::format(R"(
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
  if (id.x < arrayLength(&data)) {{ data[id.x] = data[id.x] * {}u + {}u; }}
}}
)",
                     k + 2, k);
}
constexpr int kKernels = 4;

// Compiles the kernels and runs them all on 256 values; returns the result.
std::vector<uint32_t> compile_and_run(gpu::Context& c) {
  std::vector<uint32_t> v(256);
  for (uint32_t i = 0; i < v.size(); ++i) v[i] = i;
  gpu::Buffer b = c.create_buffer(v.size() * 4, gpu::kStorageUsage, "values");
  c.write(b, v.data(), v.size() * 4);
  {
    gpu::Recorder r(c);
    for (int k = 0; k < kKernels; ++k) {
      r.dispatch(c.pipeline(fmt::format("cache test {}", k), kernel_wgsl(k)), {{&b}}, gpu::Grid{4, 1, 1});
    }
    r.submit();
  }
  c.read(b, v.data(), v.size() * 4);
  return v;
}

std::vector<uint32_t> expected() {
  std::vector<uint32_t> v(256);
  for (uint32_t i = 0; i < v.size(); ++i) {
    uint32_t x = i;
    for (uint32_t k = 0; k < kKernels; ++k) x = x * (k + 2) + k;
    v[i] = x;
  }
  return v;
}

std::vector<fs::path> blobs(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".blob") out.push_back(e.path());
  }
  return out;
}

}  // namespace

TEST(PipelineCache, WarmCacheCompilesNothingNew) {
  TempDir dir;
  {
    gpu::Context c(with_cache(dir.path));
    ASSERT_TRUE(c.disk_cache_stats().enabled) << c.disk_cache_stats().why_off;
    EXPECT_EQ(compile_and_run(c), expected());
    const gpu::CreationStats s = c.creation_stats();
    const gpu::DiskCacheStats d = c.disk_cache_stats();
    EXPECT_EQ(s.pipelines_created, uint64_t(kKernels));
    EXPECT_EQ(s.pipelines_from_disk, 0u);
    // Dawn looks blobs up and stores what it compiled (docs/DAWN.md).
    EXPECT_GE(d.loads, uint64_t(kKernels));
    EXPECT_EQ(d.hits, 0u);
    EXPECT_GE(d.stores, uint64_t(kKernels));
    EXPECT_EQ(d.corrupt, 0u);
    EXPECT_THAT(d.folder, HasSubstr(dir.path.string()));
    EXPECT_TRUE(fs::exists(fs::path(d.folder) / "SCOPE.txt"));
  }
  EXPECT_FALSE(blobs(dir.path).empty());
  // A new device (the same as a new process for Dawn: its blob cache lives
  // in the device) finds every pipeline on disk.
  gpu::Context c(with_cache(dir.path));
  EXPECT_EQ(compile_and_run(c), expected());
  const gpu::CreationStats s = c.creation_stats();
  const gpu::DiskCacheStats d = c.disk_cache_stats();
  EXPECT_EQ(s.pipelines_created, uint64_t(kKernels));
  EXPECT_EQ(s.pipelines_from_disk, s.pipelines_created);
  EXPECT_EQ(d.misses, 0u);
  EXPECT_EQ(d.stores, 0u);
  EXPECT_EQ(d.hits, d.loads);
}

TEST(PipelineCache, DamagedEntriesAreIgnored) {
  TempDir dir;
  {
    gpu::Context c(with_cache(dir.path));
    compile_and_run(c);
  }
  std::vector<fs::path> files = blobs(dir.path);
  ASSERT_GE(files.size(), 4u);
  // Truncated, emptied, a flipped byte in the value, garbage of the right size.
  for (size_t i = 0; i < files.size(); ++i) {
    const uint64_t size = fs::file_size(files[i]);
    switch (i % 4) {
      case 0: fs::resize_file(files[i], size / 2); break;
      case 1: fs::resize_file(files[i], 0); break;
      case 2: {
        std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(std::streamoff(size - 1));
        char x = 0;
        f.seekg(std::streamoff(size - 1));
        f.get(x);
        f.seekp(std::streamoff(size - 1));
        f.put(char(x ^ 0x5A));
        break;
      }
      case 3: {
        std::ofstream f(files[i], std::ios::binary | std::ios::trunc);
        f << std::string(size_t(size), 'x');
        break;
      }
    }
  }
  {
    gpu::Context c(with_cache(dir.path));
    EXPECT_EQ(compile_and_run(c), expected());
    const gpu::DiskCacheStats d = c.disk_cache_stats();
    EXPECT_GE(d.corrupt, uint64_t(files.size()));
    EXPECT_GE(d.stores, uint64_t(kKernels));  // compiled again, the entries replaced
    EXPECT_LT(c.creation_stats().pipelines_from_disk, uint64_t(kKernels));
  }
  gpu::Context c(with_cache(dir.path));
  EXPECT_EQ(compile_and_run(c), expected());
  EXPECT_EQ(c.creation_stats().pipelines_from_disk, uint64_t(kKernels));
  EXPECT_EQ(c.disk_cache_stats().corrupt, 0u);
}

// A kernel with an override constant and an entry point not named main.
constexpr const char* kOverrideWgsl = R"(
override scale: f32 = 1.0;
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@compute @workgroup_size(64)
fn other(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] * scale; }
}
)";

// A list of pipelines remembered under an id: a later Context asks for them
// before they are needed (from the disk cache), so the requests that follow
// find them made; another id, a damaged list or no disk cache prefetch
// nothing, and the list is outside Dawn's counters.
TEST(PipelineCache, RememberedPipelinesAreAskedForAgain) {
  TempDir dir;
  std::vector<fs::path> before;
  {
    gpu::Context c(with_cache(dir.path));
    EXPECT_EQ(compile_and_run(c), expected());
    std::vector<const gpu::Pipeline*> ps;
    for (int k = 0; k < kKernels; ++k) ps.push_back(&c.pipeline(fmt::format("cache test {}", k), kernel_wgsl(k)));
    // A pipeline with override constants and another entry point travels too.
    ps.push_back(&c.pipeline("cache test override", kOverrideWgsl, {{"scale", 0.25}}, "other"));
    for (const gpu::Pipeline* p : ps) p->handle();  // made, and their blobs stored
    const gpu::DiskCacheStats d0 = c.disk_cache_stats();
    before = blobs(dir.path);
    c.remember_pipelines("model a", ps);
    const gpu::DiskCacheStats d1 = c.disk_cache_stats();
    EXPECT_EQ(d1.stores, d0.stores);
    EXPECT_EQ(d1.loads, d0.loads);
  }
  {
    gpu::Context c(with_cache(dir.path));
    EXPECT_EQ(c.prefetch_pipelines("model b"), 0u);
    EXPECT_EQ(c.creation_stats().pipelines_created, 0u);
    EXPECT_EQ(c.prefetch_pipelines("model a"), size_t(kKernels + 1));
    const gpu::CreationStats s0 = c.creation_stats();
    EXPECT_EQ(s0.pipelines_created, uint64_t(kKernels + 1));
    EXPECT_EQ(compile_and_run(c), expected());
    const gpu::CreationStats s1 = c.creation_stats();
    EXPECT_EQ(s1.pipelines_created, s0.pipelines_created);  // every request found its pipeline made
    EXPECT_EQ(s1.pipeline_hits - s0.pipeline_hits, uint64_t(kKernels));
    EXPECT_EQ(c.disk_cache_stats().misses, 0u);
    c.pipeline("cache test override", kOverrideWgsl, {{"scale", 0.25}}, "other");
    EXPECT_EQ(c.creation_stats().pipelines_created, s0.pipelines_created);
  }
  // The list is the one entry the remember added: damaged, it is ignored.
  std::vector<fs::path> lists;
  for (const fs::path& f : blobs(dir.path)) {
    if (std::find(before.begin(), before.end(), f) == before.end()) lists.push_back(f);
  }
  ASSERT_EQ(lists.size(), 1u);
  fs::resize_file(lists[0], fs::file_size(lists[0]) - 3);
  {
    gpu::Context c(with_cache(dir.path));
    testing::internal::CaptureStderr();
    EXPECT_EQ(c.prefetch_pipelines("model a"), 0u);
    EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("damaged"));
    EXPECT_EQ(c.creation_stats().pipelines_created, 0u);
    EXPECT_EQ(compile_and_run(c), expected());
  }
  gpu::ContextOptions off = with_cache(dir.path);
  off.pipeline_cache = false;
  gpu::Context c(off);
  EXPECT_EQ(c.prefetch_pipelines("model a"), 0u);
  c.remember_pipelines("model a", {&c.pipeline("cache test 0", kernel_wgsl(0))});  // nothing to store in
}

TEST(PipelineCache, OffSwitches) {
  TempDir dir;
  {
    gpu::ContextOptions o = with_cache(dir.path);
    o.pipeline_cache = false;
    gpu::Context c(o);
    EXPECT_FALSE(c.disk_cache_stats().enabled);
    EXPECT_THAT(c.disk_cache_stats().why_off, HasSubstr("ContextOptions::pipeline_cache"));
    EXPECT_EQ(compile_and_run(c), expected());
  }
  {
    gpu::ContextOptions o = with_cache(dir.path);
    o.settings.set("WGNN_PIPELINE_CACHE", "0");
    gpu::Context c(o);
    EXPECT_FALSE(c.disk_cache_stats().enabled);
    EXPECT_THAT(c.disk_cache_stats().why_off, HasSubstr("WGNN_PIPELINE_CACHE=0"));
    EXPECT_EQ(compile_and_run(c), expected());
  }
  EXPECT_TRUE(blobs(dir.path).empty());
  gpu::ContextOptions maybe = with_cache(dir.path);
  maybe.settings.set("WGNN_PIPELINE_CACHE", "maybe");
  const std::string e = test::error_of([&] { gpu::Context c(maybe); });
  EXPECT_THAT(e, HasSubstr("WGNN_PIPELINE_CACHE='maybe'"));
  gpu::ContextOptions bad_mb = with_cache(dir.path);
  bad_mb.settings.set("WGNN_PIPELINE_CACHE_MAX_MB", "12x");
  const std::string m = test::error_of([&] { gpu::Context c(bad_mb); });
  EXPECT_THAT(m, HasSubstr("WGNN_PIPELINE_CACHE_MAX_MB='12x'"));
}

TEST(PipelineCache, SizeBoundEvictsTheOldest) {
  TempDir dir;
  uint64_t total = 0;
  {
    gpu::Context c(with_cache(dir.path));
    compile_and_run(c);
  }
  std::vector<fs::path> files = blobs(dir.path);
  for (const auto& f : files) total += fs::file_size(f);
  ASSERT_GE(files.size(), 2u);
  // Under a bound of half of that, a cold cache (a new folder) keeps under
  // the bound by evicting.
  TempDir small;
  const uint64_t bound = total / 2;
  gpu::Context c(with_cache(small.path, bound));
  EXPECT_EQ(compile_and_run(c), expected());
  const gpu::DiskCacheStats d = c.disk_cache_stats();
  EXPECT_GT(d.evicted, 0u);
  uint64_t kept = 0;
  for (const auto& f : blobs(small.path)) kept += fs::file_size(f);
  EXPECT_LE(kept, bound);
  EXPECT_GT(kept, 0u);
}

// The store itself, without Dawn.
TEST(DiskCache, RoundTripAndDawnsTwoCallProtocol) {
  TempDir dir;
  gpu::DiskCache cache(dir.path.string(), "scope", "test\n", 1 << 20);
  const std::string key = "some key", value(1000, 'v');
  EXPECT_EQ(cache.load(key.data(), key.size(), nullptr, 0), 0u);
  cache.store(key.data(), key.size(), value.data(), value.size());
  ASSERT_EQ(cache.load(key.data(), key.size(), nullptr, 0), value.size());
  std::string back(value.size(), '\0');
  EXPECT_EQ(cache.load(key.data(), key.size(), back.data(), back.size()), value.size());
  EXPECT_EQ(back, value);
  // A buffer of another size: a miss, nothing copied.
  std::string small(10, '\0');
  EXPECT_EQ(cache.load(key.data(), key.size(), small.data(), small.size()), 0u);
  const gpu::DiskCacheCounters c = cache.counters();
  EXPECT_EQ(c.loads, 2u);
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.stores, 1u);
  EXPECT_EQ(fs::file_size(cache.entry_path(key.data(), key.size())),
            gpu::DiskCache::kHeaderBytes + key.size() + value.size());
}

TEST(DiskCache, UnwritableFolderIsAWarningNotAnError) {
  TempDir dir;
  const fs::path file = dir.path / "not-a-folder";
  std::ofstream(file) << "x";
  gpu::DiskCache cache(file.string(), "scope", "test\n", 1 << 20);
  const std::string key = "k", value = "v";
  testing::internal::CaptureStderr();
  cache.store(key.data(), key.size(), value.data(), value.size());
  cache.store(key.data(), key.size(), value.data(), value.size());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("cannot create the pipeline cache folder"));
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos) << "warned twice: " << err;
  EXPECT_EQ(cache.load(key.data(), key.size(), nullptr, 0), 0u);
  EXPECT_EQ(cache.counters().store_failures, 1u);
}

TEST(CacheDir, Lookup) {
  // util::cache_dir(): WGNN_CACHE_DIR, else $XDG_CACHE_HOME/wgnn, else ~/.cache/wgnn.
  Settings s;
  s.set("WGNN_CACHE_DIR", "/a/b");
  s.set("XDG_CACHE_HOME", "/x");
  s.set("HOME", "/home/u");
  EXPECT_EQ(util::cache_dir(s), "/a/b");
  s.unset("WGNN_CACHE_DIR");
  EXPECT_EQ(util::cache_dir(s), "/x/wgnn");
  s.set("XDG_CACHE_HOME", "relative");  // not absolute: ignored, as the XDG spec says
  EXPECT_EQ(util::cache_dir(s), "/home/u/.cache/wgnn");
  s.unset("XDG_CACHE_HOME");
  s.unset("HOME");
  EXPECT_EQ(util::cache_dir(s), "");
}
