// One Session, many input shapes: the plans share one copy of the weights
// (ConstantStore), are kept up to SessionOptions::max_plans, and evicting one
// frees what only it held. Results are checked against a plain C++ reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "error_of.h"
#include "gpu_fixture.h"
#include "graph/constant_store.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"
#include "scoped_env.h"

#include <unistd.h>

#include <filesystem>

using namespace wgnn;
using onnx_import::Session;
using onnx_import::SessionOptions;
using testing::HasSubstr;
using wgnn::test::error_of;
using wgnn::test::ModelBuilder;

namespace {

constexpr int64_t kIn = 8, kOut = 16;

std::vector<float> weights() {
  std::vector<float> w(static_cast<size_t>(kIn * kOut));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i) * 0.37f);
  return w;
}
std::vector<float> bias() {
  std::vector<float> b(static_cast<size_t>(kOut));
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * float(i) - 0.7f;
  return b;
}

// y = relu(x @ W + b), x [N, 8] with N dynamic.
std::string linear_relu_model() {
  ModelBuilder b;
  b.input("x", {-1, kIn}, onnx::TensorProto::FLOAT, {"batch"});
  b.output("y", {-1, kOut}, onnx::TensorProto::FLOAT, {"batch"});
  b.init_f32("W", {kIn, kOut}, weights(), true);
  b.init_f32("B", {kOut}, bias(), true);
  b.node("MatMul", {"x", "W"}, {"xw"});
  b.node("Add", {"xw", "B"}, {"z"});
  b.node("Relu", {"z"}, {"y"});
  return b.save("plan_cache_linear.onnx");
}

HostTensor input(int64_t n) {
  HostTensor t(DType::F32, {n, kIn});
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = std::cos(float(i) * 0.11f + float(n));
  return t;
}

void expect_reference(const HostTensor& x, const HostTensor& y) {
  const int64_t n = x.shape[0];
  ASSERT_EQ(y.shape, (Shape{n, kOut}));
  const std::vector<float> w = weights(), b = bias();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < kOut; ++c) {
      double acc = b[size_t(c)];
      for (int64_t k = 0; k < kIn; ++k) acc += double(x.as<float>()[r * kIn + k]) * w[size_t(k * kOut + c)];
      const double ref = std::max(0.0, acc);
      EXPECT_NEAR(y.as<float>()[r * kOut + c], ref, 1e-5 + 1e-5 * std::abs(ref)) << "row " << r << " col " << c;
    }
  }
}

}  // namespace

TEST(PlanCache, WeightsAreUploadedOnceForEveryShape) {
  Session s(test::ctx(), linear_relu_model());
  s.run({{"x", input(1)}});
  const ConstantStore::Stats first = s.constants().stats();
  EXPECT_GE(first.uploads, 2u);  // W and B at least
  EXPECT_GE(first.bytes, uint64_t(kIn * kOut + kOut) * 4);
  for (int64_t n = 2; n <= 5; ++n) {
    const HostTensor x = input(n);
    expect_reference(x, s.run({{"x", x}}).at("y"));
  }
  EXPECT_EQ(s.builds(), 5);
  // One plan: the five sizes record one structure and share its buffers.
  EXPECT_EQ(s.plans(), 1);
  EXPECT_EQ(s.plan_sizes(), 5);
  const ConstantStore::Stats after = s.constants().stats();
  // The four later plans uploaded nothing the first one had: W and B again
  // are reuses, and the GPU holds the same bytes as after the first build.
  EXPECT_EQ(after.bytes, first.bytes);
  EXPECT_EQ(after.uploads, first.uploads);
  EXPECT_GE(after.reused_bytes, 4 * uint64_t(kIn * kOut + kOut) * 4);
  EXPECT_THAT(s.summary(), HasSubstr("uploaded once for all plans"));
  EXPECT_THAT(s.summary(), HasSubstr("1 plan kept for 5 sets of input shapes"));
  EXPECT_THAT(s.summary(), HasSubstr("(5 built"));
  // The first shape again: its plan is still there, no build.
  expect_reference(input(1), s.run({{"x", input(1)}}).at("y"));
  EXPECT_EQ(s.builds(), 5);
}

