// The ONNX loader without a GPU (load_model_from_bytes: what the fuzz target
// runs). Each malformed model is an Error naming what is wrong, never a
// crash, an unbounded allocation or another exception type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>
#include <string>

#include "gpu/error.h"
#include "onnx/model_bytes.h"
#include "onnx/schema_check.h"
#include "onnx/tensor_proto.h"
#include "onnx/session.h"
#include "onnx_model_builder.h"

using namespace wgnn;
using namespace wgnn::onnx_import;
using testing::HasSubstr;
using wgnn::test::ModelBuilder;

namespace {

std::string load_error(const std::string& bytes) {
  try {
    load_model_from_bytes(bytes, "m.onnx", "/nonexistent/wgnn-loader-test");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
std::string load_error(const ModelBuilder& b) { return load_error(b.m.SerializeAsString()); }

ModelBuilder relu_model() {
  ModelBuilder b;
  b.input("x", {4});
  b.output("y", {4});
  b.node("Relu", {"x"}, {"y"});
  return b;
}

}  // namespace

TEST(Loader, AValidModelLoadsWithoutAGpu) {
  ModelBuilder b = relu_model();
  b.init_f32("w", {2}, {1.f, 2.f}, true);
  LoadedModel m = load_model_from_bytes(b.m.SerializeAsString(), "m.onnx", "/nonexistent");
  EXPECT_EQ(m.opset, 17);
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
  ASSERT_EQ(m.outputs.size(), 1u);
  ASSERT_EQ(m.initializers.count("w"), 1u);
  EXPECT_EQ(m.initializers.at("w").shape, (Shape{2}));
}

TEST(Loader, GarbageAndTruncatedBytes) {
  EXPECT_THAT(load_error(""), HasSubstr("has no graph"));
  EXPECT_THAT(load_error("\xff\xff\xff\xff garbage"), HasSubstr("not a valid ONNX model"));
  const std::string good = relu_model().m.SerializeAsString();
  EXPECT_THAT(load_error(good.substr(0, good.size() - 3)), HasSubstr("not a valid ONNX model"));
}

// Dims whose product overflows, or is far larger than the data present,
// must fail before anything of that size is allocated.
TEST(Loader, InitializerDimsAreCheckedBeforeAllocating) {
  {
    ModelBuilder b = relu_model();
    auto* t = b.g->add_initializer();
    t->set_name("huge");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(int64_t(1) << 40);
    t->add_dims(int64_t(1) << 20);
    t->set_raw_data("abcd");
    EXPECT_THAT(load_error(b), HasSubstr("raw_data has 4 bytes"));
  }
  {
    ModelBuilder b = relu_model();
    auto* t = b.g->add_initializer();
    t->set_name("overflow");
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(1) << 62);
    t->add_dims(16);
    EXPECT_THAT(load_error(b), HasSubstr("more elements than int64 counts"));
  }
  {
    ModelBuilder b = relu_model();
    auto* t = b.g->add_initializer();
    t->set_name("negative");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(-3);
    EXPECT_THAT(load_error(b), HasSubstr("tensor 'negative': negative dimension"));
  }
  {
    ModelBuilder b = relu_model();
    auto* t = b.g->add_initializer();
    t->set_name("typed");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(int64_t(1) << 40);
    t->add_float_data(1.f);
    EXPECT_THAT(load_error(b), HasSubstr("tensor 'typed': float_data holds 1 values"));
  }
}

TEST(Loader, ExternalDataNumbersAndLocation) {
  auto with_external = [](const std::string& key, const std::string& value) {
    ModelBuilder b = relu_model();
    auto* t = b.g->add_initializer();
    t->set_name("ext");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = t->add_external_data();
    loc->set_key("location");
    loc->set_value(key == "location" ? value : "weights.bin");
    if (key != "location") {
      auto* kv = t->add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
    return load_error(b);
  };
  EXPECT_THAT(with_external("offset", "not a number"), HasSubstr("external data offset 'not a number' is not a non-negative"));
  EXPECT_THAT(with_external("length", "99999999999999999999999"), HasSubstr("external data length"));
  EXPECT_THAT(with_external("offset", "-5"), HasSubstr("is not a non-negative integer"));
  EXPECT_THAT(with_external("location", "/etc/passwd"), HasSubstr("lies outside the model's folder"));
  EXPECT_THAT(with_external("location", "../../x.bin"), HasSubstr("lies outside the model's folder"));
  EXPECT_THAT(with_external("offset", "0"), HasSubstr("cannot open external data file"));
}

TEST(Loader, NodeWithoutOutputsAndOpsetBeyondInt) {
  {
    ModelBuilder b = relu_model();
    auto* n = b.g->add_node();  // no name, no outputs, an input nothing makes
    n->set_op_type("Relu");
    n->add_input("ghost");
    EXPECT_THAT(load_error(b), HasSubstr("node '(unnamed, no output)' (Relu): input 'ghost' is produced by no node"));
  }
  {
    ModelBuilder b = relu_model();
    b.m.mutable_opset_import(0)->set_version((int64_t(1) << 32) + 13);  // 13 if cut to 32 bits
    EXPECT_THAT(load_error(b), HasSubstr("uses ONNX opset 4294967309"));
  }
}

TEST(Loader, GraphValuesAndCycles) {
  {
    ModelBuilder b;
    b.input("x", {4});
    b.output("y", {4});
    b.node("Relu", {"z"}, {"y"});
    b.node("Relu", {"y"}, {"z"});
    EXPECT_THAT(load_error(b), HasSubstr("the graph has a cycle"));
  }
  {
    // Found by scripts/fuzz session: a node reading its own output passed the
    // ordering and failed later with std::out_of_range.
    ModelBuilder b;
    b.input("x", {4});
    b.output("y", {4});
    b.node("Relu", {"y"}, {"y"});
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Relu): input 'y' is its own output"));
  }
  {
    ModelBuilder b = relu_model();
    b.output("nothing", {4});
    EXPECT_THAT(load_error(b), HasSubstr("graph output 'nothing' is produced by nothing"));
  }
  {
    ModelBuilder b = relu_model();
    b.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
    EXPECT_THAT(load_error(b), HasSubstr("graph value 'x': element type string"));
  }
}

TEST(Loader, ModelWithoutOpsetImport) {
  ModelBuilder b = relu_model();
  b.m.clear_opset_import();
  const std::string e = load_error(b);
  EXPECT_THAT(e, HasSubstr("has no opset_import: the model does not say which opset it uses"));
  EXPECT_THAT(e, testing::Not(HasSubstr("opset 1")));
  // Only another domain imported (libonnx-testdata's optimizer cases):
  // unsupported operators, not a malformed file.
  auto* op = b.m.add_opset_import();
  op->set_domain("ai.onnx.preview.training");
  op->set_version(1);
  EXPECT_THAT(load_error(b), HasSubstr("imports no ONNX-domain opset, only 'ai.onnx.preview.training' 1"));
}

// An external-data location naming a FIFO blocked the load forever; a folder
// or a device is no data either.
TEST(Loader, ExternalDataMustBeARegularFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("wgnn_loader_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "folder");
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  auto with_location = [&](const std::string& location) {
    ModelBuilder b = relu_model();
    auto* t = b.g->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    try {
      load_model_from_bytes(b.m.SerializeAsString(), "m.onnx", dir.string());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(with_location("pipe"), HasSubstr("external data location 'pipe' is not a regular file"));
  EXPECT_THAT(with_location("folder"), HasSubstr("is not a regular file"));
  EXPECT_THAT(with_location("absent.bin"), HasSubstr("cannot open external data file"));
  fs::remove_all(dir);
}

// ONNX rules that ONNX Runtime enforces (onnx/schema_check.h): each of these
// models used to run and give wrong numbers or fail with std::out_of_range.
namespace {

onnx::AttributeProto* attr(onnx::NodeProto* n, const std::string& name, onnx::AttributeProto::AttributeType t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}

ModelBuilder unary_model(const std::string& op, int opset = 17) {
  ModelBuilder b(opset);
  b.input("x", {2, 3});
  b.output("y", {2, 3});
  b.node(op, {"x"}, {"y"});
  return b;
}

}  // namespace

TEST(Loader, AttributeTypesAreCheckedAgainstTheSchema) {
  {
    ModelBuilder b;
    b.input("a", {2, 2});
    b.input("b", {2, 2});
    b.output("y", {2, 2});
    auto* a = attr(b.node("Gemm", {"a", "b"}, {"y"}), "alpha", onnx::AttributeProto::INTS);
    a->add_ints(2);
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Gemm): attribute 'alpha' is INTS; Gemm requires FLOAT"));
  }
  {
    ModelBuilder b = unary_model("Softmax");
    attr(b.g->mutable_node(0), "axis", onnx::AttributeProto::FLOAT)->set_f(1.5f);
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Softmax): attribute 'axis' is FLOAT; Softmax requires INT"));
  }
  {
    ModelBuilder b;
    b.input("x", {1, 1, 4, 4});
    b.init_f32("w", {1, 1, 1, 1}, {1.f});
    b.output("y", {1, 1, 2, 2});
    attr(b.node("Conv", {"x", "w"}, {"y"}), "strides", onnx::AttributeProto::STRING)->set_s("2,2");
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Conv): attribute 'strides' is STRING; Conv requires INTS"));
  }
  {
    // No `type` field (IR version 1 files): the type is the field that is set.
    ModelBuilder b = unary_model("Softmax");
    auto* a = b.g->mutable_node(0)->add_attribute();
    a->set_name("axis");
    a->set_f(1.5f);
    EXPECT_THAT(load_error(b), HasSubstr("attribute 'axis' is FLOAT; Softmax requires INT"));
  }
  {
    ModelBuilder b = unary_model("Relu");
    ModelBuilder::attr_int(b.g->mutable_node(0), "alpha", 1);
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Relu): attribute 'alpha' is not an attribute of Relu at opset 17"));
  }
  {
    ModelBuilder b = unary_model("Cast");
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Cast): required attribute 'to' (INT) is missing"));
  }
  {
    ModelBuilder b = unary_model("Softmax");
    ModelBuilder::attr_int(b.g->mutable_node(0), "axis", 0);
    ModelBuilder::attr_int(b.g->mutable_node(0), "axis", 1);
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Softmax): attribute 'axis' is given twice"));
  }
}

