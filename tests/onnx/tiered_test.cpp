// Tiered first runs (SessionOptions::tiered): a new plan runs on the regular
// kernels while its tensor-core pipelines compile, and switches once they
// are ready. On lavapipe the tensor-core kernels run emulated
// (WGNN_SUBGROUP_MATMUL=emulate: the same generated kernel, scalar code in
// place of the subgroup matrices); each result is checked against a double
// reference computed here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "scoped_env.h"
#include "error_of.h"
#include "gpu_fixture.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

namespace fs = std::filesystem;
using namespace wgnn;
using wgnn::test::ScopedSetting;
using onnx_import::Session;
using onnx_import::SessionOptions;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;

namespace {


constexpr int64_t kM = 64, kK = 128, kN = 64;

// Y = Relu(X @ W), X [64, 128], W [128, 64]: a product the tensor-core
// kernel takes in float16 mode.
std::string model(const std::vector<float>& w) {
  ModelBuilder b;
  b.input("X", {kM, kK});
  b.output("Y", {kM, kN});
  b.init_f32("W", {kK, kN}, w, true);
  b.node("MatMul", {"X", "W"}, {"P"});
  b.node("Relu", {"P"}, {"Y"});
  return b.save("tiered_matmul.onnx");
}

std::vector<float> seeded(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// The setting of the tests that tier: the tensor-core kernels emulated, no
// grace period, WGNN_TIERED as if unset (empty), and a Context without the
// disk cache (the tensor-core pipeline is compiled now, so it is not ready
// when the first plan is recorded).
gpu::ContextOptions no_disk_cache() {
  gpu::ContextOptions co;
  co.pipeline_cache = false;
  return co;
}
struct Emulated {
  ScopedSetting emulate{"WGNN_SUBGROUP_MATMUL", "emulate"};
  ScopedSetting grace{"WGNN_TIER_GRACE_MS", "0"};
  ScopedSetting unset{"WGNN_TIERED", ""};
  gpu::Context ctx{test::options(no_disk_cache())};
};

SessionOptions fp16_options() {
  SessionOptions o;
  o.fp16 = true;
  return o;
}

HostTensor input_of(const std::vector<float>& x) {
  HostTensor in(DType::F32, {kM, kK});
  std::memcpy(in.data.data(), x.data(), in.data.size());
  return in;
}

// A Session whose first plan tiered. It tiers only if its tensor-core
// pipeline is still compiling when recording ends; on a busy machine
// lavapipe's compile thread may finish first, and there is no switch to
// test. Then `abandon` finishes what `first` started, and the session is
// made again on a new Context (a new compile), up to five times.
struct TieredSession {
  std::unique_ptr<Emulated> e;
  std::unique_ptr<Session> s;
};
template <class First, class Abandon>
TieredSession tiered_session(const std::string& path, const SessionOptions& o, First first, Abandon abandon) {
  TieredSession t;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (t.s) abandon(*t.s);
    t.s.reset();
    t.e.reset();  // its variables put back before the next sets them
    t.e = std::make_unique<Emulated>();
    t.s = std::make_unique<Session>(t.e->ctx, path, o);
    first(*t.s);
    if (t.s->tiered_plans() == 1) break;
  }
  return t;
}

bool uses_tensor_cores(Session& s) {
  for (const auto& d : s.graph().dispatches())
    if (d.pipeline->name().find("subgroup matmul") != std::string::npos) return true;
  return false;
}

// Within float16 rounding of the operands and result (K = 128 terms of |x w| <= 1).
void expect_close(const HostTensor& y, const std::vector<float>& x, const std::vector<float>& w) {
  ASSERT_EQ(y.shape, (Shape{kM, kN}));
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < kK; ++k) acc += double(x[size_t(i * kK + k)]) * double(w[size_t(k * kN + j)]);
      const double want = std::max(acc, 0.0);
      ASSERT_NEAR(y.as<float>()[i * kN + j], want, 0.05 + 0.005 * std::fabs(want)) << i << "," << j;
    }
}

}  // namespace

