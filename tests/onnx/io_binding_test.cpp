// Session::run with IO binding (onnx/session.h Feeds / Fetches): a cache
// carried from run to run on the GPU (present -> past, grown in place)
// against the same loop through host memory; outputs not asked for are not
// returned; a run that does not wait, and its run-time checks read later;
// and the errors.
#include <gmock/gmock.h>
#include <cmath>
#include <vector>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "error_of.h"
#include "gpu_fixture.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using namespace wgnn::onnx_import;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;

namespace {

HostTensor f32(const Shape& s, float start = 0.f, float step = 1.f) {
  HostTensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = start + step * float(i);
  return t;
}

// y = Reshape(x, shape), the shape a graph input: values the plan reads on the host.
std::string reshape_model() {
  ModelBuilder b;
  b.input("x", {-1});
  b.input("shape", {2}, onnx::TensorProto::INT64);
  b.output("y", {-1, -1});
  b.node("Reshape", {"x", "shape"}, {"y"});
  return b.save("io_binding_reshape.onnx");
}

// present = Concat(past, tanh(x)) along the length; y = sum over it.
std::string cache_model() {
  ModelBuilder b;
  b.input("past", {1, 2, -1, 4}, onnx::TensorProto::FLOAT, {"", "", "P"});
  b.input("x", {1, 2, 1, 4});
  b.output("present", {1, 2, -1, 4}, onnx::TensorProto::FLOAT, {"", "", "T"});
  b.output("y", {1, 2, 1, 4});
  b.node("Tanh", {"x"}, {"t"});
  ModelBuilder::attr_int(b.node("Concat", {"past", "t"}, {"present"}), "axis", 2);
  b.init_i64("axes", {2});
  b.node("ReduceSum", {"present", "axes"}, {"y"});
  return b.save("io_binding_cache.onnx");
}

TEST(IoBinding, ACacheCarriedOnTheGpuMatchesTheHostLoop) {
  Session s(test::ctx(), cache_model());
  HostTensor past_host = f32({1, 2, 2, 4}, 0.1f, 0.05f);
  DeviceTensor cache = to_device(test::ctx(), past_host, "cache");
  const gpu::Buffer first_buffer = cache.buffer;
  for (int step = 0; step < 6; ++step) {
    const HostTensor x = f32({1, 2, 1, 4}, -0.3f + 0.1f * float(step), 0.07f);
    // Through host memory.
    auto host = s.run({{"past", past_host}, {"x", x}});
    // On the GPU: the present written into the buffer the past came from.
    Feeds f;
    f.device["past"] = &cache;
    f.host["x"] = &x;
    Fetches out;
    out.device["present"].buffer = cache.buffer;
    out.host["y"];
    s.run(f, out);
    EXPECT_EQ(out.host.size(), 1u);
    EXPECT_EQ(out.host.at("y").data, host.at("y").data) << "step " << step;
    cache = std::move(out.device.at("present"));
    EXPECT_EQ(cache.shape, (Shape{1, 2, 3 + step, 4}));
    EXPECT_EQ(cache.dtype, DType::F32);
    EXPECT_EQ(to_host(test::ctx(), cache).data, host.at("present").data) << "step " << step;
    past_host = host.at("present");
  }
  // Grown by doubling: 32 bytes a step from 64 over 6 steps takes two new
  // buffers at most, not six.
  EXPECT_GE(cache.buffer.size(), cache.gpu_bytes());
  EXPECT_FALSE(cache.buffer == first_buffer);
}

TEST(IoBinding, OnlyTheOutputsAskedForAndARunThatDoesNotWait) {
  Session s(test::ctx(), cache_model());
  const HostTensor past = f32({1, 2, 3, 4}), x = f32({1, 2, 1, 4}, 0.5f);
  const auto all = s.run({{"past", past}, {"x", x}});
  Feeds f;
  f.host["past"] = &past;
  f.host["x"] = &x;
  Fetches out;
  out.device["y"];
  out.wait = false;
  s.run(f, out);
  EXPECT_TRUE(out.host.empty());
  ASSERT_EQ(out.device.size(), 1u);
  EXPECT_EQ(to_host(test::ctx(), out.device.at("y")).data, all.at("y").data);
  // Both maps empty: every output read back.
  Fetches every;
  s.run(f, every);
  EXPECT_EQ(every.host.size(), 2u);
}

// Runs that do not wait leave their run-time checks on the GPU: a Gather
// index out of range in one of them is thrown by check_deferred(), or by
// the plan's next run that waits; valid runs in between do not hide it.
TEST(IoBinding, ChecksOfRunsThatDoNotWaitAreReadLater) {
  ModelBuilder b;
  b.input("idx", {3}, onnx::TensorProto::INT64);
  b.init_f32("table", {5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  b.output("y", {3, 2});
  b.node("Gather", {"table", "idx"}, {"y"})->set_name("lookup");
  Session s(test::ctx(), b.save("io_binding_deferred_check.onnx"));
  auto ids = [](int64_t a, int64_t c) {
    HostTensor t(DType::I64, {3});
    t.as<int64_t>()[0] = a;
    t.as<int64_t>()[1] = 1;
    t.as<int64_t>()[2] = c;
    return t;
  };
  const HostTensor good = ids(0, 4), bad = ids(0, 7);
  auto submit = [&](const HostTensor& idx) {
    Feeds f;
    f.host["idx"] = &idx;
    Fetches o;
    o.device["y"];
    o.wait = false;
    s.run(f, o);
  };
  submit(good);
  s.check_deferred();  // nothing failed
  submit(bad);
  submit(good);
  EXPECT_THAT(test::error_of([&] { s.check_deferred(); }), HasSubstr("index 7 is out of range"));
  s.check_deferred();  // read once
  submit(bad);
  EXPECT_THAT(test::error_of([&] { s.run({{"idx", good}}); }), HasSubstr("index 7 is out of range"));
  EXPECT_EQ(s.run({{"idx", good}}).at("y").as<float>()[4], 8.f);
}

TEST(IoBinding, Errors) {
  Session s(test::ctx(), cache_model());
  const HostTensor past = f32({1, 2, 3, 4}), x = f32({1, 2, 1, 4});
  DeviceTensor dx = to_device(test::ctx(), x);
  auto run = [&](Feeds f, Fetches o) { s.run(f, o); };
  Feeds ok;
  ok.host["past"] = &past;
  ok.host["x"] = &x;
  Fetches unknown;
  unknown.host["nope"];
  EXPECT_THAT(test::error_of([&] { run(ok, unknown); }), HasSubstr("'nope' is not an output"));
  Fetches twice;
  twice.host["y"];
  twice.device["y"];
  EXPECT_THAT(test::error_of([&] { run(ok, twice); }), HasSubstr("asked for twice"));
  Feeds both = ok;
  both.device["x"] = &dx;
  EXPECT_THAT(test::error_of([&] { run(both, {}); }), HasSubstr("given twice"));
  Feeds empty_dev;
  DeviceTensor none;
  empty_dev.host["past"] = &past;
  empty_dev.device["x"] = &none;
  EXPECT_THAT(test::error_of([&] { run(empty_dev, {}); }), HasSubstr("no storage"));
  Feeds wrong;
  wrong.host["past"] = &past;
  DeviceTensor di = to_device(test::ctx(), HostTensor(DType::I64, {1, 2, 1, 4}));
  wrong.device["x"] = &di;
  EXPECT_THAT(test::error_of([&] { run(wrong, {}); }), HasSubstr("dtype int64"));

  // A shape input (Reshape's target) given on the GPU: its values are needed
  // on the host.
  Session r(test::ctx(), reshape_model());
  HostTensor shape(DType::I64, {2});
  shape.as<int64_t>()[0] = 2;
  shape.as<int64_t>()[1] = 3;
  DeviceTensor dshape = to_device(test::ctx(), shape);
  const HostTensor x6 = f32({6});
  Feeds rf;
  rf.host["x"] = &x6;
  rf.device["shape"] = &dshape;
  Fetches ro;
  EXPECT_THAT(test::error_of([&] { r.run(rf, ro); }), HasSubstr("given as a device tensor, but its values are needed on the host"));
}

}  // namespace

// HostInput::view: the caller's bytes are read in place (Python's arrays,
// the C API's tensors), as a HostTensor would be; an input whose values the
// plan reads on the host (Reshape's shape) is copied while the plan builds,
// and other values build another plan.
TEST(IoBinding, ViewsOfTheCallersBytesRunAsTensorsDo) {
  Session s(test::ctx(), cache_model());
  std::vector<float> past(1 * 2 * 3 * 4), x(1 * 2 * 1 * 4);
  for (size_t i = 0; i < past.size(); ++i) past[i] = 0.25f * float(i) - 1.f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f - 0.1f * float(i);
  auto views = [&] {
    Feeds f;
    f.host["past"] = HostInput::view(DType::F32, {1, 2, 3, 4}, past.data(), past.size() * 4, "past");
    f.host["x"] = HostInput::view(DType::F32, {1, 2, 1, 4}, x.data(), x.size() * 4, "x");
    return f;
  };
  auto as_tensors = [&] {
    return s.run({{"past", HostTensor(DType::F32, {1, 2, 3, 4}, past.data())},
                  {"x", HostTensor(DType::F32, {1, 2, 1, 4}, x.data())}});
  };
  for (int round = 0; round < 2; ++round) {
    const auto want = as_tensors();
    Fetches out;
    s.run(views(), out);
    ASSERT_EQ(out.host.size(), 2u);
    EXPECT_EQ(out.host.at("present").data, want.at("present").data) << "round " << round;
    EXPECT_EQ(out.host.at("y").data, want.at("y").data) << "round " << round;
    // The next run reads the bytes as they are then.
    for (float& v : x) v = std::tanh(v) + 0.3f;
  }
  EXPECT_EQ(s.builds(), 1);

  EXPECT_THAT(test::error_of([&] { HostInput::view(DType::F32, {1, 2, 1, 4}, x.data(), 31, "x"); }),
              HasSubstr("input 'x': 31 bytes for a float32 tensor of shape [1, 2, 1, 4], which takes 32"));
  Feeds absent;
  absent.host["past"];  // a default HostInput: nothing given
  absent.host["x"] = HostInput::view(DType::F32, {1, 2, 1, 4}, x.data(), 32, "x");
  Fetches o;
  EXPECT_THAT(test::error_of([&] { s.run(absent, o); }), HasSubstr("input 'past': no tensor given"));

  // Reshape's shape from a view: the plan copies it while it builds.
  Session r(test::ctx(), reshape_model());
  std::vector<float> x6(6);
  for (size_t i = 0; i < 6; ++i) x6[i] = float(i) * 1.5f;
  std::vector<int64_t> shape{2, 3};
  for (int round = 0; round < 3; ++round) {
    if (round == 1) shape = {3, 2};
    Feeds f;
    f.host["x"] = HostInput::view(DType::F32, {6}, x6.data(), 24, "x");
    f.host["shape"] = HostInput::view(DType::I64, {2}, shape.data(), 16, "shape");
    Fetches out;
    r.run(f, out);
    const HostTensor& y = out.host.at("y");
    EXPECT_EQ(y.shape, (Shape{shape[0], shape[1]})) << "round " << round;
    EXPECT_EQ(std::vector<float>(y.as<float>(), y.as<float>() + 6), x6) << "round " << round;
  }
  EXPECT_EQ(r.builds(), 2);  // [2, 3], then [3, 2]; the third run finds [3, 2]'s plan
}

// Outputs kept from run to run (Session::run(inputs, outputs)): an empty
// output, whose memory pointer may be null, beside one that changes size
// and one that keeps it; each run's values its own.
TEST(IoBinding, KeptOutputsOfEverySizeIncludingEmpty) {
  ModelBuilder b;
  b.input("x", {-1, 3}, onnx::TensorProto::FLOAT, {"N", ""});
  b.output("empty", {0, 3});
  b.output("r", {-1, 3}, onnx::TensorProto::FLOAT, {"N", ""});
  b.output("s", {1, 3});
  b.init_i64("st", {0});
  b.init_i64("en", {0});
  b.init_i64("ax", {0});
  b.init_i64("one", {1});
  b.node("Slice", {"x", "st", "en", "ax"}, {"empty"});
  b.node("Relu", {"x"}, {"r"});
  b.node("Slice", {"x", "st", "one", "ax"}, {"s"});
  Session s(test::ctx(), b.save("io_binding_kept_outputs.onnx"));
  std::map<std::string, HostTensor> out;
  for (int64_t n : {2, 2, 4, 4, 1}) {
    const HostTensor x = f32({n, 3}, -1.f, 0.25f);
    s.run({{"x", x}}, out);
    ASSERT_EQ(out.at("empty").shape, (Shape{0, 3}));
    ASSERT_EQ(out.at("r").shape, (Shape{n, 3}));
    for (int64_t i = 0; i < 3 * n; ++i) {
      EXPECT_EQ(out.at("r").as<float>()[i], std::max(0.f, x.as<float>()[i])) << n << " " << i;
    }
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(out.at("s").as<float>()[i], x.as<float>()[i]) << n;
  }
}
