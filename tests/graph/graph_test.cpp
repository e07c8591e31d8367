#include <gmock/gmock.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "op_test_util.h"
#include "ops/uniforms.h"

using namespace wgnn;
using namespace wgnn::test;
using testing::HasSubstr;

TEST(Graph, Int64RoundTripsThroughInt32Storage) {
  Graph g(ctx());
  std::vector<int64_t> v = {0, -1, 7, INT32_MAX, INT32_MIN, 123456789};
  TensorRef t = g.add_tensor({6}, DType::I64, TensorKind::Input);
  EXPECT_EQ(g.info(t).gpu_bytes(), 24u);
  g.write(t, v.data(), v.size() * 8);
  EXPECT_EQ(g.read<int64_t>(t), v);
}

TEST(Graph, Int64OutsideInt32IsAnError) {
  Graph g(ctx());
  std::vector<int64_t> v = {1, int64_t(INT32_MAX) + 1};
  TensorRef t = g.add_tensor({2}, DType::I64, TensorKind::Input, "shape_data");
  try {
    g.write(t, v.data(), 16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("shape_data"));
    EXPECT_THAT(e.what(), HasSubstr("2147483648"));
    EXPECT_THAT(e.what(), HasSubstr("int32"));
  }
}

TEST(Graph, BoolAndBytesRoundTrip) {
  Graph g(ctx());
  std::vector<uint8_t> b = {1, 0, 1, 1, 0};
  TensorRef tb = g.add_tensor({5}, DType::Bool, TensorKind::Input);
  g.write(tb, b.data(), b.size());
  EXPECT_EQ(g.read<uint8_t>(tb), b);
  std::vector<int8_t> i8 = {-128, 127, 0, -1};
  TensorRef ti = g.add_tensor({4}, DType::I8, TensorKind::Input);
  g.write(ti, i8.data(), i8.size());
  EXPECT_EQ(g.read<int8_t>(ti), i8);
}

TEST(Graph, WrongByteCountIsAnError) {
  Graph g(ctx());
  TensorRef t = g.add_tensor({4}, DType::F32, TensorKind::Input, "x");
  std::vector<float> v(3);
  EXPECT_THROW(g.write(t, v.data(), 12), Error);
}

TEST(Graph, ViewSharesStorageWithoutDispatch) {
  Graph g(ctx());
  auto data = random_floats(24, -1, 1, 3);
  TensorRef x = upload(g, {2, 3, 4}, data, DType::F32);
  TensorRef v = g.add_view(x, {6, 4});
  TensorRef y = ops::call(g, "aten.neg.default", {v}).tensor();
  EXPECT_EQ(g.dispatches().size(), 1u);
  g.run();
  EXPECT_EQ(g.info(y).shape, (Shape{6, 4}));
  std::vector<double> ref(data.begin(), data.end());
  for (auto& r : ref) r = -r;
  EXPECT_TRUE(all_close(download(g, y), ref, 0, 0));
  EXPECT_THROW(g.add_view(x, {5, 5}), Error);
}

TEST(Graph, OutputViewKeepsItsRootOutOfThePool) {
  // `a` is an intermediate that a later dispatch reads, and a view of it is
  // an output: its buffer must not return to the pool when `b` is made, or
  // `c` (same size, made later) would overwrite what the output shows.
  Graph g(ctx());
  auto data = random_floats(12, -1, 1, 4);
  TensorRef x = upload(g, {3, 4}, data, DType::F32);
  TensorRef a = ops::call(g, "aten.neg.default", {x}).tensor();
  TensorRef b = ops::call(g, "aten.neg.default", {a}).tensor();
  TensorRef c = ops::call(g, "aten.exp.default", {b}).tensor();
  ops::call(g, "aten.neg.default", {c});
  TensorRef v = g.add_view(a, {12});
  g.mark_output(v);
  g.run();
  std::vector<double> ref(data.begin(), data.end());
  for (auto& r : ref) r = -r;
  EXPECT_TRUE(all_close(download(g, v), ref, 0, 0));
}

