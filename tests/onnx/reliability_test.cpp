// Reliability of Sessions: two models run from two threads give the bits
// they give alone (own Contexts, or one shared Context); the same model and
// input give bit-identical outputs run after run and session after session;
// device loss and out-of-memory errors are clear errors, not hangs, and a
// new Context and Session work afterwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "gpu/context.h"
#include "gpu/error.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using namespace wgnn::onnx_import;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;
using Outputs = std::map<std::string, HostTensor>;

namespace {

std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

HostTensor input_tensor(const Shape& shape, uint32_t seed) {
  HostTensor t(DType::F32, shape);
  const auto v = randoms(size_t(t.numel()), seed);
  std::memcpy(t.data.data(), v.data(), t.nbytes());
  return t;
}

// x [16, 64] -> MatMul -> Add -> Relu -> MatMul -> Softmax -> y [16, 32]
std::string mlp_model() {
  ModelBuilder b;
  b.input("x", {16, 64});
  b.output("y", {16, 32});
  b.init_f32("w1", {64, 96}, randoms(64 * 96, 1, 0.2f), true);
  b.init_f32("b1", {96}, randoms(96, 2), true);
  b.init_f32("w2", {96, 32}, randoms(96 * 32, 3, 0.2f), true);
  b.node("MatMul", {"x", "w1"}, {"h"});
  b.node("Add", {"h", "b1"}, {"hb"});
  b.node("Relu", {"hb"}, {"r"});
  b.node("MatMul", {"r", "w2"}, {"l"});
  ModelBuilder::attr_int(b.node("Softmax", {"l"}, {"y"}), "axis", -1);
  return b.save("reliability_mlp.onnx");
}

// x [1, 3, 24, 24] -> Conv 3x3 -> Sigmoid -> y; ReduceMean over H, W -> m [1, 8]
std::string conv_model() {
  ModelBuilder b;
  b.input("x", {1, 3, 24, 24});
  b.output("y", {1, 8, 24, 24});
  b.output("m", {1, 8});
  b.init_f32("w", {8, 3, 3, 3}, randoms(8 * 27, 4, 0.5f), true);
  b.init_f32("bias", {8}, randoms(8, 5), true);
  ModelBuilder::attr_ints(b.node("Conv", {"x", "w", "bias"}, {"c"}), "pads", {1, 1, 1, 1});
  b.node("Sigmoid", {"c"}, {"y"});
  auto* r = b.node("ReduceMean", {"y"}, {"m"});
  ModelBuilder::attr_ints(r, "axes", {2, 3});
  ModelBuilder::attr_int(r, "keepdims", 0);
  return b.save("reliability_conv.onnx");
}

// Long reductions and cross-workgroup combining: a convolution with a long
// reduction over few output tiles (split-K), a LayerNormalization, a
// reduce-all and a softmax.
std::string reduction_model() {
  ModelBuilder b;
  b.input("x", {1, 256, 8, 8});
  b.output("c", {1, 64, 8, 8});
  b.output("n", {1, 64, 64});
  b.output("s", {});
  b.output("p", {1, 64, 64});
  b.init_f32("w", {64, 256, 3, 3}, randoms(64 * 256 * 9, 6, 0.05f), true);
  ModelBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  b.init_i64("shape", {1, 64, 64});
  b.node("Reshape", {"c", "shape"}, {"cr"});
  b.init_f32("gamma", {64}, randoms(64, 7), true);
  b.init_f32("beta", {64}, randoms(64, 8), true);
  ModelBuilder::attr_int(b.node("LayerNormalization", {"cr", "gamma", "beta"}, {"n"}), "axis", -1);
  ModelBuilder::attr_int(b.node("ReduceSum", {"c"}, {"s"}), "keepdims", 0);
  ModelBuilder::attr_int(b.node("Softmax", {"cr"}, {"p"}), "axis", 1);
  return b.save("reliability_reduction.onnx");
}

Outputs run_once(gpu::Context& ctx, const std::string& model, const Outputs& inputs) {
  Session s(ctx, model);
  return s.run(inputs);
}

::testing::AssertionResult same_bits(const Outputs& a, const Outputs& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " outputs";
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) return ::testing::AssertionFailure() << "output '" << name << "' missing";
    const HostTensor& u = it->second;
    if (t.dtype != u.dtype || t.shape != u.shape) {
      return ::testing::AssertionFailure() << "output '" << name << "': dtype or shape differ";
    }
    if (t.data != u.data) {
      size_t i = 0;
      while (t.data[i] == u.data[i]) ++i;
      return ::testing::AssertionFailure() << "output '" << name << "' differs first at byte " << i << " of "
                                           << t.data.size();
    }
  }
  return ::testing::AssertionSuccess();
}

const Outputs& mlp_inputs() {
  static const Outputs in{{"x", input_tensor({16, 64}, 11)}};
  return in;
}
const Outputs& conv_inputs() {
  static const Outputs in{{"x", input_tensor({1, 3, 24, 24}, 12)}};
  return in;
}

}  // namespace

