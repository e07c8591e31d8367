#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>

#include "graph/half.h"
#include "graph/npy.h"
#include "onnx/session.h"
#include "tools/commands.h"

namespace wgnn::tools {
namespace {

std::string safe_name(const std::string& s) {
  std::string o = s;
  for (char& ch : o) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.' && ch != '-') ch = '_';
  }
  return o.empty() ? "_" : o;
}

HostTensor random_input(const onnx_import::ValueInfo& v, std::mt19937& rng) {
  Shape shape = v.shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      throw Error(fmt::format("input '{}' has a dynamic dim {} ('{}'); give the input with --input {}=FILE.npy",
                              v.name, d, v.dim_names[d], v.name));
    }
  }
  HostTensor t(v.dtype, shape);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> id(0, 3);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (v.dtype) {
      case DType::F32: t.as<float>()[i] = nd(rng); break;
      case DType::F16: t.as<uint16_t>()[i] = float_to_half(nd(rng)); break;
      case DType::I32: t.as<int32_t>()[i] = id(rng); break;
      case DType::I64: t.as<int64_t>()[i] = id(rng); break;
      case DType::Bool: t.as<uint8_t>()[i] = uint8_t(id(rng) & 1); break;
      case DType::U8: t.as<uint8_t>()[i] = uint8_t(id(rng)); break;
      case DType::I8: t.as<int8_t>()[i] = int8_t(id(rng)); break;
    }
  }
  return t;
}

}  // namespace

int run_model(gpu::Context& ctx, const RunOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  onnx_import::Session s(ctx, o.model, {o.verbose});
  const double load_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  std::map<std::string, HostTensor> inputs;
  for (const std::string& spec : o.inputs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos) throw Error(fmt::format("--input '{}': expected NAME=FILE.npy", spec));
    inputs[spec.substr(0, eq)] = read_npy(spec.substr(eq + 1));
  }
  std::mt19937 rng(o.seed);
  for (const auto& v : s.inputs()) {
    if (!inputs.count(v.name)) inputs[v.name] = random_input(v, rng);
  }
  const auto t1 = clock::now();
  auto outputs = s.run(inputs);
  const double run_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count();
  std::filesystem::create_directories(o.output_dir);
  for (const auto& v : s.outputs()) {
    const HostTensor& t = outputs.at(v.name);
    const std::string path = (std::filesystem::path(o.output_dir) / (safe_name(v.name) + ".npy")).string();
    write_npy(path, t);
    fmt::print("{} {} {} -> {}\n", v.name, dtype_name(t.dtype), shape_str(t.shape), path);
  }
  if (o.verbose) {
    fmt::print("load {:.1f} ms, first run {:.1f} ms (build + run)\n", load_ms, run_ms);
    fmt::print("{}\n", s.summary());
  }
  if (o.repeat > 1) {
    // Later runs with the same shapes reuse the graph: no rebuild, no new
    // bind groups; host work is writing inputs, encoding, reading outputs.
    std::vector<double> wall, encode;
    for (int r = 1; r < o.repeat; ++r) {
      const auto a = clock::now();
      s.run(inputs);
      wall.push_back(std::chrono::duration<double, std::milli>(clock::now() - a).count());
      encode.push_back(s.graph().last_run().encode_us);
    }
    std::sort(wall.begin(), wall.end());
    std::sort(encode.begin(), encode.end());
    fmt::print("{} more runs: median {:.3f} ms per run, {:.1f} us to encode {} dispatches; graphs built: {}\n",
               o.repeat - 1, wall[wall.size() / 2], encode[encode.size() / 2], s.graph().last_run().dispatches,
               s.builds());
  }
  return 0;
}

}  // namespace wgnn::tools