namespace {
// x [N, 8]; c, a bool read on the host: y = relu(x) if c, else exp(-x). The
// two branches record two structures (one dispatch, two), so each is a plan
// of its own, serving every N.
std::string two_structures_model() {
  ModelBuilder b(13);
  b.input("x", {-1, kIn}, onnx::TensorProto::FLOAT, {"batch"});
  b.input("c", {}, onnx::TensorProto::BOOL);
  b.output("y", {-1, kIn}, onnx::TensorProto::FLOAT, {"batch"});
  auto branch = [](const std::string& name, std::vector<std::string> ops) {
    onnx::GraphProto g;
    g.set_name(name);
    std::string v = "x";
    for (size_t i = 0; i < ops.size(); ++i) {
      auto* n = g.add_node();
      n->set_op_type(ops[i]);
      n->add_input(v);
      v = name + "_" + std::to_string(i);
      n->add_output(v);
    }
    auto* o = g.add_output();
    o->set_name(v);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return g;
  };
  auto* n = b.node("If", {"c"}, {"y"});
  for (auto [attr, g] : {std::pair<const char*, onnx::GraphProto>{"then_branch", branch("pos", {"Relu"})},
                         {"else_branch", branch("neg", {"Neg", "Exp"})}}) {
    auto* a = n->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = g;
  }
  return b.save("plan_cache_two_structures.onnx");
}

HostTensor flag(bool v) {
  HostTensor t(DType::Bool, {});
  t.data[0] = v ? 1 : 0;
  return t;
}

void expect_branch(const HostTensor& x, bool c, const HostTensor& y) {
  ASSERT_EQ(y.shape, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.as<float>()[i], ref = c ? std::max(0.0, v) : std::exp(-v);
    EXPECT_NEAR(y.as<float>()[i], ref, 1e-5 + 1e-5 * std::abs(ref)) << "element " << i << ", c " << c;
  }
}
}  // namespace

TEST(PlanCache, LeastRecentlyUsedPlanIsEvictedWithAllItsSizes) {
  SessionOptions o;
  o.max_plans = 1;
  Session s(test::ctx(), two_structures_model(), o);
  for (int64_t n : {1, 2, 3}) expect_branch(input(n), true, s.run({{"x", input(n)}, {"c", flag(true)}}).at("y"));
  EXPECT_EQ(s.plans(), 1);
  EXPECT_EQ(s.plan_sizes(), 3);
  EXPECT_EQ(s.evictions(), 0);
  // The other branch: a second plan, over max_plans: the first goes, its three sizes with it.
  expect_branch(input(2), false, s.run({{"x", input(2)}, {"c", flag(false)}}).at("y"));
  EXPECT_EQ(s.plans(), 1);
  EXPECT_EQ(s.plan_sizes(), 1);
  EXPECT_EQ(s.evictions(), 3);
  EXPECT_EQ(s.builds(), 4);
  // Back again: built anew, evicting the other.
  expect_branch(input(3), true, s.run({{"x", input(3)}, {"c", flag(true)}}).at("y"));
  EXPECT_EQ(s.builds(), 5);
  EXPECT_EQ(s.evictions(), 4);
  EXPECT_THAT(s.summary(), HasSubstr("4 evicted"));
}

TEST(PlanCache, TwoPlansKeepTheirSizesApartAndEachComputesItsOwn) {
  Session s(test::ctx(), two_structures_model());
  // Interleaved: each run's plan grew or reused buffers the other plan does not share.
  for (int64_t n : {4, 1, 9, 2, 4, 9}) {
    for (bool c : {true, false}) expect_branch(input(n), c, s.run({{"x", input(n)}, {"c", flag(c)}}).at("y"));
  }
  EXPECT_EQ(s.plans(), 2);
  EXPECT_EQ(s.plan_sizes(), 8);
  EXPECT_EQ(s.builds(), 8);
  EXPECT_EQ(s.evictions(), 0);
}

TEST(PlanCache, APlanKeepsAtMostMaxPlanSizes) {
  SessionOptions o;
  o.max_plan_sizes = 2;
  Session s(test::ctx(), linear_relu_model(), o);
  s.run({{"x", input(1)}});
  s.run({{"x", input(2)}});
  s.run({{"x", input(1)}});  // 1 is now more recent than 2
  s.run({{"x", input(3)}});  // evicts size 2
  EXPECT_EQ(s.plans(), 1);
  EXPECT_EQ(s.plan_sizes(), 2);
  EXPECT_EQ(s.evictions(), 1);
  EXPECT_EQ(s.builds(), 3);
  s.run({{"x", input(1)}});  // kept: no build
  EXPECT_EQ(s.builds(), 3);
  const HostTensor x2 = input(2);
  expect_reference(x2, s.run({{"x", x2}}).at("y"));  // evicted: built again (evicts 3)
  EXPECT_EQ(s.builds(), 4);
  EXPECT_EQ(s.evictions(), 2);
  const uint64_t weight_bytes = s.constants().stats().bytes;
  // Larger batches may record another structure (the product's kernel
  // changes with the rows): then a second plan, each keeping two sizes.
  for (int64_t n = 4; n <= 12; ++n) expect_reference(input(n), s.run({{"x", input(n)}}).at("y"));
  EXPECT_LE(s.plan_sizes(), 2 * s.plans());
  // Memory stays flat: one copy of the weights whatever was evicted.
  EXPECT_EQ(s.constants().stats().bytes, weight_bytes);
}