TEST(Tiered, FirstRunsOnRegularKernelsThenSwitchesToTensorCores) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";
  const std::vector<float> w = seeded(size_t(kK * kN), 1), x = seeded(size_t(kM * kK), 2);
  SessionOptions o = fp16_options();
  o.tiered = true;
  const HostTensor in = input_of(x);
  std::map<std::string, HostTensor> y;
  TieredSession t = tiered_session(
      model(w), o, [&](Session& s) { y = s.run({{"X", in}}); }, [](Session&) {});
  Session& s = *t.s;
  ASSERT_EQ(s.tiered_plans(), 1);
  EXPECT_EQ(s.tier_ups(), 0);
  EXPECT_FALSE(uses_tensor_cores(s));
  expect_close(y.at("Y"), x, w);

  // Later runs switch once the tensor-core pipeline is ready; each is right.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (s.tier_ups() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    y = s.run({{"X", in}});
    expect_close(y.at("Y"), x, w);
  }
  ASSERT_EQ(s.tier_ups(), 1);
  EXPECT_TRUE(uses_tensor_cores(s));
  y = s.run({{"X", in}});
  expect_close(y.at("Y"), x, w);
  EXPECT_EQ(s.builds(), 1);  // one plan, whichever kernels it ran on
  EXPECT_EQ(s.plans(), 1);
}

TEST(Tiered, OnByDefaultAndSettleSwitchesAtOnce) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";
  const std::vector<float> w = seeded(size_t(kK * kN), 7), x = seeded(size_t(kM * kK), 8);
  const SessionOptions o = fp16_options();  // tiered as it comes
  const HostTensor in = input_of(x);
  std::map<std::string, HostTensor> y;
  TieredSession t = tiered_session(
      model(w), o, [&](Session& s) { y = s.run({{"X", in}}); }, [](Session&) {});
  Session& s = *t.s;
  ASSERT_EQ(s.tiered_plans(), 1);
  EXPECT_FALSE(uses_tensor_cores(s));
  expect_close(y.at("Y"), x, w);
  // settle() waits for the compile and switches without a run.
  s.settle();
  EXPECT_EQ(s.tier_ups(), 1);
  EXPECT_TRUE(uses_tensor_cores(s));
  y = s.run({{"X", in}});
  expect_close(y.at("Y"), x, w);
  EXPECT_EQ(s.builds(), 1);
  s.settle();  // nothing left to switch
  EXPECT_EQ(s.tier_ups(), 1);
}

TEST(Tiered, OffRunsTheTensorCoresFromTheFirstRun) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";
  Emulated e;
  const std::vector<float> w = seeded(size_t(kK * kN), 9), x = seeded(size_t(kM * kK), 10);
  SessionOptions o = fp16_options();
  o.tiered = false;
  Session s(e.ctx, model(w), o);
  const HostTensor in = input_of(x);
  const auto y = s.run({{"X", in}});
  EXPECT_EQ(s.tiered_plans(), 0);
  EXPECT_TRUE(uses_tensor_cores(s));
  expect_close(y.at("Y"), x, w);
}

// A pipelined loop (start the next run before finishing the last, as
// remove-bg's folder does) always has a run in flight; the plan still
// switches once the tensor-core pipelines are ready, and every run's
// outputs, before and after, are its own.
TEST(Tiered, APipelinedLoopSwitchesToo) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";
  const std::vector<float> w = seeded(size_t(kK * kN), 11);
  std::vector<std::vector<float>> xs;
  for (uint32_t k = 0; k < 3; ++k) xs.push_back(seeded(size_t(kM * kK), 12 + k));
  const SessionOptions o = fp16_options();
  const auto input = [&](size_t i) { return std::map<std::string, HostTensor>{{"X", input_of(xs[i % xs.size()])}}; };
  size_t started = 0, finished = 0;
  TieredSession t = tiered_session(
      model(w), o, [&](Session& s) { s.start(input(started++)); },
      [&](Session& s) {
        std::map<std::string, HostTensor> out;
        s.finish(out);
        expect_close(out.at("Y"), xs[finished++ % xs.size()], w);
      });
  Session& s = *t.s;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (s.tier_ups() == 0 && std::chrono::steady_clock::now() < until) {
    s.start(input(started++));  // queued behind the one in flight
    std::map<std::string, HostTensor> out;
    s.finish(out);
    expect_close(out.at("Y"), xs[finished++ % xs.size()], w);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(s.tiered_plans(), 1);
  ASSERT_EQ(s.tier_ups(), 1);
  EXPECT_TRUE(uses_tensor_cores(s));
  for (int i = 0; i < 3; ++i) {
    s.start(input(started++));
    std::map<std::string, HostTensor> out;
    s.finish(out);
    expect_close(out.at("Y"), xs[finished++ % xs.size()], w);
  }
  std::map<std::string, HostTensor> out;
  s.finish(out);
  expect_close(out.at("Y"), xs[finished++ % xs.size()], w);
  EXPECT_EQ(started, finished);
  EXPECT_EQ(s.builds(), 1);
}