TEST(Loader, InputAndOutputCountsAreCheckedAgainstTheSchema) {
  {
    ModelBuilder b;
    b.input("x", {4});
    b.output("y", {4});
    b.node("Relu", {"x", "x", "x"}, {"y"});
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Relu, opset 17): has 3 inputs; Relu takes exactly 1"));
  }
  {
    ModelBuilder b;
    b.input("x", {4});
    b.output("y", {4});
    b.node("Add", {"x"}, {"y"});
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Add, opset 17): has 1 input; Add takes exactly 2"));
  }
  {
    ModelBuilder b;
    b.input("x", {4});
    b.output("y", {4});
    b.node("Relu", {"x"}, {"y", "z"});
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Relu, opset 17): has 2 outputs; Relu makes exactly 1"));
  }
  {
    ModelBuilder b;
    b.input("x", {4});
    b.output("y", {4});
    b.node("Add", {"", "x"}, {"y"});
    EXPECT_THAT(load_error(b), HasSubstr("node 'y' (Add, opset 17): input 0 ('A') is required but left empty"));
  }
  {
    // Optional inputs may be left empty: Clip with only a maximum loads.
    ModelBuilder b;
    b.input("x", {4});
    b.init_f32("hi", {}, {1.f});
    b.output("y", {4});
    b.node("Clip", {"x", "", "hi"}, {"y"});
    EXPECT_EQ(load_error(b), "no error");
  }
}