// y = concat(relu(x), -x) along the last dim, x [1, N] with N dynamic.
std::string relu_neg_concat_model() {
  ModelBuilder b;
  b.input("x", {1, -1}, onnx::TensorProto::FLOAT, {"", "n"});
  b.output("y", {1, -1}, onnx::TensorProto::FLOAT, {"", "n2"});
  b.node("Relu", {"x"}, {"r"});
  b.node("Neg", {"x"}, {"m"});
  ModelBuilder::attr_int(b.node("Concat", {"r", "m"}, {"y"}), "axis", 1);
  return b.save("plan_cache_relu_neg_concat.onnx");
}

// Size classes (SessionOptions::size_classes): a later size of the first
// size's class (inputs within one power of 4 of elements) replays its
// structural choices. Here the first size's parts are not a whole number
// of 16 bytes, so they are copied into the result; the second size's could
// be placed, and they are copied too: one plan for both. Without classes each
// size makes its own choice: two plans. Every size computes its values.
TEST(PlanCache, SizesOfOneClassReplayTheFirstSizesStructuralChoices) {
  const uint64_t align = std::max<uint64_t>(test::ctx().limits().min_storage_buffer_offset_alignment, 16);
  const int64_t aligned = int64_t(align / 4) * 2, unaligned = aligned + 2;  // 8 bytes past 16: never placed
  const std::string model = relu_neg_concat_model();
  for (const bool classes : {true, false}) {
    SCOPED_TRACE(classes ? "size classes" : "no size classes");
    SessionOptions o;
    o.size_classes = classes;
    Session s(test::ctx(), model, o);
    for (const int64_t n : {unaligned, aligned, unaligned}) {
      HostTensor x(DType::F32, {1, n});
      for (int64_t i = 0; i < n; ++i) x.as<float>()[i] = std::sin(float(i) * 0.3f + float(n));
      const HostTensor y = s.run({{"x", x}}).at("y");
      ASSERT_EQ(y.shape, (Shape{1, 2 * n}));
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(y.as<float>()[i], std::max(0.f, x.as<float>()[i])) << i;
        EXPECT_EQ(y.as<float>()[n + i], -x.as<float>()[i]) << i;
      }
    }
    EXPECT_EQ(s.plan_sizes(), 2);
    EXPECT_EQ(s.plans(), classes ? 1 : 2);
  }
}

// Session::build records and prepares a size's plan without running it:
// a later run at that size builds nothing, and computes its values.
TEST(PlanCache, BuildMakesASizesPlanAheadOfItsRun) {
  Session s(test::ctx(), linear_relu_model());
  s.build({{"x", input(3)}});
  s.build({{"x", input(5)}});
  EXPECT_EQ(s.builds(), 2);
  EXPECT_EQ(s.plan_sizes(), 2);
  const HostTensor x = input(3);
  expect_reference(x, s.run({{"x", x}}).at("y"));
  const HostTensor x5 = input(5);
  expect_reference(x5, s.run({{"x", x5}}).at("y"));
  EXPECT_EQ(s.builds(), 2) << "both sizes were built ahead";
  EXPECT_THAT(error_of([&] { s.build({{"x", HostTensor(DType::F32, {3, kIn + 1})}}); }), HasSubstr("x"));
}

TEST(PlanCache, MaxPlansMustBePositive) {
  SessionOptions o;
  o.max_plans = 0;
  EXPECT_THAT(error_of([&] { Session s(test::ctx(), linear_relu_model(), o); }),
              HasSubstr("at least one plan must be kept"));
  o.max_plans = 1;
  o.max_plan_sizes = 0;
  EXPECT_THAT(error_of([&] { Session s(test::ctx(), linear_relu_model(), o); }),
              HasSubstr("at least one size must be kept"));
}