TEST(Graph, UniformsShareBuffersAndAreWrittenOnce) {
  // 300 dispatches, each with its own parameters (y + alpha * x with a
  // different alpha): their uniform blocks fill two buffers (16 KiB, then 64 KiB, at
  // the device's offset alignment), written at prepare() with one queue
  // write each, and every dispatch reads its own block.
  Graph g(ctx());
  constexpr int kOps = 300;
  auto data = random_floats(8, -1, 1, 5);
  TensorRef x = upload(g, {8}, data, DType::F32);
  TensorRef y = x;
  std::vector<double> ref(data.begin(), data.end());
  for (int i = 0; i < kOps; ++i) {
    const double alpha = (i % 7 - 3) / 8.0;  // exact in float
    y = ops::call(g, "aten.add.Tensor", {y, x, alpha}).tensor();
    for (size_t k = 0; k < ref.size(); ++k) ref[k] += alpha * double(data[k]);
  }
  g.mark_output(y);
  // Each add's block: its BinaryParams (ops/uniforms.h) at the alignment.
  const uint64_t align = std::max<uint64_t>(16, ctx().limits().min_uniform_buffer_offset_alignment);
  const uint64_t block = (sizeof(ops::BinaryParams) + align - 1) / align * align;
  const uint64_t first = ((16 << 10) - sizeof(ops::BinaryParams)) / block + 1;  // blocks in the first buffer
  const uint64_t later = ((64 << 10) - sizeof(ops::BinaryParams)) / block + 1;
  const uint64_t want = kOps <= first ? 1 : 1 + (kOps - first + later - 1) / later;
  EXPECT_EQ(g.uniform_buffers(), want);
  EXPECT_GE(want, 2u);
  const gpu::CreationStats before = ctx().creation_stats();
  g.prepare();
  const gpu::CreationStats made = ctx().creation_stats() - before;
  EXPECT_EQ(made.writes, g.uniform_buffers());
  g.run();
  EXPECT_TRUE(all_close(download(g, y), ref, 1e-5, 1e-5));
}

