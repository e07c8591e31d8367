// Repeated runs of a prepared graph: the same outputs bit for bit, inputs
// and outputs moving with every run, and nothing made per run (no buffer,
// bind group or pipeline).
#include <fmt/format.h>
#include <gmock/gmock.h>

#include <cstdint>
#include <array>
#include <cstring>

#include "graph/half.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"
#include "op_test_util.h"
#include "scoped_env.h"

using namespace wgnn;
using namespace wgnn::test;

namespace {

// y = relu(x) @ w; idx = argmax(y, 1) (int64: read back through the layout
// conversion); x is [8, 32], w [32, 16].
struct SmallNet {
  Graph g{ctx()};
  TensorRef x, y, idx;
  SmallNet() {
    x = g.add_tensor({8, 32}, DType::F32, TensorKind::Input, "x");
    const std::vector<float> w = random_floats(32 * 16, -1, 1, 11);
    TensorRef wt = g.add_constant({32, 16}, DType::F32, w.data(), "w");
    TensorRef r = ops::call(g, "aten.relu.default", {x}).tensor();
    y = ops::call(g, "aten.mm.default", {r, wt}).tensor();
    idx = ops::call(g, "aten.argmax.default", {y, int64_t(1), false}).tensor();
    g.mark_output(y);
    g.mark_output(idx);
  }
  // Runs on `in`; y's and idx's bytes.
  std::pair<std::vector<uint8_t>, std::vector<uint8_t>> run(const std::vector<float>& in) {
    std::vector<uint8_t> yb(g.info(y).nbytes()), ib(g.info(idx).nbytes());
    const Graph::HostIn ins[] = {{x, in.data(), in.size() * sizeof(float)}};
    const Graph::HostOut outs[] = {{y, yb.data(), yb.size()}, {idx, ib.data(), ib.size()}};
    g.run(ins, outs);
    return {yb, ib};
  }
};

}  // namespace

TEST(GraphRun, ManyRunsGiveIdenticalOutputs) {
  SmallNet net;
  const std::vector<float> a = random_floats(8 * 32, -1, 1, 1), b = random_floats(8 * 32, -1, 1, 2);
  const auto first = net.run(a);
  // The one-submit readback agrees with a separate read of the same tensors.
  std::vector<float> y_read = net.g.read<float>(net.y);
  ASSERT_EQ(std::memcmp(y_read.data(), first.first.data(), first.first.size()), 0);
  std::vector<int64_t> idx_read = net.g.read<int64_t>(net.idx);
  ASSERT_EQ(std::memcmp(idx_read.data(), first.second.data(), first.second.size()), 0);
  for (int64_t v : idx_read) ASSERT_TRUE(v >= 0 && v < 16) << v;

  const auto other = net.run(b);  // a new input moves the outputs: it was uploaded
  EXPECT_NE(other.first, first.first);
  for (int i = 0; i < 50; ++i) {
    const auto r = net.run(i % 2 ? b : a);
    ASSERT_EQ(r.first, (i % 2 ? other : first).first) << "run " << i;
    ASSERT_EQ(r.second, (i % 2 ? other : first).second) << "run " << i;
  }
}

TEST(GraphRun, SteadyRunsCreateNoBuffersBindGroupsOrPipelines) {
  SmallNet net;
  const std::vector<float> a = random_floats(8 * 32, -1, 1, 3);
  net.run(a);  // prepares, makes the staging buffers
  gpu::Context& c = ctx();
  const uint64_t buffers = c.buffers_created(), groups = c.bind_groups_created(),
                 misses = c.pipeline_cache_misses();
  for (int i = 0; i < 20; ++i) net.run(a);
  EXPECT_EQ(c.buffers_created(), buffers);
  EXPECT_EQ(c.bind_groups_created(), groups);
  EXPECT_EQ(c.pipeline_cache_misses(), misses);
  EXPECT_EQ(net.g.last_run().dispatches, net.g.dispatches().size());
  EXPECT_GT(net.g.last_run().encode_us, 0);
  EXPECT_GT(net.g.last_run().wait_us, 0);
}