TEST(ConstantStore, GraphsShareEqualConstantsAndFreeThemWithTheLast) {
  ConstantStore store(test::ctx());
  const std::vector<float> w = weights();
  const std::vector<float> other = bias();
  {
    auto g1 = std::make_unique<Graph>(test::ctx());
    g1->set_constant_store(&store);
    TensorRef a = g1->add_constant({kIn, kOut}, DType::F32, w.data(), "w");
    g1->add_constant({kOut}, DType::F32, other.data(), "b");
    EXPECT_EQ(store.stats().uploads, 2u);
    EXPECT_EQ(store.stats().entries, 2u);
    {
      Graph g2(test::ctx());
      g2.set_constant_store(&store);
      TensorRef a2 = g2.add_constant({kIn, kOut}, DType::F32, w.data(), "w again");
      EXPECT_EQ(store.stats().uploads, 2u);
      EXPECT_EQ(store.stats().reuses, 1u);
      EXPECT_EQ(g2.info(a2).buffer.handle(), g1->info(a).buffer.handle());
      // The same bytes with another shape are another constant.
      g2.add_constant({kOut, kIn}, DType::F32, w.data(), "w transposed shape");
      EXPECT_EQ(store.stats().uploads, 3u);
      // Shared constants are read-only.
      EXPECT_THAT(error_of([&] { g2.write(a2, w.data(), w.size() * 4); }), HasSubstr("cannot be written"));
      // What the store holds reads back as written.
      EXPECT_EQ(g2.read<float>(a2), w);
    }
    // g2 is gone: its own constant is freed, the shared one is kept for g1.
    EXPECT_EQ(store.stats().entries, 2u);
    EXPECT_EQ(g1->read<float>(a), w);
  }
  EXPECT_EQ(store.stats().entries, 0u);
  EXPECT_EQ(store.stats().bytes, 0u);
}

TEST(ConstantStore, AKernelMayNotWriteASharedConstant) {
  ConstantStore store(test::ctx());
  Graph g(test::ctx());
  g.set_constant_store(&store);
  const std::vector<float> w = weights();
  TensorRef c = g.add_constant({kIn * kOut}, DType::F32, w.data(), "w");
  // A kernel that writes its one binding, bound to the shared constant.
  const gpu::Pipeline& p = test::ctx().pipeline("writes_its_binding", R"(
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(1) fn main() { y[0] = 1.0; })");
  g.add_dispatch(p, {Binding::of(c)}, gpu::Grid{1, 1, 1}, "test.write");
  EXPECT_THAT(error_of([&] { g.prepare(); }), HasSubstr("shared with other graphs"));
}

TEST(ConstantStore, AMemoFindsTheConstantWithoutConvertingAgain) {
  ConstantStore store(test::ctx());
  const std::vector<float> w = weights();
  int made = 0;
  auto make = [&](HostTensor& t) -> const HostTensor& {
    ++made;
    t = HostTensor(DType::F32, {kIn, kOut});
    std::memcpy(t.data.data(), w.data(), t.data.size());
    return t;
  };
  {
    Graph g1(test::ctx()), g2(test::ctx());
    g1.set_constant_store(&store);
    g2.set_constant_store(&store);
    TensorRef a = g1.add_memo_constant("w as float32", make, "w");
    TensorRef b = g2.add_memo_constant("w as float32", make, "w");
    EXPECT_EQ(made, 1);  // the second graph found it by its memo
    EXPECT_EQ(g2.info(b).buffer.handle(), g1.info(a).buffer.handle());
    EXPECT_EQ(g2.info(b).shape, (Shape{kIn, kOut}));
    EXPECT_EQ(g2.read<float>(b), w);
    // Another memo with the same content is the same constant (by content).
    g2.add_memo_constant("another name for it", make, "w2");
    EXPECT_EQ(made, 2);
    EXPECT_EQ(store.stats().uploads, 1u);
  }
  // Freed with its last graph: the memo no longer finds it, so it is made again.
  EXPECT_EQ(store.stats().entries, 0u);
  Graph g3(test::ctx());
  g3.set_constant_store(&store);
  TensorRef c = g3.add_memo_constant("w as float32", make, "w");
  EXPECT_EQ(made, 3);
  EXPECT_EQ(g3.read<float>(c), w);
}