TEST(Tiered, NotWhereThereAreNoTensorCores) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";
  ScopedSetting off("WGNN_SUBGROUP_MATMUL", "0");
  ScopedSetting grace("WGNN_TIER_GRACE_MS", "0");
  const std::vector<float> w = seeded(size_t(kK * kN), 3), x = seeded(size_t(kM * kK), 4);
  SessionOptions o = fp16_options();
  o.tiered = true;
  Session s(test::ctx(), model(w), o);
  const HostTensor in = input_of(x);
  const auto y = s.run({{"X", in}});
  EXPECT_EQ(s.tiered_plans(), 0);
  EXPECT_FALSE(uses_tensor_cores(s));
  expect_close(y.at("Y"), x, w);
}

TEST(Tiered, JunkInTheEnvironmentIsAnError) {
  const std::vector<float> w = seeded(size_t(kK * kN), 5);
  const std::string path = model(w);
  {
    ScopedSetting junk("WGNN_TIERED", "yes");
    EXPECT_THAT(test::error_of([&] { Session s(test::ctx(), path); }), HasSubstr("WGNN_TIERED='yes'"));
  }
  {
    ScopedSetting junk("WGNN_TIER_GRACE_MS", "-5");
    EXPECT_THAT(test::error_of([&] { Session s(test::ctx(), path); }), HasSubstr("WGNN_TIER_GRACE_MS='-5'"));
  }
  {
    ScopedSetting junk("WGNN_TIER_DISK_WAIT_MS", "1s");
    EXPECT_THAT(test::error_of([&] { Session s(test::ctx(), path); }), HasSubstr("WGNN_TIER_DISK_WAIT_MS='1s'"));
  }
}

// With the pipeline cache on disk, the disk cache decides: a blob missing
// is a compile, so a cold process tiers at once, however long the grace
// (20 s here, which the emulated kernel's compile fits in); a warm process
// finds every blob and waits for its tensor-core pipelines instead of
// recording a regular plan, so it runs them from the first run.
TEST(Tiered, TheDiskCacheDecidesBetweenWaitingAndTiering) {
  if (!test::ctx().features().shader_f16) GTEST_SKIP() << "float16 mode needs shader-f16, which this adapter lacks";
  ScopedSetting emulate("WGNN_SUBGROUP_MATMUL", "emulate");
  ScopedSetting grace("WGNN_TIER_GRACE_MS", "20000");
  ScopedSetting disk_wait("WGNN_TIER_DISK_WAIT_MS", "600000");
  ScopedSetting unset("WGNN_TIERED", "");
  const fs::path dir = fs::temp_directory_path() / ("wgnn_tiered_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  gpu::ContextOptions co;
  co.pipeline_cache = true;
  co.cache_dir = dir.string();
  const std::vector<float> w = seeded(size_t(kK * kN), 21), x = seeded(size_t(kM * kK), 22);
  const std::string path = model(w);
  const HostTensor in = input_of(x);
  // As in tiered_session: the compile can win the race with the recording
  // on a busy machine; then again from an empty cache, up to five times.
  for (int attempt = 0; attempt < 5; ++attempt) {
    fs::remove_all(dir);
    gpu::Context cold(test::options(co));
    ASSERT_TRUE(cold.disk_cache_stats().enabled) << cold.disk_cache_stats().why_off;
    Session s(cold, path, fp16_options());
    const auto y = s.run({{"X", in}});
    if (s.tiered_plans() == 0 && attempt < 4) continue;
    EXPECT_EQ(s.tiered_plans(), 1);
    EXPECT_FALSE(uses_tensor_cores(s));
    EXPECT_LT(s.last_build_phases().tier_wait_ms, 20000.0);
    expect_close(y.at("Y"), x, w);
    s.settle();  // the tensor-core pipeline compiled, and stored on disk
    EXPECT_TRUE(uses_tensor_cores(s));
    break;
  }
  {
    gpu::Context warm(test::options(co));
    Session s(warm, path, fp16_options());
    const auto y = s.run({{"X", in}});
    EXPECT_GT(warm.disk_cache_stats().hits, 0u);
    EXPECT_EQ(warm.disk_cache_stats().misses, 0u);
    EXPECT_EQ(s.tiered_plans(), 0);
    EXPECT_TRUE(uses_tensor_cores(s));
    EXPECT_EQ(s.last_build_phases().regular_record_ms, 0.0);
    expect_close(y.at("Y"), x, w);
  }
  fs::remove_all(dir);
}