// Inputs of 1 MiB and more go through upload buffers of the graph's own
// (Graph::stage_input), one per run in flight, mapped again each run: every
// run sees its own input, two runs in flight included, and steady runs
// create no buffer. Against a host relu, bit for bit.
TEST(GraphRun, LargeInputsGoThroughKeptUploadBuffers) {
  for (const DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16 && !ctx().features().shader_f16) continue;
    SCOPED_TRACE(dtype_name(dt));
    // float16: an odd element count, so the copy's last word is padded.
    const int64_t n = dt == DType::F32 ? (int64_t(1) << 18) + 4 : (int64_t(1) << 19) + 1;
    Graph g{ctx()};
    TensorRef x = g.add_tensor({n}, dt, TensorKind::Input, "x");
    TensorRef y = ops::call(g, "aten.relu.default", {x}).tensor();
    g.mark_output(y);
    const size_t bytes = size_t(n) * dtype_size(dt);
    ASSERT_GE(bytes, size_t(1) << 20);
    std::vector<std::vector<uint8_t>> in(3, std::vector<uint8_t>(bytes)), want(3, std::vector<uint8_t>(bytes));
    for (int k = 0; k < 3; ++k) {
      const std::vector<float> v = random_floats(size_t(n), -1, 1, uint32_t(20 + k));
      for (int64_t i = 0; i < n; ++i) {
        if (dt == DType::F32) {
          std::memcpy(&in[k][size_t(i) * 4], &v[size_t(i)], 4);
          const float r = v[size_t(i)] > 0 ? v[size_t(i)] : 0.0f;
          std::memcpy(&want[k][size_t(i) * 4], &r, 4);
        } else {
          uint16_t h = float_to_half(v[size_t(i)]);
          if (h == 0x8000u) h = 0;  // no -0 (relu may give either zero)
          std::memcpy(&in[k][size_t(i) * 2], &h, 2);
          const uint16_t r = (h & 0x8000u) ? uint16_t(0) : h;  // relu of a half: its sign bit
          std::memcpy(&want[k][size_t(i) * 2], &r, 2);
        }
      }
    }
    std::vector<uint8_t> out(bytes);
    const auto run = [&](int k) {
      const Graph::HostIn ins[] = {{x, in[k].data(), bytes}};
      const Graph::HostOut outs[] = {{y, out.data(), bytes}};
      g.run(ins, outs);
      return out;
    };
    ASSERT_EQ(run(0), want[0]);
    ASSERT_EQ(run(1), want[1]);
    // Two in flight: each run reads its own input, written into the other slot.
    {
      const Graph::HostIn a[] = {{x, in[2].data(), bytes}}, b[] = {{x, in[0].data(), bytes}};
      const TensorRef outs_t[] = {y};
      g.submit(a, outs_t);
      g.submit(b, outs_t);
      std::vector<uint8_t> o1(bytes), o2(bytes);
      const Graph::HostOut h1[] = {{y, o1.data(), bytes}}, h2[] = {{y, o2.data(), bytes}};
      g.wait(h1);
      g.wait(h2);
      EXPECT_EQ(o1, want[2]);
      EXPECT_EQ(o2, want[0]);
    }
    const uint64_t buffers = ctx().buffers_created();
    for (int i = 0; i < 6; ++i) ASSERT_EQ(run(i % 3), want[size_t(i % 3)]) << "run " << i;
    EXPECT_EQ(ctx().buffers_created(), buffers);
    // The queue-write path gives the same (WGNN_UPLOAD_STAGING=0 is read once
    // per process, so compare with a small input's path instead: write()).
    std::vector<uint8_t> direct(bytes);
    g.write(x, in[1].data(), bytes);
    g.run({}, std::array<Graph::HostOut, 1>{{{y, direct.data(), bytes}}});
    EXPECT_EQ(direct, want[1]);
  }
}

