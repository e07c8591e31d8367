#pragma once
// Small ONNX models built in tests with the ONNX protobuf classes and saved
// to a temporary folder.
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace wgnn::test {

struct ModelBuilder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  explicit ModelBuilder(int opset = 17) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
  }
  // A dim < 0 is dynamic, named params[i] (or "N").
  void io(onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<int64_t>& shape,
          const std::vector<std::string>& params = {}) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* sh = tt->mutable_shape();
    for (size_t i = 0; i < shape.size(); ++i) {
      auto* d = sh->add_dim();
      if (shape[i] >= 0) d->set_dim_value(shape[i]);
      else d->set_dim_param(i < params.size() ? params[i] : "N");
    }
  }
  void input(const std::string& n, const std::vector<int64_t>& s, int elem = onnx::TensorProto::FLOAT,
             const std::vector<std::string>& params = {}) {
    io(g->add_input(), n, elem, s, params);
  }
  void output(const std::string& n, const std::vector<int64_t>& s, int elem = onnx::TensorProto::FLOAT,
              const std::vector<std::string>& params = {}) {
    io(g->add_output(), n, elem, s, params);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out.empty() ? op : out[0]);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  void init_i64(const std::string& n, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (auto x : v) t->add_int64_data(x);
  }
  void init_f32(const std::string& n, const std::vector<int64_t>& dims, const std::vector<float>& v, bool raw = false) {
    auto* t = g->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    if (raw) t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    else
      for (auto x : v) t->add_float_data(x);
  }
  // 8-bit values (elem onnx::TensorProto::INT8 or UINT8), as raw bytes.
  void init_8bit(const std::string& n, int elem, const std::vector<int64_t>& dims, const std::vector<int>& v) {
    auto* t = g->add_initializer();
    t->set_name(n);
    t->set_data_type(elem);
    for (auto d : dims) t->add_dims(d);
    std::string raw;
    for (int x : v) raw.push_back(char(uint8_t(x & 255)));
    t->set_raw_data(raw);
  }
  static void attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  std::string save(const std::string& name) {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("wgnn_onnx_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string p = (dir / name).string();
    std::ofstream out(p, std::ios::binary);
    m.SerializeToOstream(&out);
    return p;
  }
};

}  // namespace wgnn::test