// A Conv + BatchNormalization in float32 mode folds the normalization into
// the weights; a later plan (another input size) finds the folded weights
// in the store and uploads nothing again. Each size against a double
// reference of the unfused chain.
TEST(PlanCache, FoldedConvWeightsAreFoundAgainForEveryShape) {
  constexpr int64_t kCi = 3, kCo = 4;
  auto seq = [](size_t n, float a, float b) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = a * std::sin(float(i) * b + 0.3f);
    return v;
  };
  const std::vector<float> w = seq(kCo * kCi * 9, 0.5f, 0.7f), gamma = seq(kCo, 1.5f, 1.1f),
                           beta = seq(kCo, 0.4f, 0.9f), mean = seq(kCo, 0.3f, 1.7f);
  std::vector<float> var = seq(kCo, 0.8f, 2.3f);
  for (float& v : var) v = 0.2f + std::abs(v);
  ModelBuilder b;
  b.input("x", {1, kCi, -1, -1}, onnx::TensorProto::FLOAT, {"", "", "H", "W"});
  b.output("y", {1, kCo, -1, -1}, onnx::TensorProto::FLOAT, {"", "", "H", "W"});
  b.init_f32("w", {kCo, kCi, 3, 3}, w);
  b.init_f32("gamma", {kCo}, gamma);
  b.init_f32("beta", {kCo}, beta);
  b.init_f32("mean", {kCo}, mean);
  b.init_f32("var", {kCo}, var);
  ModelBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"y"});
  Session s(test::ctx(), b.save("plan_cache_conv_bn.onnx"));
  ConstantStore::Stats first;
  for (int64_t n = 4; n <= 7; ++n) {
    HostTensor x(DType::F32, {1, kCi, n, n});
    for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = std::cos(float(i) * 0.37f);
    const HostTensor y = s.run({{"x", x}}).at("y");
    ASSERT_EQ(y.shape, (Shape{1, kCo, n, n}));
    for (int64_t o = 0; o < kCo; ++o)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < n; ++c) {
          double acc = 0;
          for (int64_t i = 0; i < kCi; ++i)
            for (int64_t dy = 0; dy < 3; ++dy)
              for (int64_t dx = 0; dx < 3; ++dx) {
                const int64_t yy = r + dy - 1, xx = c + dx - 1;
                if (yy < 0 || yy >= n || xx < 0 || xx >= n) continue;
                acc += double(x.as<float>()[(i * n + yy) * n + xx]) * w[size_t(((o * kCi + i) * 3 + dy) * 3 + dx)];
              }
          const size_t oi = size_t(o);
          const double ref = (acc - mean[oi]) / std::sqrt(double(var[oi]) + 1e-5) * gamma[oi] + beta[oi];
          ASSERT_NEAR(y.as<float>()[(o * n + r) * n + c], ref, 1e-4 + 1e-4 * std::abs(ref)) << n << " " << o;
        }
    if (n == 4) first = s.constants().stats();
  }
  EXPECT_EQ(s.builds(), 4);
  const ConstantStore::Stats after = s.constants().stats();
  // Each later plan found the folded weights by their memo (no fold, no
  // hash): the fused chain uploads nothing else of the model's own (the
  // normalization's parameters are folded, the bias is computed).
  EXPECT_EQ(after.memo_hits, first.memo_hits + 3);
  EXPECT_GE(after.reused_bytes, first.reused_bytes + 3 * uint64_t(w.size()) * 4);
}

// A later Session (a new Context stands for a new process) with the same
// model and options asks for the pipelines the first one used when it
// loads, from the list the first left in the pipeline cache: its first run
// creates no pipeline. Other options or the off switch prefetch nothing.
TEST(PlanCache, ALaterProcessAsksForItsPipelinesWhenItLoads) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("wgnn-prefetch-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  gpu::ContextOptions co;
  co.cache_dir = dir.string();
  const std::string model = linear_relu_model();
  const HostTensor x = input(3);
  size_t used = 0;
  {
    gpu::Context c(test::options(co));
    Session s(c, model);
    EXPECT_EQ(s.prefetched_pipelines(), 0u);
    expect_reference(x, s.run({{"x", x}}).at("y"));
    used = s.graph().pipelines().size();
    ASSERT_GE(used, 1u);
  }
  {
    gpu::Context c(test::options(co));
    Session s(c, model);
    EXPECT_EQ(s.prefetched_pipelines(), used);
    const uint64_t created = c.creation_stats().pipelines_created;
    EXPECT_EQ(created, used);
    expect_reference(x, s.run({{"x", x}}).at("y"));
    EXPECT_EQ(c.creation_stats().pipelines_created, created);
  }
  {
    gpu::Context c(test::options(co));
    SessionOptions o;
    o.checked = false;  // other kernels may follow: another list
    Session s(c, model, o);
    EXPECT_EQ(s.prefetched_pipelines(), 0u);
  }
  {
    test::ScopedSetting off("WGNN_PREFETCH_PIPELINES", "0");
    gpu::Context c(test::options(co));
    Session s(c, model);
    EXPECT_EQ(s.prefetched_pipelines(), 0u);
    expect_reference(x, s.run({{"x", x}}).at("y"));
  }
  {
    test::ScopedSetting junk("WGNN_PREFETCH_PIPELINES", "yes");
    gpu::Context c(test::options(co));
    EXPECT_THAT(error_of([&] { Session s(c, model); }), HasSubstr("WGNN_PREFETCH_PIPELINES='yes'"));
  }
  fs::remove_all(dir);
}

