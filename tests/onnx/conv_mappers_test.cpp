// ONNX Conv, ConvTranspose and pooling mappers: the pads they derive from
// auto_pad, output_shape and asymmetric pads (cases the backend test data
// does not cover), checked against the op called directly with the pads
// worked out by hand; global pooling over 1-D and 3-D inputs; what stays
// unsupported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "error_of.h"
#include "gpu_fixture.h"
#include "graph/host_tensor.h"
#include "onnx/session.h"
#include "ops/registry.h"

using namespace wgnn;
using wgnn::test::error_of;
using onnx_import::Session;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

// A model of one node: graph inputs, float initializers, attributes.
struct OneNode {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  onnx::NodeProto* n;
  OneNode(const std::string& op, int opset = 17) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
    n = g->add_node();
    n->set_op_type(op);
    n->set_name(op);
  }
  static void info(onnx::ValueInfoProto* v, const std::string& name, const Shape& s, int elem) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (int64_t d : s) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void input(const std::string& name, const Shape& s) {
    info(g->add_input(), name, s, onnx::TensorProto::FLOAT);
    n->add_input(name);
  }
  void weight(const std::string& name, const Shape& s, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : s) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    n->add_input(name);
  }
  void output(const std::string& name, const Shape& s, int elem = onnx::TensorProto::FLOAT) {
    info(g->add_output(), name, s, elem);
    n->add_output(name);
  }
  void ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  void integer(const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  void str(const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  std::string save(const std::string& file) {
    fs::path dir = fs::temp_directory_path() / ("wgnn_conv_onnx_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string p = (dir / file).string();
    std::ofstream out(p, std::ios::binary);
    m.SerializeToOstream(&out);
    return p;
  }
};

std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

HostTensor host(const Shape& s, const std::vector<float>& v) {
  HostTensor t(DType::F32, s);
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

std::vector<float> floats(const HostTensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

// The ops the session's graph recorded.
std::vector<std::string> ops_of(Session& s) {
  std::vector<std::string> v;
  for (const auto& d : s.graph().dispatches()) v.push_back(d.op);
  return v;
}

// Runs `op` on x (an input) and w / b (constants) in a graph of its own.
std::vector<Value> direct(const std::string& op, const Shape& xs, const std::vector<float>& x,
                          std::function<ValueList(Graph&, TensorRef)> args, Graph& g) {
  TensorRef tx = g.add_tensor(xs, DType::F32, TensorKind::Input);
  g.write(tx, x.data(), x.size() * 4);
  Value r = ops::call(g, op, args(g, tx));
  g.run();
  return r.is_list() ? r.list() : std::vector<Value>{r};
}

struct ConvCase {
  std::string op;  // Conv or ConvTranspose
  Shape x, w, y;
  std::function<void(OneNode&)> attrs;
  std::string expect_op;
  IntList stride, padding;
  bool transposed;
};

void check_conv(const ConvCase& c) {
  const int64_t cout = c.op == "Conv" ? c.w[0] : c.w[1];
  auto x = randoms(size_t(numel(c.x)), 1), w = randoms(size_t(numel(c.w)), 2), b = randoms(size_t(cout), 3);
  OneNode m(c.op);
  m.input("x", c.x);
  m.weight("w", c.w, w);
  m.weight("b", {cout}, b);
  m.output("y", c.y);
  c.attrs(m);
  Session s(test::ctx(), m.save(c.op + ".onnx"));
  HostTensor y = s.run({{"x", host(c.x, x)}}).at("y");
  EXPECT_EQ(y.shape, c.y);
  EXPECT_THAT(ops_of(s), testing::Contains(c.expect_op));
  Graph g(test::ctx());
  auto r = direct(c.expect_op, c.x, x,
                  [&](Graph& gg, TensorRef tx) {
                    TensorRef tw = gg.add_constant(c.w, DType::F32, w.data());
                    TensorRef tb = gg.add_constant({cout}, DType::F32, b.data());
                    const size_t d = c.x.size() - 2;
                    return ValueList{tx, tw, tb, c.stride, c.padding, IntList(d, 1), c.transposed, IntList(d, 0),
                                     int64_t(1)};
                  },
                  g);
  EXPECT_EQ(g.info(r[0].tensor()).shape, c.y);
  EXPECT_EQ(floats(y), g.read<float>(r[0].tensor()));
}

}  // namespace

TEST(OnnxConv, SameUpperPutsTheOddPadAtTheEnd) {
  // H: out 5, total pad 1 -> (0, 1); W: out ceil(7 / 2) = 4, total 2 -> (1, 1).
  check_conv({"Conv", {1, 2, 5, 7}, {3, 2, 2, 3}, {1, 3, 5, 4},
              [](OneNode& m) {
                m.str("auto_pad", "SAME_UPPER");
                m.ints("strides", {1, 2});
              },
              "wgnn.convolution_padded.default", {1, 2}, {0, 1, 1, 1}, false});
}

TEST(OnnxConv, SameLowerPutsTheOddPadAtTheBeginning) {
  check_conv({"Conv", {1, 2, 5, 7}, {3, 2, 2, 3}, {1, 3, 5, 4},
              [](OneNode& m) {
                m.str("auto_pad", "SAME_LOWER");
                m.ints("strides", {1, 2});
              },
              "wgnn.convolution_padded.default", {1, 2}, {1, 1, 0, 1}, false});
}

TEST(OnnxConv, SymmetricPadsUseTheAtenOp) {
  check_conv({"Conv", {2, 3, 6, 6}, {4, 3, 3, 3}, {2, 4, 3, 3},
              [](OneNode& m) {
                m.ints("pads", {1, 1, 1, 1});
                m.ints("strides", {2, 2});
                m.ints("kernel_shape", {3, 3});
              },
              "aten.convolution.default", {2, 2}, {1, 1}, false});
}

TEST(OnnxConvTranspose, OutputShapeLargerThanDefaultPadsTheEnd) {
  // Default output 9 x 7; output_shape 9 x 8: W's total pad is -1, so
  // (begin, end) = (0, -1): one more column at the end.
  check_conv({"ConvTranspose", {1, 2, 3, 3}, {2, 3, 3, 3}, {1, 3, 9, 8},
              [](OneNode& m) {
                m.ints("strides", {3, 2});
                m.ints("output_shape", {9, 8});
              },
              "wgnn.convolution_padded.default", {3, 2}, {0, 0, 0, -1}, true});
}

TEST(OnnxConvTranspose, SameLowerPadsTheBeginning) {
  // out = in * stride = 6; total pad 2 * 2 + 3 - 6 = 1 -> (1, 0).
  check_conv({"ConvTranspose", {1, 1, 3, 3}, {1, 2, 3, 3}, {1, 2, 6, 6},
              [](OneNode& m) {
                m.str("auto_pad", "SAME_LOWER");
                m.ints("strides", {2, 2});
              },
              "wgnn.convolution_padded.default", {2, 2}, {1, 1, 0, 0}, true});
}

TEST(OnnxPool, AveragePoolAsymmetricPadsCeilCountIncludePad) {
  const Shape xs{1, 2, 7, 8};
  auto x = randoms(size_t(numel(xs)), 4);
  OneNode m("AveragePool");
  m.input("x", xs);
  m.output("y", {1, 2, 4, 5});
  m.ints("kernel_shape", {3, 3});
  m.ints("strides", {2, 2});
  m.ints("pads", {0, 1, 2, 1});
  m.integer("ceil_mode", 1);
  m.integer("count_include_pad", 1);
  Session s(test::ctx(), m.save("avgpool.onnx"));
  HostTensor y = s.run({{"x", host(xs, x)}}).at("y");
  // H: ceil((7 + 0 + 2 - 3) / 2) + 1 = 4; W: ceil((8 + 1 + 1 - 3) / 2) + 1 = 5.
  EXPECT_EQ(y.shape, (Shape{1, 2, 4, 5}));
  Graph g(test::ctx());
  auto r = direct("wgnn.avg_pool_padded.default", xs, x,
                  [](Graph&, TensorRef tx) {
                    return ValueList{tx, IntList{3, 3}, IntList{2, 2}, IntList{0, 1, 2, 1}, IntList{1, 1}, true, true};
                  },
                  g);
  EXPECT_EQ(floats(y), g.read<float>(r[0].tensor()));
}

TEST(OnnxPool, MaxPoolIndicesColumnMajor) {
  const Shape xs{1, 2, 4, 5};
  auto x = randoms(size_t(numel(xs)), 5);
  OneNode m("MaxPool");
  m.input("x", xs);
  m.output("y", {1, 2, 2, 2});
  m.output("i", {1, 2, 2, 2}, onnx::TensorProto::INT64);
  m.ints("kernel_shape", {2, 2});
  m.ints("strides", {2, 2});
  m.integer("storage_order", 1);
  Session s(test::ctx(), m.save("maxpool_idx.onnx"));
  auto out = s.run({{"x", host(xs, x)}});
  // The argmax of every window, by hand, column-major within (H, W) plus the
  // plane's offset.
  std::vector<int64_t> want;
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t oh = 0; oh < 2; ++oh) {
      for (int64_t ow = 0; ow < 2; ++ow) {
        int64_t best_h = -1, best_w = -1;
        float best = 0;
        for (int64_t h = oh * 2; h < oh * 2 + 2; ++h) {
          for (int64_t w = ow * 2; w < ow * 2 + 2; ++w) {
            const float v = x[size_t((c * 4 + h) * 5 + w)];
            if (best_h < 0 || v > best) best = v, best_h = h, best_w = w;
          }
        }
        want.push_back(c * 20 + best_w * 4 + best_h);
      }
    }
  }
  const HostTensor& idx = out.at("i");
  EXPECT_EQ(idx.dtype, DType::I64);
  EXPECT_EQ(std::vector<int64_t>(idx.as<int64_t>(), idx.as<int64_t>() + idx.numel()), want);
}

TEST(OnnxPool, GlobalPoolsOverOneAndThreeSpatialDims) {
  {
    const Shape xs{2, 3, 2, 3, 4};
    auto x = randoms(size_t(numel(xs)), 6);
    OneNode m("GlobalAveragePool");
    m.input("x", xs);
    m.output("y", {2, 3, 1, 1, 1});
    Session s(test::ctx(), m.save("gap3d.onnx"));
    HostTensor y = s.run({{"x", host(xs, x)}}).at("y");
    ASSERT_EQ(y.shape, (Shape{2, 3, 1, 1, 1}));
    for (size_t r = 0; r < 6; ++r) {
      double sum = 0;
      for (size_t j = 0; j < 24; ++j) sum += x[r * 24 + j];
      EXPECT_NEAR(y.as<float>()[r], sum / 24, 1e-6);
    }
  }
  {
    const Shape xs{2, 3, 10};
    auto x = randoms(size_t(numel(xs)), 7);
    OneNode m("GlobalMaxPool");
    m.input("x", xs);
    m.output("y", {2, 3, 1});
    Session s(test::ctx(), m.save("gmp1d.onnx"));
    HostTensor y = s.run({{"x", host(xs, x)}}).at("y");
    ASSERT_EQ(y.shape, (Shape{2, 3, 1}));
    for (size_t r = 0; r < 6; ++r) EXPECT_EQ(y.as<float>()[r], *std::max_element(&x[r * 10], &x[r * 10 + 10]));
  }
}

TEST(OnnxPool, UnsupportedCasesSayWhy) {
  {
    OneNode m("MaxPool");
    m.input("x", {1, 1, 4, 4, 4});
    m.output("y", {1, 1, 2, 2, 2});
    m.output("i", {1, 1, 2, 2, 2}, onnx::TensorProto::INT64);
    m.ints("kernel_shape", {2, 2, 2});
    m.ints("strides", {2, 2, 2});
    m.integer("storage_order", 1);
    Session s(test::ctx(), m.save("maxpool3d_idx.onnx"));
    HostTensor x(DType::F32, {1, 1, 4, 4, 4});
    EXPECT_THROW(s.run({{"x", x}}), Unsupported);
    const std::string e = error_of([&] { s.run({{"x", x}}); });
    EXPECT_THAT(e, HasSubstr("column-major (storage_order 1) Indices of a 3-D MaxPool"));
  }
  {
    OneNode m("Conv");
    m.input("x", {1, 1, 2, 2, 2, 2});
    m.weight("w", {1, 1, 1, 1, 1, 1}, {1});
    m.output("y", {1, 1, 2, 2, 2, 2});
    Session s(test::ctx(), m.save("conv4d.onnx"));
    HostTensor x(DType::F32, {1, 1, 2, 2, 2, 2});
    EXPECT_THROW(s.run({{"x", x}}), Unsupported);
    const std::string e = error_of([&] { s.run({{"x", x}}); });
    EXPECT_THAT(e, HasSubstr("4 spatial dims; supported: 1 to 3"));
  }
}