TEST(Loader, OpsetsBeyondLibonnxCheckOnlyAttributeTypes) {
  ASSERT_GE(schema_max_opset(), 17);
  const int later = schema_max_opset() + 1;
  {
    // An attribute the newest known schema lacks may be new: not an error.
    ModelBuilder b = unary_model("Relu", later);
    ModelBuilder::attr_int(b.g->mutable_node(0), "new_in_a_later_opset", 1);
    EXPECT_EQ(load_error(b), "no error");
  }
  {
    ModelBuilder b = unary_model("Softmax", later);
    attr(b.g->mutable_node(0), "axis", onnx::AttributeProto::FLOAT)->set_f(1.5f);
    EXPECT_THAT(load_error(b), HasSubstr("attribute 'axis' is FLOAT; Softmax requires INT"));
  }
}

TEST(Loader, EveryValueIsAssignedOnce) {
  {
    // ONNX Runtime takes the last of two initializers of one name; wgnn took
    // the first. Neither is right: the model is ambiguous.
    ModelBuilder b = relu_model();
    b.init_f32("w", {1}, {1.f});
    b.init_f32("w", {1}, {2.f});
    EXPECT_THAT(load_error(b), HasSubstr("initializer 'w' is given twice"));
  }
  {
    ModelBuilder b = relu_model();
    b.node("Relu", {"y"}, {"x"});
    EXPECT_THAT(load_error(b), HasSubstr("node 'x' (Relu): writes 'x', which is a graph input"));
  }
  {
    ModelBuilder b = relu_model();
    b.init_f32("w", {4}, {1.f, 2.f, 3.f, 4.f});
    b.node("Relu", {"x"}, {"w"});
    EXPECT_THAT(load_error(b), HasSubstr("node 'w' (Relu): writes 'w', which is an initializer"));
  }
  {
    ModelBuilder b = relu_model();
    b.node("Neg", {"x"}, {"y"})->set_name("second");
    EXPECT_THAT(load_error(b), HasSubstr("node 'second' (Neg): writes 'y', which is also written by node 'y' (Relu)"));
  }
  {
    ModelBuilder b = relu_model();
    b.g->mutable_output()->Clear();
    EXPECT_THAT(load_error(b), HasSubstr("the graph has no outputs"));
  }
  {
    ModelBuilder b = relu_model();
    b.output("", {4});
    EXPECT_THAT(load_error(b), HasSubstr("graph output 1 has an empty name"));
  }
  {
    ModelBuilder b = relu_model();
    b.input("x", {4});
    EXPECT_THAT(load_error(b), HasSubstr("graph input 'x' is declared twice"));
  }
  {
    // Old-style models list initializers among the inputs: allowed.
    ModelBuilder b = relu_model();
    b.input("w", {1});
    b.init_f32("w", {1}, {1.f});
    EXPECT_EQ(load_error(b), "no error");
  }
}