// The pipeline list keeps the sizes of the first run's readback buffers: a
// later process makes them at load on a thread of its own (where the device
// is thread-safe), and its first run makes none of them.
TEST(PlanCache, ALaterProcessMakesItsReadbackBuffersWhileItRecords) {
  if (!test::ctx().features().thread_safe) GTEST_SKIP() << "the adapter does not offer implicit-device-synchronization";
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("wgnn-readback-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // Two outputs of different sizes: y [N, 16] and sq = x * x [N, 8].
  ModelBuilder mb;
  mb.input("x", {-1, kIn}, onnx::TensorProto::FLOAT, {"batch"});
  mb.output("y", {-1, kOut}, onnx::TensorProto::FLOAT, {"batch"});
  mb.output("sq", {-1, kIn}, onnx::TensorProto::FLOAT, {"batch"});
  mb.init_f32("W", {kIn, kOut}, weights(), true);
  mb.init_f32("B", {kOut}, bias(), true);
  mb.node("MatMul", {"x", "W"}, {"xw"});
  mb.node("Add", {"xw", "B"}, {"z"});
  mb.node("Relu", {"z"}, {"y"});
  mb.node("Mul", {"x", "x"}, {"sq"});
  const std::string model = mb.save("plan_cache_two_outputs.onnx");
  const HostTensor x = input(37);
  const auto check = [&](std::map<std::string, HostTensor> out) {
    expect_reference(x, out.at("y"));
    const HostTensor& sq = out.at("sq");
    ASSERT_EQ(sq.shape, (Shape{37, kIn}));
    for (int64_t i = 0; i < sq.numel(); ++i) EXPECT_EQ(sq.as<float>()[i], x.as<float>()[i] * x.as<float>()[i]) << i;
  };
  // The buffers a process's load and first run create, counted by the
  // Context (a batch's are not: they are made on its thread).
  const auto process = [&](size_t* prefetched, const gpu::ContextOptions& co) {
    gpu::Context c(test::options(co));
    Session s(c, model);
    check(s.run({{"x", x}}));
    *prefetched = s.prefetched_readback_buffers();
    return c.buffers_created();
  };
  gpu::ContextOptions co;
  co.cache_dir = dir.string();
  size_t prefetched = 0;
  process(&prefetched, co);  // writes the list (its first run may be tiered: other buffers)
  EXPECT_EQ(prefetched, 0u);
  uint64_t warm = 0;
  {
    test::ScopedSetting off("WGNN_PREFETCH_READBACK", "0");
    warm = process(&prefetched, co);
    EXPECT_EQ(prefetched, 0u);
  }
  EXPECT_EQ(process(&prefetched, co), warm - 2);
  EXPECT_EQ(prefetched, 2u);
  gpu::ContextOptions unsafe_off = co;
  unsafe_off.thread_safe_device = false;
  EXPECT_EQ(process(&prefetched, unsafe_off), warm);
  EXPECT_EQ(prefetched, 0u);
  // Another batch size: the buffers made at load are too small for it and
  // the run makes its own (the results still right).
  {
    gpu::Context c(test::options(co));
    Session s(c, model);
    const HostTensor big = input(300);
    const auto out = s.run({{"x", big}});
    EXPECT_EQ(s.prefetched_readback_buffers(), 0u);
    EXPECT_EQ(out.at("y").shape, (Shape{300, kOut}));
    EXPECT_EQ(out.at("sq").as<float>()[299 * kIn + 7], big.as<float>()[299 * kIn + 7] * big.as<float>()[299 * kIn + 7]);
  }
  fs::remove_all(dir);
}
