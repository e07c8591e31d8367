// ONNX mappings of Resize, Upsample, InstanceNormalization,
// GroupNormalization and PRelu through sessions.
//
// The ONNX backend cases of Resize and Upsample feed scales and sizes as
// graph inputs (the session specializes the graph on their values); here
// the same cases also run with every input but the first turned into an
// initializer, against the stored reference outputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "gpu_fixture.h"
#include "onnx_model_builder.h"
#include "onnx/session.h"
#include "onnx/tensor_proto.h"

using namespace wgnn;
using onnx_import::Session;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

const fs::path kNodeCases = "/usr/share/libonnx-testdata/data/node";

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("wgnn_mapper_cases_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

onnx::TensorProto read_proto(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  onnx::TensorProto t;
  EXPECT_TRUE(in && t.ParseFromIstream(&in)) << p;
  return t;
}

// Worst |got - want| beyond atol + rtol * |want|, or "" when all match.
std::string compare(const HostTensor& got, const HostTensor& want, double atol, double rtol) {
  if (got.shape != want.shape) return "shape " + shape_str(got.shape) + " vs " + shape_str(want.shape);
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double a = got.get_double(size_t(i)), b = want.get_double(size_t(i));
    if (!(std::abs(a - b) <= atol + rtol * std::abs(b))) {
      return "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
    }
  }
  return "";
}

// Runs backend case `name` with inputs 1.. as initializers.
void run_with_constant_inputs(const std::string& name, int min_opset = 0) {
  SCOPED_TRACE(name);
  const fs::path dir = kNodeCases / name;
  onnx::ModelProto m;
  {
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    ASSERT_TRUE(in && m.ParseFromIstream(&in));
  }
  const fs::path set = dir / "test_data_set_0";
  auto* g = m.mutable_graph();
  std::vector<std::string> names;
  for (const auto& i : g->input()) names.push_back(i.name());
  for (size_t k = 1; k < names.size(); ++k) {
    onnx::TensorProto t = read_proto(set / ("input_" + std::to_string(k) + ".pb"));
    t.set_name(names[k]);
    *g->add_initializer() = t;
  }
  while (g->input_size() > 1) g->mutable_input()->RemoveLast();
  for (auto& op : *m.mutable_opset_import()) {
    if (op.domain().empty() && op.version() < min_opset) op.set_version(min_opset);
  }
  const fs::path path = temp_dir() / (name + ".onnx");
  {
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&out));
  }
  Session s(test::ctx(), path.string());
  const HostTensor x = onnx_import::from_tensor_proto(read_proto(set / "input_0.pb"), set.string());
  auto outs = s.run({{names[0], x}});
  const HostTensor want = onnx_import::from_tensor_proto(read_proto(set / "output_0.pb"), set.string());
  const std::string diff = compare(outs.at(s.outputs()[0].name), want, 1e-5, 1e-4);
  EXPECT_EQ(diff, "");
}

}  // namespace

TEST(OnnxCases, ResizeAndUpsampleWithConstantScalesAndSizes) {
  if (!fs::exists(kNodeCases)) GTEST_SKIP() << "no ONNX backend test data";
  int ran = 0;
  for (const auto& e : fs::directory_iterator(kNodeCases)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("test_resize_", 0) == 0 || n.rfind("test_upsample_", 0) == 0) {
      run_with_constant_inputs(n);
      ++ran;
    }
  }
  EXPECT_GT(ran, 10);
}

TEST(OnnxCases, InstanceNormalization) {
  if (!fs::exists(kNodeCases)) GTEST_SKIP() << "no ONNX backend test data";
  // The stored models say opset 6 (InstanceNormalization is the same op
  // through opset 21); again at 7.
  for (int opset : {0, 7}) {
    run_with_constant_inputs("test_instancenorm_example", opset);
    run_with_constant_inputs("test_instancenorm_epsilon", opset);
  }
}