// Initializers' raw bytes are read straight from the model's bytes (the rest
// parsed without them): every initializer as protobuf's own parse gives it,
// raw or typed, from a file or from bytes; bytes not in the plain form go to
// protobuf as they are.
TEST(Loader, InitializersReadStraightFromTheBytesAreProtobufsOwn) {
  ModelBuilder b = relu_model();
  std::vector<float> big(300000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i % 977) * 0.25f - 7.f;
  b.init_f32("raw", {300000}, big, true);
  b.init_f32("typed", {3}, {1.f, -2.f, 3.5f}, false);
  b.init_i64("ints", {4, -5, 6});
  b.init_f32("empty", {0}, {}, true);
  b.init_f32("raw2", {2, 2}, {9.f, 8.f, 7.f, 6.f}, true);
  b.g->mutable_initializer(0)->set_doc_string("kept");  // a field after raw_data in the tensor
  const std::string bytes = b.m.SerializeAsString();

  SplitModel split;
  ASSERT_TRUE(split_initializer_bytes(bytes, split));
  ASSERT_EQ(split.raw.size(), 5u);
  EXPECT_TRUE(split.raw[0].present);
  EXPECT_EQ(split.raw[0].size, big.size() * 4);
  EXPECT_FALSE(split.raw[1].present);
  EXPECT_FALSE(split.raw[2].present);
  EXPECT_LT(split.rest.size(), 1000u);  // the 1.2 MB of raw bytes are not in it
  onnx::ModelProto rest;
  ASSERT_TRUE(rest.ParseFromString(split.rest));
  EXPECT_EQ(rest.graph().initializer_size(), 5);
  EXPECT_FALSE(rest.graph().initializer(0).has_raw_data());
  EXPECT_EQ(rest.graph().initializer(0).doc_string(), "kept");
  EXPECT_EQ(rest.graph().node_size(), 1);

  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("wgnn-loader-split-" + std::to_string(::getpid()) + ".onnx");
  { std::ofstream(file, std::ios::binary) << bytes; }
  for (int from_file = 0; from_file < 2; ++from_file) {
    LoadedModel m = from_file ? load_model(file.string()) : load_model_from_bytes(bytes, "m.onnx", "/nonexistent");
    ASSERT_EQ(m.initializers.size(), 5u);
    for (const auto& init : b.g->initializer()) {
      const HostTensor want = from_tensor_proto(init, ".");
      const HostTensor& got = m.initializers.at(init.name());
      EXPECT_EQ(got.dtype, want.dtype) << init.name();
      EXPECT_EQ(got.shape, want.shape) << init.name();
      EXPECT_EQ(got.data, want.data) << init.name() << (from_file ? " from the file" : " from bytes");
    }
  }
  std::filesystem::remove(file);

  // Two graph fields (protobuf merges them), a raw_data given twice, a
  // truncated length: not the plain form; protobuf decides.
  SplitModel no;
  EXPECT_FALSE(split_initializer_bytes(bytes + bytes, no));
  onnx::TensorProto once;
  once.set_raw_data("ab");
  const auto field = [](char tag, const std::string& payload) {
    return std::string(1, tag) + char(payload.size()) + payload;  // payloads under 128 bytes
  };
  const std::string tensor_twice = once.SerializeAsString() + once.SerializeAsString();
  EXPECT_FALSE(split_initializer_bytes(field('\x3a', field('\x2a', tensor_twice)), no));
  EXPECT_TRUE(split_initializer_bytes(field('\x3a', field('\x2a', once.SerializeAsString())), no));
  EXPECT_FALSE(split_initializer_bytes(bytes.substr(0, bytes.size() / 2), no));
  EXPECT_FALSE(split_initializer_bytes("", no));
  // protobuf merges the two: the graph's inputs twice, which the checks refuse.
  EXPECT_THAT(load_error(bytes + bytes), HasSubstr("declared twice"));
  EXPECT_THAT(load_error(bytes.substr(0, bytes.size() / 2)), HasSubstr("not a valid ONNX model"));
}
