#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "graph/npy.h"
#include "onnx/session.h"
#include "tools/commands.h"
#include "tools/model_inputs.h"

namespace wgnn::tools {
namespace {


int run(gpu::Context& ctx, const RunOptions& o, std::string* step) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  onnx_import::SessionOptions so;
  so.verbose = o.verbose;
  so.fp16 = o.fp16;
  so.checked = !o.unchecked;
  onnx_import::Session s(ctx, o.model, so);
  const double load_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  // One file per output, named after it: two names that become one file
  // name would overwrite each other, so they are refused before the run.
  std::map<std::string, std::string> file_of;  // file name -> output
  for (const auto& v : s.outputs()) {
    const std::string file = safe_name(v.name) + ".npy";
    auto [it, fresh] = file_of.emplace(file, v.name);
    if (!fresh) {
      throw Error(fmt::format("outputs '{}' and '{}' would both be written to {} (characters other than letters, "
                              "digits, '_', '.' and '-' become '_'): rename one in the model",
                              it->second, v.name, file));
    }
  }
  InputOptions io;
  io.files = o.inputs;
  io.shapes = o.shapes;
  io.seed = o.seed;
  parse_int_range(o.int_range, io);
  *step = "making the model's inputs";
  const std::map<std::string, HostTensor> inputs = model_inputs(s, io);
  const auto t1 = clock::now();
  *step = "running the model";
  auto outputs = s.run(inputs);
  const double run_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count();
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) throw Error(fmt::format("--output-dir '{}': cannot create it: {}", o.output_dir, ec.message()));
  for (const auto& v : s.outputs()) {
    const HostTensor& t = outputs.at(v.name);
    const std::string path = (std::filesystem::path(o.output_dir) / (safe_name(v.name) + ".npy")).string();
    *step = fmt::format("writing '{}'", path);
    write_npy(path, t);
    fmt::print("{} {} {} -> {}\n", v.name, dtype_name(t.dtype), shape_str(t.shape), path);
  }
  std::fflush(stdout);
  if (o.verbose) {
    fmt::print("load {:.1f} ms, first run {:.1f} ms (build + run)\n", load_ms, run_ms);
    fmt::print("{}\n", s.summary());
  }
  *step = "running the model again";
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

}  // namespace

int run_model(gpu::Context& ctx, const RunOptions& o) {
  std::string step = fmt::format("loading the model '{}'", o.model);
  try {
    return run(ctx, o, &step);
  } catch (const std::bad_alloc&) {
    throw HostOutOfMemory(step);
  }
}

}  // namespace wgnn::tools