TEST(Graph, UniformsRecordedAfterARunAreWrittenByTheNextPrepare) {
  // A graph run once, then given more dispatches (as a plan that grows):
  // the new blocks share the uniform buffer the first ones are in and are
  // written by the next run's prepare, without disturbing the blocks the
  // first run read.
  Graph g(ctx());
  auto data = random_floats(8, -1, 1, 6);
  TensorRef x = upload(g, {8}, data, DType::F32);
  TensorRef y = ops::call(g, "aten.add.Tensor", {x, x, 0.5}).tensor();
  g.mark_output(y);
  g.run();
  std::vector<double> ref(data.size());
  for (size_t k = 0; k < ref.size(); ++k) ref[k] = 1.5 * double(data[k]);
  EXPECT_TRUE(all_close(download(g, y), ref, 1e-6, 1e-6));
  TensorRef z = ops::call(g, "aten.add.Tensor", {y, x, -2.0}).tensor();
  g.mark_output(z);
  EXPECT_EQ(g.uniform_buffers(), 1u);
  g.run();
  std::vector<double> ref2(data.size());
  for (size_t k = 0; k < ref2.size(); ++k) ref2[k] = -0.5 * double(data[k]);
  EXPECT_TRUE(all_close(download(g, y), ref, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(download(g, z), ref2, 1e-6, 1e-6));
}

// A dispatch that writes one part of a buffer and reads another (a view and
// its root) is refused when the plan is prepared, naming the model node and
// the op, in every build: WebGPU would reject it at submit without naming
// anything (Graph::check_no_write_alias).
TEST(Graph, ADispatchThatWritesAndReadsOneBufferIsRefusedNamingTheNode) {
  Graph g(ctx());
  auto data = random_floats(64, -1, 1, 5);
  TensorRef x = upload(g, {64}, data, DType::F32);
  TensorRef y = ops::call(g, "aten.neg.default", {x}).tensor();
  TensorRef lo = g.add_part_view(y, {32}, 0);
  ASSERT_GE(lo.id, 0);
  TensorRef r = ops::call(g, "aten.relu.default", {lo}).tensor();
  // The relu's dispatch again, writing y itself (over the part it reads).
  DispatchNode node = g.dispatches().back();
  size_t written = node.bindings.size();
  for (size_t j = 0; j < node.bindings.size(); ++j)
    if (node.pipeline->writes(j) && node.bindings[j].tensor == r.id) written = j;
  ASSERT_LT(written, node.bindings.size());
  node.bindings[written].tensor = y.id;
  g.set_origin("node 'overlap' (Relu, opset 17)");
  g.add_dispatch(*node.pipeline, node.bindings, node.grid, "test.relu_into_own_input");
  g.mark_output(y);
  g.mark_output(r);
  try {
    g.prepare();
    FAIL() << "prepare() accepted a dispatch that writes and reads one buffer";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'overlap' (Relu, opset 17): test.relu_into_own_input"));
    EXPECT_THAT(e.what(), HasSubstr("WebGPU forbids"));
  }
}

namespace {
// x -> neg -> exp -> + x -> neg: intermediates that share pool slots, an
// input and an output, at length n.
struct Chain {
  TensorRef x, y;
};
Chain chain(Graph& g, int64_t n) {
  Chain c;
  c.x = g.add_tensor({n}, DType::F32, TensorKind::Input, "x");
  TensorRef a = ops::call(g, "aten.neg.default", {c.x}).tensor();
  TensorRef b = ops::call(g, "aten.exp.default", {a}).tensor();
  TensorRef s = ops::call(g, "aten.add.Tensor", {b, c.x}).tensor();
  c.y = ops::call(g, "aten.neg.default", {s}).tensor();
  g.mark_output(c.y);
  return c;
}
std::vector<double> chain_reference(const std::vector<float>& x) {
  std::vector<double> r;
  for (float v : x) r.push_back(-(std::exp(-double(v)) + double(v)));
  return r;
}
std::vector<float> run_chain(Graph& g, const Chain& c, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  const Graph::HostIn in{c.x, x.data(), x.size() * 4};
  const Graph::HostOut out{c.y, y.data(), y.size() * 4};
  g.run({&in, 1}, {&out, 1});
  return y;
}
}  // namespace

// One plan at three sizes: the graphs recorded at each share one set of
// buffers (the pool's slots, the input's and the output's), which grows to
// the largest; a graph prepared before a buffer grew makes its bind groups
// again before its next run, and every size computes its own values.
TEST(Graph, GraphsOfOneStructureShareBuffersAtEverySize) {
  Graph small(ctx()), large(ctx()), tiny(ctx());
  const Chain cs = chain(small, 64), cl = chain(large, 5000), ct = chain(tiny, 8);
  EXPECT_EQ(small.structure(), large.structure());
  const auto xs = random_floats(64, -2, 2, 7), xl = random_floats(5000, -2, 2, 8), xt = random_floats(8, -2, 2, 9);
  EXPECT_TRUE(all_close(run_chain(small, cs, xs), chain_reference(xs), 1e-5, 1e-5));
  const std::shared_ptr<SharedStorage> st = small.storage();
  ASSERT_TRUE(st);
  const size_t buffers = st->buffers();
  const uint64_t gen = st->generation(), bytes = st->bytes();
  large.share_storage(st);
  tiny.share_storage(st);
  EXPECT_TRUE(all_close(run_chain(large, cl, xl), chain_reference(xl), 1e-5, 1e-5));
  EXPECT_EQ(large.storage(), st);
  EXPECT_EQ(large.plan_id(), small.plan_id()) << "one structure: one layout, one plan";
  EXPECT_EQ(st->buffers(), buffers) << "the large graph grew the buffers it shares rather than adding its own";
  EXPECT_GT(st->generation(), gen);
  EXPECT_GE(st->bytes(), bytes + (5000 - 64) * 4);
  EXPECT_FALSE(small.prepared()) << "its bind groups hold the smaller buffers";
  const uint64_t grown = st->bytes(), gen2 = st->generation();
  EXPECT_TRUE(all_close(run_chain(tiny, ct, xt), chain_reference(xt), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(run_chain(small, cs, xs), chain_reference(xs), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(run_chain(large, cl, xl), chain_reference(xl), 1e-5, 1e-5));
  EXPECT_EQ(st->bytes(), grown) << "smaller sizes fit the grown buffers";
  EXPECT_EQ(st->generation(), gen2);
  EXPECT_TRUE(large.prepared() && small.prepared() && tiny.prepared());
  EXPECT_EQ(tiny.plan_id(), small.plan_id());
  EXPECT_EQ(st->layouts(), 1u);
}

// Graphs of other structures (other plans) on one storage take turns too:
// each gets a layout of its own over the slots already there, so the
// storage holds what the largest graph needs, not the sum; a graph changed
// after it was prepared gets a new layout; every graph computes its own.
TEST(Graph, GraphsOfOtherStructuresTakeTurnsOnOneStorage) {
  Graph a(ctx()), b(ctx()), c(ctx());
  const Chain ca = chain(a, 4096);
  TensorRef x = b.add_tensor({4096}, DType::F32, TensorKind::Input, "x");
  TensorRef e = ops::call(b, "aten.exp.default", {x}).tensor();
  TensorRef y = ops::call(b, "aten.neg.default", {e}).tensor();
  b.mark_output(y);
  const auto xs = random_floats(4096, -1, 1, 10);
  EXPECT_TRUE(all_close(run_chain(a, ca, xs), chain_reference(xs), 1e-5, 1e-5));
  const std::shared_ptr<SharedStorage> st = a.storage();
  const uint64_t bytes = st->bytes();
  const size_t buffers = st->buffers();
  b.share_storage(st);
  std::vector<float> got(4096);
  const Graph::HostIn in{x, xs.data(), xs.size() * 4};
  const Graph::HostOut out{y, got.data(), got.size() * 4};
  b.run({&in, 1}, {&out, 1});
  std::vector<double> want;
  for (float v : xs) want.push_back(-std::exp(double(v)));
  EXPECT_TRUE(all_close(got, want, 1e-5, 1e-5));
  EXPECT_NE(b.plan_id(), a.plan_id());
  EXPECT_EQ(st->layouts(), 2u);
  // b's one pooled intermediate takes a slot a made; its input and its
  // output are a's (the first input, the first output): no buffer more.
  EXPECT_EQ(st->bytes(), bytes);
  EXPECT_EQ(st->buffers(), buffers);
  // c: a's structure, then changed after its first run: a new layout.
  const Chain cc = chain(c, 32);
  c.share_storage(st);
  const auto x32 = random_floats(32, -1, 1, 11);
  EXPECT_TRUE(all_close(run_chain(c, cc, x32), chain_reference(x32), 1e-5, 1e-5));
  EXPECT_EQ(c.plan_id(), a.plan_id());
  ops::call(c, "aten.neg.default", {cc.y});
  EXPECT_TRUE(all_close(run_chain(c, cc, x32), chain_reference(x32), 1e-5, 1e-5));
  EXPECT_NE(c.plan_id(), a.plan_id());
  EXPECT_EQ(st->layouts(), 3u);
  EXPECT_TRUE(all_close(run_chain(a, ca, xs), chain_reference(xs), 1e-5, 1e-5));
}

// A graph's structural choices (Graph::choose) replayed: each choice is the
// replayed one while the sites match and the op does what it chose; after a
// site that differs, or a choice the op could not follow, the graph makes
// its own (preferred) choices and the replay is not followed. A meta graph
// keeps no log.
TEST(Graph, ChoicesAreReplayedWhileTheSitesMatchAndTheOpsFollow) {
  Graph first(ctx());
  Graph::Choice c = first.choose("a.split", 1);
  EXPECT_EQ(c.value, 1);
  first.made(c, 1);
  c = first.choose("b.place", 0);
  EXPECT_EQ(c.value, 0);
  first.made(c, 0);
  EXPECT_FALSE(first.replay_followed()) << "nothing was replayed";
  const auto log = std::make_shared<const PlanChoices>(first.choices());
  ASSERT_EQ(log->made.size(), 2u);

  Graph same(ctx());
  same.replay_choices(log);
  c = same.choose("a.split", 0);
  EXPECT_EQ(c.value, 1) << "the replayed choice, not the preferred one";
  same.made(c, 1);
  c = same.choose("b.place", 1);
  EXPECT_EQ(c.value, 0);
  same.made(c, 0);
  EXPECT_TRUE(same.replay_followed());

  Graph other_site(ctx());
  other_site.replay_choices(log);
  EXPECT_EQ(other_site.choose("c.other", 0).value, 0) << "another op at this point: its own choice";
  EXPECT_EQ(other_site.choose("b.place", 1).value, 1) << "after a divergence every choice is the graph's own";
  EXPECT_FALSE(other_site.replay_followed());

  Graph not_followed(ctx());
  not_followed.replay_choices(log);
  c = not_followed.choose("a.split", 0);
  not_followed.made(c, 0);  // the op could not split
  EXPECT_EQ(not_followed.choices().made[0].second, 0) << "the log holds what was done";
  EXPECT_EQ(not_followed.choose("b.place", 1).value, 1);
  EXPECT_FALSE(not_followed.replay_followed());

  Graph fewer(ctx());
  fewer.replay_choices(log);
  fewer.made(fewer.choose("a.split", 0), 1);
  EXPECT_FALSE(fewer.replay_followed()) << "the replayed graph made more choices than this one";

  Graph meta(ctx());
  meta.set_meta(true);
  meta.replay_choices(log);
  EXPECT_EQ(meta.choose("a.split", 0).value, 0);
  EXPECT_TRUE(meta.choices().made.empty());
}