// A run's dispatches are encoded by the run before it, after that run's
// submit, while the GPU works (Graph::submit_impl): from the second run on,
// a run only submits them, in parts (16, 32, then the rest here). A chain
// of 60 adds against the host's sums, bit for bit, on every run: inputs
// changing, two runs in flight, WGNN_ENCODE_AHEAD=0, and after the graph
// grows (prepare() drops what was encoded for the old plan).
TEST(GraphRun, RunsSubmitDispatchesEncodedAhead) {
  constexpr int64_t n = 1000;
  constexpr int kAdds = 60;
  Graph g{ctx()};
  TensorRef x = g.add_tensor({n}, DType::F32, TensorKind::Input, "x");
  std::vector<std::vector<float>> w;
  TensorRef t = x;
  for (int i = 0; i < kAdds; ++i) {
    w.push_back(random_floats(size_t(n), -1, 1, uint32_t(100 + i)));
    TensorRef c = g.add_constant({n}, DType::F32, w.back().data(), fmt::format("w{}", i));
    t = ops::call(g, "aten.add.Tensor", {t, c}).tensor();
  }
  g.mark_output(t);
  const auto want = [&](const std::vector<float>& in, bool relu) {
    std::vector<float> r = in;
    for (const auto& wi : w)
      for (int64_t k = 0; k < n; ++k) r[size_t(k)] += wi[size_t(k)];
    if (relu)
      for (float& v : r) v = v > 0 ? v : 0.0f;
    return r;
  };
  const std::vector<float> a = random_floats(size_t(n), -4, 4, 1), b = random_floats(size_t(n), -4, 4, 2);
  const std::vector<float> want_a = want(a, false), want_b = want(b, false);
  std::vector<float> out(static_cast<size_t>(n)), out2(static_cast<size_t>(n));
  const auto run = [&](const std::vector<float>& in, TensorRef y) {
    const Graph::HostIn ins[] = {{x, in.data(), in.size() * sizeof(float)}};
    const Graph::HostOut outs[] = {{y, out.data(), out.size() * sizeof(float)}};
    g.run(ins, outs);
    return out;
  };
  ASSERT_EQ(run(a, t), want_a);
  ASSERT_EQ(g.dispatches().size(), size_t(kAdds));
  EXPECT_FALSE(g.last_run().from_ahead);  // the first run encodes its own
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(run(i % 2 ? a : b, t), i % 2 ? want_a : want_b) << "run " << i;
    EXPECT_TRUE(g.last_run().from_ahead) << "run " << i;
    EXPECT_GT(g.last_run().ahead_us, 0) << "run " << i;  // and encodes the next's
  }
  {  // two runs in flight: the second submits what the first encoded
    const Graph::HostIn in_a[] = {{x, a.data(), a.size() * sizeof(float)}};
    const Graph::HostIn in_b[] = {{x, b.data(), b.size() * sizeof(float)}};
    const TensorRef outs[] = {t};
    g.submit(in_a, outs);
    g.submit(in_b, outs);
    const Graph::HostOut o1[] = {{t, out.data(), out.size() * sizeof(float)}};
    const Graph::HostOut o2[] = {{t, out2.data(), out2.size() * sizeof(float)}};
    g.wait(o1);
    g.wait(o2);
    EXPECT_EQ(out, want_a);
    EXPECT_EQ(out2, want_b);
  }
  {
    wgnn::test::ScopedSetting off("WGNN_ENCODE_AHEAD", "0");
    ASSERT_EQ(run(b, t), want_b);
    EXPECT_FALSE(g.last_run().from_ahead);
    EXPECT_EQ(g.last_run().ahead_us, 0);
    ASSERT_EQ(run(a, t), want_a);
    EXPECT_FALSE(g.last_run().from_ahead);
  }
  // The graph grows: the plan is made again and what was encoded is dropped.
  TensorRef r = ops::call(g, "aten.relu.default", {t}).tensor();
  g.mark_output(r);
  ASSERT_EQ(run(b, r), want(b, true));
  EXPECT_FALSE(g.last_run().from_ahead);
  EXPECT_EQ(g.dispatches().size(), size_t(kAdds + 1));
  ASSERT_EQ(run(a, r), want(a, true));
  EXPECT_TRUE(g.last_run().from_ahead);
  {
    wgnn::test::ScopedSetting bad("WGNN_ENCODE_AHEAD", "yes");
    EXPECT_THROW(run(a, r), Error);
  }
}

TEST(GraphRun, TheSameOutputTwiceIsReadIntoBoth) {
  SmallNet net;
  const std::vector<float> a = random_floats(8 * 32, -1, 1, 4);
  std::vector<uint8_t> y1(net.g.info(net.y).nbytes()), y2(y1.size(), 0xff);
  const Graph::HostIn ins[] = {{net.x, a.data(), a.size() * sizeof(float)}};
  const Graph::HostOut outs[] = {{net.y, y1.data(), y1.size()}, {net.y, y2.data(), y2.size()}};
  net.g.run(ins, outs);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(y1, net.run(a).first);
}

TEST(GraphRun, WrongOutputByteCountIsAnError) {
  SmallNet net;
  std::vector<uint8_t> small(4);
  const Graph::HostOut outs[] = {{net.y, small.data(), small.size()}};
  EXPECT_THROW(net.g.run({}, outs), Error);
}

TEST(SessionRun, RepeatedRunsAreBitIdenticalAndBuildNothing) {
  // z = Softmax(MatMul(Relu(x), w)), through Session::run (inputs, one
  // submit, outputs).
  ModelBuilder b;
  b.input("x", {4, 8});
  b.output("z", {4, 6});
  b.init_f32("w", {8, 6}, random_floats(48, -1, 1, 5));
  b.node("Relu", {"x"}, {"r"});
  b.node("MatMul", {"r", "w"}, {"m"});
  b.node("Softmax", {"m"}, {"z"});
  onnx_import::Session s(ctx(), b.save("run_repeat.onnx"));
  HostTensor x(DType::F32, {4, 8});
  const std::vector<float> xv = random_floats(32, -2, 2, 6);
  std::memcpy(x.data.data(), xv.data(), x.data.size());
  const std::map<std::string, HostTensor> in{{"x", x}};
  const util::HostBytes first = s.run(in).at("z").data;
  gpu::Context& c = ctx();
  const uint64_t buffers = c.buffers_created(), groups = c.bind_groups_created();
  for (int i = 0; i < 30; ++i) ASSERT_EQ(s.run(in).at("z").data, first) << "run " << i;
  EXPECT_EQ(s.builds(), 1);
  EXPECT_EQ(c.buffers_created(), buffers);
  EXPECT_EQ(c.bind_groups_created(), groups);
  // Each row of a softmax sums to 1: the readback is the real output.
  const float* z = reinterpret_cast<const float*>(first.data());
  for (int r = 0; r < 4; ++r) {
    float sum = 0;
    for (int k = 0; k < 6; ++k) sum += z[r * 6 + k];
    EXPECT_NEAR(sum, 1.0f, 1e-5f);
  }
}
