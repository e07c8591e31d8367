#include "tools/model_inputs.h"

#include <cctype>
#include <fmt/format.h>

#include <random>

#include "graph/half.h"
#include "graph/npy.h"

namespace wgnn::tools {
namespace {

std::pair<std::string, std::string> split_eq(const std::string& spec, const char* option, const char* form) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    throw Error(fmt::format("{} '{}': expected {}", option, spec, form));
  }
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

int64_t parse_int(const std::string& text, const std::string& what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw Error(fmt::format("{}: '{}' is not an integer", what, text));
  return v;
}

Shape parse_shape(const std::string& name, const std::string& text) {
  Shape s;
  size_t pos = 0;
  while (true) {
    const size_t x = text.find('x', pos);
    const std::string part = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    const int64_t d = parse_int(part, fmt::format("--shape {}={}", name, text));
    if (d < 0) throw Error(fmt::format("--shape {}={}: a dim must be >= 0", name, text));
    s.push_back(d);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return s;
}

HostTensor random_input(const onnx_import::ValueInfo& v, const Shape& shape, const InputOptions& o,
                        std::mt19937& rng) {
  HostTensor t(v.dtype, shape);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int64_t> id(o.int_lo, o.int_hi - 1);
  std::uniform_int_distribution<int> bit(0, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (v.dtype) {
      case DType::F32: t.as<float>()[i] = nd(rng); break;
      case DType::F16: t.as<uint16_t>()[i] = float_to_half(nd(rng)); break;
      case DType::I32: t.as<int32_t>()[i] = int32_t(id(rng)); break;
      case DType::I64: t.as<int64_t>()[i] = id(rng); break;
      case DType::Bool: t.as<uint8_t>()[i] = uint8_t(bit(rng)); break;
      case DType::U8: t.as<uint8_t>()[i] = uint8_t(id(rng)); break;
      case DType::I8: t.as<int8_t>()[i] = int8_t(id(rng)); break;
    }
  }
  return t;
}

}  // namespace

void parse_int_range(const std::string& spec, InputOptions& o) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) throw Error(fmt::format("--int-range '{}': expected LO:HI, e.g. 0:1000", spec));
  const int64_t lo = parse_int(spec.substr(0, colon), "--int-range");
  const int64_t hi = parse_int(spec.substr(colon + 1), "--int-range");
  if (lo >= hi) throw Error(fmt::format("--int-range '{}': LO must be below HI (values are in [LO, HI))", spec));
  if (lo < INT32_MIN || hi - 1 > INT32_MAX) {
    throw Error(fmt::format("--int-range '{}': integer inputs reach the GPU as int32; keep the range within it", spec));
  }
  o.int_lo = lo;
  o.int_hi = hi;
}

std::map<std::string, HostTensor> model_inputs(onnx_import::Session& s, const InputOptions& o) {
  auto find = [&](const std::string& name, const char* option) -> const onnx_import::ValueInfo& {
    for (const auto& v : s.inputs()) {
      if (v.name == name) return v;
    }
    std::vector<std::string> names;
    for (const auto& v : s.inputs()) names.push_back(v.name);
    throw Error(fmt::format("{} {}: the model has no input '{}' (its inputs: {})", option, name, name,
                            fmt::join(names, ", ")));
  };
  std::map<std::string, HostTensor> inputs;
  for (const std::string& spec : o.files) {
    const auto [name, file] = split_eq(spec, "--input", "NAME=FILE.npy");
    find(name, "--input");
    if (inputs.count(name)) throw Error(fmt::format("--input {} is given twice", name));
    inputs[name] = read_npy(file);
  }
  std::map<std::string, Shape> shapes;
  for (const std::string& spec : o.shapes) {
    const auto [name, text] = split_eq(spec, "--shape", "NAME=DIMS, e.g. input=1x3x224x224");
    const auto& v = find(name, "--shape");
    if (inputs.count(name)) throw Error(fmt::format("--shape {}: the input is given as a file (--input)", name));
    Shape shape = parse_shape(name, text);
    if (shape.size() != v.shape.size()) {
      throw Error(fmt::format("--shape {}={}: the model declares rank {} ({})", name, text, v.shape.size(),
                              shape_str(v.shape)));
    }
    bool other = false;
    for (size_t d = 0; d < shape.size(); ++d) other = other || (v.shape[d] >= 0 && v.shape[d] != shape[d]);
    // A model declared at one size (a fully convolutional network exported
    // at 1024x1024) runs at another: the Session is told; one that cannot
    // fails when its graph is built, naming the node.
    if (other) s.set_input_shape(name, shape);
    shapes[name] = shape;
  }
  std::mt19937 rng(o.seed);
  for (const auto& v : s.inputs()) {
    if (inputs.count(v.name)) continue;
    Shape shape = shapes.count(v.name) ? shapes.at(v.name) : v.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) {
        throw Error(fmt::format(
            "input '{}' has a dynamic dim {} ('{}'); give its shape with --shape {}=DIMS or the data with --input "
            "{}=FILE.npy",
            v.name, d, v.dim_names[d], v.name, v.name));
      }
    }
    inputs[v.name] = random_input(v, shape, o, rng);
  }
  return inputs;
}

std::string describe_inputs(const std::map<std::string, HostTensor>& inputs) {
  std::vector<std::string> parts;
  for (const auto& [name, t] : inputs) parts.push_back(fmt::format("{} {} {}", name, dtype_name(t.dtype), shape_str(t.shape)));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string safe_name(const std::string& s) {
  std::string o = s;
  for (char& ch : o) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.' && ch != '-') ch = '_';
  }
  return o.empty() ? "_" : o;
}

}  // namespace wgnn::tools