namespace {

struct ModelBuilder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  explicit ModelBuilder(int opset) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
  }
  static void io(onnx::ValueInfoProto* v, const std::string& name, const Shape& shape) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto* sh = tt->mutable_shape();
    for (int64_t d : shape) sh->add_dim()->set_dim_value(d);
  }
  void input(const std::string& n, const Shape& s) { io(g->add_input(), n, s); }
  void output(const std::string& n, const Shape& s) { io(g->add_output(), n, s); }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out[0]);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static void attr_i(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_s(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  void init_f32(const std::string& n, const Shape& dims, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_float_data(x);
  }
  void init_i64(const std::string& n, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (auto x : v) t->add_int64_data(x);
  }
  std::string save(const std::string& name) {
    const std::string p = (temp_dir() / name).string();
    std::ofstream out(p, std::ios::binary);
    m.SerializeToOstream(&out);
    return p;
  }
};

HostTensor ramp(const Shape& s, float start, float step) {
  HostTensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = start + step * float(i % 37) + 0.01f * float(i);
  return t;
}

std::vector<float> values(const HostTensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

// Group norm of x [N, C, HxW] with per-channel scale and bias.
std::vector<double> group_norm_ref(const std::vector<float>& x, int64_t N, int64_t C, int64_t hw, int64_t G,
                                   const std::vector<float>& scale_c, const std::vector<float>& bias_c, double eps) {
  std::vector<double> y(x.size());
  const int64_t width = C / G * hw;
  for (int64_t r = 0; r < N * G; ++r) {
    double mean = 0, m2 = 0;
    for (int64_t j = 0; j < width; ++j) mean += x[size_t(r * width + j)];
    mean /= double(width);
    for (int64_t j = 0; j < width; ++j) m2 += std::pow(x[size_t(r * width + j)] - mean, 2);
    const double rstd = 1 / std::sqrt(m2 / double(width) + eps);
    for (int64_t j = 0; j < width; ++j) {
      const size_t ch = size_t((r % G) * (C / G) + j / hw);
      y[size_t(r * width + j)] = (x[size_t(r * width + j)] - mean) * rstd * scale_c[ch] + bias_c[ch];
    }
  }
  return y;
}

void expect_close(const HostTensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(size_t(got.numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got.get_double(i), want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

// GroupNormalization with num_groups G on x [2, 6, 3, 5]; scale and bias
// as constants or graph inputs, per group (opset 18) or channel (21).
void check_group_normalization(int opset, bool constant_params) {
  SCOPED_TRACE("opset " + std::to_string(opset) + (constant_params ? " constants" : " inputs"));
  const int64_t N = 2, C = 6, G = 3, hw = 15;
  const int64_t np = opset >= 21 ? C : G;
  std::vector<float> scale, bias;
  for (int64_t i = 0; i < np; ++i) {
    scale.push_back(0.5f + 0.25f * float(i));
    bias.push_back(-1.f + 0.5f * float(i));
  }
  ModelBuilder b(opset);
  b.input("x", {N, C, 3, 5});
  if (constant_params) {
    b.init_f32("scale", {np}, scale);
    b.init_f32("bias", {np}, bias);
  } else {
    b.input("scale", {np});
    b.input("bias", {np});
  }
  b.output("y", {N, C, 3, 5});
  auto* n = b.node("GroupNormalization", {"x", "scale", "bias"}, {"y"});
  ModelBuilder::attr_i(n, "num_groups", G);
  Session s(test::ctx(), b.save("gn" + std::to_string(opset) + (constant_params ? "c" : "i") + ".onnx"));
  HostTensor x = ramp({N, C, 3, 5}, 100.f, 0.3f);  // a large mean
  std::map<std::string, HostTensor> in{{"x", x}};
  if (!constant_params) {
    HostTensor ts(DType::F32, {np}), tb(DType::F32, {np});
    std::copy(scale.begin(), scale.end(), ts.as<float>());
    std::copy(bias.begin(), bias.end(), tb.as<float>());
    in["scale"] = ts;
    in["bias"] = tb;
  }
  auto out = s.run(in);
  std::vector<float> sc(static_cast<size_t>(C)), bc(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const size_t k = size_t(opset >= 21 ? c : c / (C / G));
    sc[size_t(c)] = scale[k];
    bc[size_t(c)] = bias[k];
  }
  expect_close(out.at("y"), group_norm_ref(values(x), N, C, hw, G, sc, bc, 1e-5), 1e-4);
}

}  // namespace

TEST(OnnxCases, GroupNormalizationPerGroupAndPerChannel) {
  check_group_normalization(18, true);
  check_group_normalization(18, false);
  check_group_normalization(21, true);
  check_group_normalization(21, false);
}

TEST(OnnxCases, PReluSlopeShapes) {
  const Shape xs = {2, 3, 4, 5};
  for (const Shape& ss : {Shape{1}, Shape{3, 1, 1}, Shape{1, 3, 1, 1}, Shape{5}, Shape{4, 5}, Shape{2, 3, 4, 5},
                          Shape{}}) {
    SCOPED_TRACE(shape_str(ss));
    ModelBuilder b(16);
    b.input("x", xs);
    HostTensor slope = ramp(ss, -0.5f, 0.1f);
    b.init_f32("slope", ss, values(slope));
    b.output("y", xs);
    b.node("PRelu", {"x", "slope"}, {"y"});
    Session s(test::ctx(), b.save("prelu.onnx"));
    HostTensor x = ramp(xs, -2.f, 0.11f);
    auto out = s.run({{"x", x}});
    std::vector<double> want(size_t(numel(xs)));
    for (int64_t i = 0; i < numel(xs); ++i) {
      // slope index by numpy broadcasting (right-aligned).
      int64_t si = 0, r = i, stride = 1;
      for (size_t d = xs.size(); d-- > 0;) {
        const int64_t coord = r % xs[d];
        r /= xs[d];
        const size_t off = xs.size() - ss.size();
        if (d >= off && ss[d - off] != 1) si += coord * stride;
        if (d >= off) stride *= ss[d - off];
      }
      const float v = x.as<float>()[i];
      want[size_t(i)] = v < 0 ? double(v) * slope.as<float>()[si] : double(v);
    }
    expect_close(out.at("y"), want, 1e-6);
  }
}

TEST(OnnxCases, ResizeAxesAndAspectRatioPolicy) {
  // Opset 18: sizes for axes (3, 2) only, keeping the aspect ratio.
  // The ONNX spec: the policies resize both axes by one scale, min (not_larger)
  // or max (not_smaller) of sizes / input, 1.25 and 1.5 here; each output
  // pixel is the input at round_prefer_floor((o + 0.5) / scale - 0.5)
  // (half_pixel), clamped.
  struct Case {
    const char* policy;
    Shape out;
    double scale_h, scale_w;
  };
  for (const Case& c : {Case{"stretch", {1, 2, 5, 9}, 1.25, 1.5}, Case{"not_larger", {1, 2, 5, 8}, 1.25, 1.25},
                        Case{"not_smaller", {1, 2, 6, 9}, 1.5, 1.5}}) {
    SCOPED_TRACE(c.policy);
    ModelBuilder b(18);
    b.input("x", {1, 2, 4, 6});
    b.init_i64("sizes", {9, 5});  // W, H
    b.output("y", c.out);
    auto* n = b.node("Resize", {"x", "", "", "sizes"}, {"y"});
    ModelBuilder::attr_s(n, "mode", "nearest");
    ModelBuilder::attr_ints(n, "axes", {3, 2});
    ModelBuilder::attr_s(n, "keep_aspect_ratio_policy", c.policy);
    Session s(test::ctx(), b.save("resize18.onnx"));
    const HostTensor x = ramp({1, 2, 4, 6}, 0.f, 1.f);
    auto out = s.run({{"x", x}});
    ASSERT_EQ(out.at("y").shape, c.out);
    auto src = [](int64_t o, double scale, int64_t in) {
      const double f = (double(o) + 0.5) / scale - 0.5;
      const int64_t i = f - std::floor(f) == 0.5 ? int64_t(std::floor(f)) : int64_t(std::llround(f));
      return std::clamp<int64_t>(i, 0, in - 1);
    };
    std::vector<double> want;
    for (int64_t ch = 0; ch < 2; ++ch)
      for (int64_t h = 0; h < c.out[2]; ++h)
        for (int64_t w = 0; w < c.out[3]; ++w)
          want.push_back(x.as<float>()[(ch * 4 + src(h, c.scale_h, 4)) * 6 + src(w, c.scale_w, 6)]);
    expect_close(out.at("y"), want, 0);
  }
}

TEST(OnnxCases, ResizeUnsupportedCases) {
  auto error_of = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Unsupported& e) {
      return std::string("unsupported: ") + e.what();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  {
    ModelBuilder b(18);
    b.input("x", {1, 1, 4, 4});
    b.init_f32("scales", {4}, {1, 1, 0.5f, 0.5f});
    b.output("y", {1, 1, 2, 2});
    auto* n = b.node("Resize", {"x", "", "scales"}, {"y"});
    ModelBuilder::attr_s(n, "mode", "linear");
    ModelBuilder::attr_i(n, "antialias", 1);
    ModelBuilder::attr_s(n, "coordinate_transformation_mode", "half_pixel_mirrored");
    Session s(test::ctx(), b.save("aa.onnx"));
    EXPECT_THAT(error_of([&] { s.run({{"x", ramp({1, 1, 4, 4}, 0, 1)}}); }), HasSubstr("half_pixel_mirrored"));
  }
  {
    // antialias=1 (supported since): halving a 4x4 ramp (1.01 * i) with
    // linear taps stretched to 4 (weights 1/8, 3/8, 3/8, 1/8, edges
    // clamped) gives per dim 0.625 and 2.375, so 1.01 * (4 * row + col).
    ModelBuilder b(18);
    b.input("x", {1, 1, 4, 4});
    b.init_f32("scales", {4}, {1, 1, 0.5f, 0.5f});
    b.output("y", {1, 1, 2, 2});
    auto* n = b.node("Resize", {"x", "", "scales"}, {"y"});
    ModelBuilder::attr_s(n, "mode", "linear");
    ModelBuilder::attr_i(n, "antialias", 1);
    Session s(test::ctx(), b.save("aa_ok.onnx"));
    auto out = s.run({{"x", ramp({1, 1, 4, 4}, 0, 1)}});
    expect_close(out.at("y"), {1.01 * (4 * 0.625 + 0.625), 1.01 * (4 * 0.625 + 2.375), 1.01 * (4 * 2.375 + 0.625),
                               1.01 * (4 * 2.375 + 2.375)}, 1e-6);
  }
  {
    // Scales computed on the GPU: unknown when the graph is built.
    ModelBuilder b(13);
    b.input("x", {1, 1, 4, 4});
    b.input("scales", {4});
    b.output("y", {1, 1, 8, 8});
    b.node("Relu", {"scales"}, {"s"});
    b.node("Resize", {"x", "", "s"}, {"y"});
    Session s(test::ctx(), b.save("dyn.onnx"));
    HostTensor sc(DType::F32, {4});
    for (int i = 0; i < 4; ++i) sc.as<float>()[i] = i < 2 ? 1.f : 2.f;
    EXPECT_THAT(error_of([&] { s.run({{"x", ramp({1, 1, 4, 4}, 0, 1)}, {"scales", sc}}); }),
                HasSubstr("unsupported: "));
  }
}

// ReduceMax / ReduceMin over a dim of size 0 (opset 18 on): -inf / +inf of
// the result's shape, as ONNX defines it (the ONNX 1.23 backend cases
// test_reduce_{max,min}_empty_set); integers are refused as unsupported.
TEST(OnnxCases, ReduceMaxMinOverNoValues) {
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    SCOPED_TRACE(op);
    test::ModelBuilder b(18);
    b.input("x", {2, 0, 4});
    b.init_i64("axes", {1});
    b.node(op, {"x", "axes"}, {"y"});
    b.output("y", {2, 1, 4});
    Session s(test::ctx(), b.save(std::string("reduce_empty_") + op + ".onnx"));
    const auto outs = s.run({{"x", HostTensor(DType::F32, {2, 0, 4})}});
    const HostTensor& y = outs.at("y");
    ASSERT_EQ(y.shape, (Shape{2, 1, 4}));
    const float want = std::string(op) == "ReduceMax" ? -INFINITY : INFINITY;
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.as<float>()[i], want) << i;

    test::ModelBuilder bi(18);
    bi.input("x", {2, 0, 4}, onnx::TensorProto::INT32);
    bi.init_i64("axes", {1});
    bi.node(op, {"x", "axes"}, {"y"});
    bi.output("y", {2, 1, 4}, onnx::TensorProto::INT32);
    Session si(test::ctx(), bi.save(std::string("reduce_empty_int_") + op + ".onnx"));
    try {
      si.run({{"x", HostTensor(DType::I32, {2, 0, 4})}});
      ADD_FAILURE() << "an empty integer reduction ran";
    } catch (const Unsupported& e) {
      EXPECT_THAT(e.what(), HasSubstr("reduction over no values"));
    }
  }
}

// Opsets 1 to 6 (onnx/old_opsets.h): a binary op's broadcast=1 with an axis
// lines B up from that axis; without one, B is matched from the end (as
// numpy); operators whose older form differs, or that the list lacks, are
// refused when the model loads.
TEST(OnnxCases, OldOpsetsBroadcastAndRefusals) {
  for (const bool with_axis : {true, false}) {
    SCOPED_TRACE(with_axis ? "axis 1" : "no axis");
    ModelBuilder b(6);
    b.input("a", {2, 3, 4});
    const Shape bs = with_axis ? Shape{3} : Shape{4};
    HostTensor bv = ramp(bs, 10.f, 1.f);
    b.init_f32("b", bs, values(bv));
    b.output("y", {2, 3, 4});
    auto* n = b.node("Add", {"a", "b"}, {"y"});
    ModelBuilder::attr_i(n, "broadcast", 1);
    if (with_axis) ModelBuilder::attr_i(n, "axis", 1);
    Session s(test::ctx(), b.save("old_add.onnx"));
    HostTensor a = ramp({2, 3, 4}, 0.f, 0.5f);
    auto out = s.run({{"a", a}});
    std::vector<double> want(24);
    for (int i = 0; i < 24; ++i) want[size_t(i)] = double(a.as<float>()[i] + bv.as<float>()[with_axis ? (i / 4) % 3 : i % 4]);
    expect_close(out.at("y"), want, 0);
  }
  auto load_error = [](ModelBuilder& b, const std::string& file) -> std::string {
    try {
      Session s(test::ctx(), b.save(file));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  {
    ModelBuilder b(6);
    b.input("x", {2, 3});
    b.output("y", {2, 3});
    b.node("LpNormalization", {"x"}, {"y"});
    EXPECT_THAT(load_error(b, "old_lpnorm.onnx"),
                HasSubstr("node 'y' (LpNormalization, opset 6): operator not supported before opset 7"));
  }
  {
    ModelBuilder b(1);
    b.input("x", {3});
    b.output("y", {3});
    ModelBuilder::attr_s(b.node("Cast", {"x"}, {"y"}), "to", "FLOAT");
    EXPECT_THAT(load_error(b, "old_cast.onnx"), HasSubstr("node 'y' (Cast, opset 1): supported from opset 6"));
  }
}