TEST(Threads, TwoModelsOnTwoThreadsWithOwnContexts) {
  const std::string mlp = mlp_model(), conv = conv_model();
  Outputs ref_mlp, ref_conv;
  {
    gpu::Context c;
    ref_mlp = run_once(c, mlp, mlp_inputs());
  }
  {
    gpu::Context c;
    ref_conv = run_once(c, conv, conv_inputs());
  }
  ASSERT_EQ(ref_mlp.at("y").shape, (Shape{16, 32}));
  ASSERT_EQ(ref_conv.at("m").shape, (Shape{1, 8}));
  constexpr int kRuns = 3;
  std::vector<Outputs> got_mlp(kRuns), got_conv(kRuns);
  std::string error_mlp, error_conv;
  auto worker = [](const std::string& model, const Outputs& inputs, std::vector<Outputs>& got, std::string& error) {
    try {
      gpu::Context c;  // created concurrently with the other thread's
      Session s(c, model);
      for (auto& g : got) g = s.run(inputs);
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  std::thread t1(worker, std::cref(mlp), std::cref(mlp_inputs()), std::ref(got_mlp), std::ref(error_mlp));
  std::thread t2(worker, std::cref(conv), std::cref(conv_inputs()), std::ref(got_conv), std::ref(error_conv));
  t1.join();
  t2.join();
  ASSERT_EQ(error_mlp, "");
  ASSERT_EQ(error_conv, "");
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_TRUE(same_bits(got_mlp[size_t(i)], ref_mlp)) << "mlp run " << i;
    EXPECT_TRUE(same_bits(got_conv[size_t(i)], ref_conv)) << "conv run " << i;
  }
}

TEST(Threads, TwoModelsOnTwoThreadsSharingOneContext) {
  const std::string mlp = mlp_model(), conv = conv_model();
  gpu::Context ctx;
  const Outputs ref_mlp = run_once(ctx, mlp, mlp_inputs());
  const Outputs ref_conv = run_once(ctx, conv, conv_inputs());
  Session a(ctx, mlp), b(ctx, conv);
  constexpr int kRuns = 4;
  std::vector<Outputs> got_a(kRuns), got_b(kRuns);
  std::string error_a, error_b;
  auto worker = [](Session& s, const Outputs& inputs, std::vector<Outputs>& got, std::string& error) {
    try {
      for (auto& g : got) g = s.run(inputs);
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  std::thread t1(worker, std::ref(a), std::cref(mlp_inputs()), std::ref(got_a), std::ref(error_a));
  std::thread t2(worker, std::ref(b), std::cref(conv_inputs()), std::ref(got_b), std::ref(error_b));
  t1.join();
  t2.join();
  ASSERT_EQ(error_a, "");
  ASSERT_EQ(error_b, "");
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_TRUE(same_bits(got_a[size_t(i)], ref_mlp)) << "mlp run " << i;
    EXPECT_TRUE(same_bits(got_b[size_t(i)], ref_conv)) << "conv run " << i;
  }
}

TEST(Determinism, SameModelAndInputGiveIdenticalBits) {
  const std::string model = reduction_model();
  const Outputs inputs{{"x", input_tensor({1, 256, 8, 8}, 13)}};
  gpu::Context c1;
  Session s(c1, model);
  const Outputs first = s.run(inputs);
  // The convolution does take the split-K path (partial sums, then a sum).
  bool split_k = false;
  for (const auto& d : s.graph().dispatches()) split_k |= d.label.find("splitk sum") != std::string::npos;
  EXPECT_TRUE(split_k);
  EXPECT_TRUE(same_bits(s.run(inputs), first)) << "second run, same session";
  EXPECT_TRUE(same_bits(s.run(inputs), first)) << "third run, same session";
  gpu::Context c2;
  EXPECT_TRUE(same_bits(run_once(c2, model, inputs), first)) << "new session on a new Context";
  // Not all zeros or NaN: the comparison compares something.
  const float sum = first.at("s").as<float>()[0];
  EXPECT_TRUE(std::isfinite(sum));
  EXPECT_NE(first.at("c").data, util::HostBytes(first.at("c").data.size(), 0));
}

TEST(Determinism, IsnetTwiceGivesIdenticalBits) {
  const std::filesystem::path model =
      std::filesystem::path(WGNN_SOURCE_DIR) / ".deps" / "models" / "isnet_any_size.onnx";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " is missing (scripts/setup derives it)";
  gpu::Context c;
  Session s(c, model.string());
  ASSERT_EQ(s.inputs().size(), 1u);
  const std::string name = s.inputs()[0].name;
  s.set_input_shape(name, {1, 3, 128, 128});
  const Outputs inputs{{name, input_tensor({1, 3, 128, 128}, 14)}};
  const Outputs first = s.run(inputs);
  EXPECT_TRUE(same_bits(s.run(inputs), first));
  Session s2(c, model.string());
  s2.set_input_shape(name, {1, 3, 128, 128});
  EXPECT_TRUE(same_bits(s2.run(inputs), first)) << "a second session";
}

TEST(DeviceLoss, ClearErrorThenANewContextWorks) {
  const std::string mlp = mlp_model();
  Outputs before;
  {
    gpu::Context c;
    Session s(c, mlp);
    before = s.run(mlp_inputs());
    c.force_device_loss("simulated driver reset");
    const auto t0 = std::chrono::steady_clock::now();
    try {
      s.run(mlp_inputs());
      FAIL() << "expected DeviceLost";
    } catch (const gpu::DeviceLost& e) {
      EXPECT_THAT(e.what(), HasSubstr("device was lost"));
      EXPECT_THAT(e.what(), HasSubstr("simulated driver reset"));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
    // Still lost: every later call says so, none hangs.
    EXPECT_THROW(s.run(mlp_inputs()), gpu::DeviceLost);
    EXPECT_THROW(Session(c, mlp).run(mlp_inputs()), gpu::DeviceLost);
  }
  gpu::Context fresh;
  EXPECT_TRUE(same_bits(run_once(fresh, mlp, mlp_inputs()), before));
}

TEST(DeviceLoss, OutOfMemoryIsAnErrorAndTheDeviceStaysUsable) {
  const std::string mlp = mlp_model();
  gpu::Context c;
  Session s(c, mlp);
  const Outputs before = s.run(mlp_inputs());
  c.inject_out_of_memory("simulated allocation failure");
  try {
    s.run(mlp_inputs());
    FAIL() << "expected GpuError";
  } catch (const gpu::DeviceLost& e) {
    FAIL() << "out of memory is not a device loss: " << e.what();
  } catch (const gpu::GpuError& e) {
    EXPECT_THAT(e.what(), HasSubstr("out of memory"));
    EXPECT_THAT(e.what(), HasSubstr("simulated allocation failure"));
  }
  EXPECT_TRUE(same_bits(s.run(mlp_inputs()), before));
}

// Found by fuzzing (scripts/fuzz session): a shape given as data may ask for
// any size; the host tensor is refused before it is allocated, naming the node.
TEST(FuzzFindings, ConstantOfShapeOfAHugeShapeIsAnError) {
  ModelBuilder b;
  b.input("x", {2}, onnx::TensorProto::INT64);
  b.output("y", {-1, -1});
  b.node("ConstantOfShape", {"x"}, {"y"});
  const std::string model = b.save("fuzz_constant_of_shape.onnx");
  gpu::Context c;
  Session s(c, model);
  auto shape_input = [](int64_t d0, int64_t d1) {
    HostTensor t(DType::I64, {2});
    t.as<int64_t>()[0] = d0;
    t.as<int64_t>()[1] = d1;
    return Outputs{{"x", t}};
  };
  try {
    s.run(shape_input(int64_t(1) << 40, int64_t(1) << 40));  // 2^80 elements: overflows int64
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'y' (ConstantOfShape"));
    EXPECT_THAT(e.what(), HasSubstr("more elements than int64 counts"));
  }
  try {
    s.run(shape_input(int64_t(1) << 30, int64_t(1) << 20));  // 4 PiB of float32
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'y' (ConstantOfShape"));
    EXPECT_THAT(e.what(), HasSubstr("over the limit of"));
  }
  const Outputs ok = s.run(shape_input(2, 3));
  EXPECT_EQ(ok.at("y").shape, (Shape{2, 3}));
}

// Found by fuzzing: Reshape to a target shape given as data whose product
// overflows int64.
TEST(FuzzFindings, ReshapeToAnOverflowingShapeIsAnError) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.input("shape", {3}, onnx::TensorProto::INT64);
  b.output("y", {-1, -1, -1});
  b.node("Reshape", {"x", "shape"}, {"y"});
  const std::string model = b.save("fuzz_reshape.onnx");
  gpu::Context c;
  Session s(c, model);
  HostTensor shape(DType::I64, {3});
  shape.as<int64_t>()[0] = int64_t(1) << 40;
  shape.as<int64_t>()[1] = int64_t(1) << 40;
  shape.as<int64_t>()[2] = -1;
  HostTensor x(DType::F32, {2, 3});
  try {
    s.run({{"x", x}, {"shape", shape}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'y' (Reshape"));
    EXPECT_THAT(e.what(), HasSubstr("more elements than int64 counts"));
  }
}

// Found by fuzzing: Resize to sizes given as data built per-dim tables for
// the whole requested size before checking the result against the device.
TEST(FuzzFindings, ResizeToAHugeSizeIsAnErrorBeforeItsTables) {
  ModelBuilder b;
  b.input("x", {1, 1, 4, 4});
  b.input("sizes", {4}, onnx::TensorProto::INT64);
  b.output("y", {-1, -1, -1, -1});
  b.node("Resize", {"x", "", "", "sizes"}, {"y"});
  const std::string model = b.save("fuzz_resize.onnx");
  gpu::Context c;
  Session s(c, model);
  HostTensor sizes(DType::I64, {4});
  const int64_t want[] = {1, 1, int64_t(1) << 40, 4};
  std::memcpy(sizes.data.data(), want, sizeof(want));
  try {
    s.run({{"x", HostTensor(DType::F32, {1, 1, 4, 4})}, {"sizes", sizes}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'y' (Resize"));
    EXPECT_THAT(e.what(), HasSubstr("maxStorageBufferBindingSize"));
  }
}
