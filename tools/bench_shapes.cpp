// `wgnn bench-shapes`: one Session run at many input shapes, in one process:
// what each new shape costs to build, what it costs to run, and what stays
// on the GPU (the weights once, the plans kept).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "graph/npy.h"
#include "onnx/session.h"
#include "tools/commands.h"
#include "tools/model_inputs.h"

using nlohmann::json;

namespace wgnn::tools {
namespace {

using clock = std::chrono::steady_clock;
double ms_since(clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); }
double mib(uint64_t b) { return double(b) / double(1 << 20); }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

int64_t parse_dim_value(const std::string& text, const std::string& spec) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v < 1) {
    throw Error(fmt::format("--dim {}: '{}' is not a size (an integer >= 1)", spec, text));
  }
  return v;
}

// "seq=1:64" (every value from 1 to 64), "seq=1:64:8" (step 8), "seq=1,2,7".
std::pair<std::string, std::vector<int64_t>> parse_dim(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    throw Error(fmt::format("--dim {}: expected NAME=LO:HI[:STEP] or NAME=V1,V2,... (NAME: a symbolic dim of the "
                            "model's inputs)",
                            spec));
  }
  const std::string name = spec.substr(0, eq), rest = spec.substr(eq + 1);
  std::vector<int64_t> values;
  if (rest.find(':') != std::string::npos) {
    const auto parts = split(rest, ':');
    if (parts.size() > 3) throw Error(fmt::format("--dim {}: expected LO:HI[:STEP]", spec));
    const int64_t lo = parse_dim_value(parts[0], spec), hi = parse_dim_value(parts[1], spec);
    const int64_t step = parts.size() == 3 ? parse_dim_value(parts[2], spec) : 1;
    if (hi < lo) throw Error(fmt::format("--dim {}: HI is below LO", spec));
    for (int64_t v = lo; v <= hi; v += step) values.push_back(v);
  } else {
    for (const auto& p : split(rest, ',')) values.push_back(parse_dim_value(p, spec));
  }
  return {name, values};
}

struct Row {
  std::string inputs;
  double first_ms = 0, build_ms = 0, steady_ms = 0;
  int plans = 0, sizes = 0, evictions = 0;
  uint64_t constants = 0, intermediates = 0, plan_bytes = 0;
  uint64_t pipelines = 0;    // compiled for this shape (none cached in the Context)
  double pipeline_ms = 0;    // their creation time, of build_ms
};

}  // namespace

void check_bench_shapes_options(const BenchShapesOptions& o) {
  if (o.sets.empty() == o.dim.empty()) {
    throw Error("bench-shapes: give the shapes either with --set (one per shape set) or with --dim (a symbolic dim's "
                "values), not both or neither");
  }
  if (!o.dim.empty()) parse_dim(o.dim);
  InputOptions probe;
  parse_int_range(o.int_range, probe);
  if (o.runs < 0) throw Error(fmt::format("bench-shapes: --runs {} is negative", o.runs));
  if (o.max_plans < 1) throw Error(fmt::format("bench-shapes: --max-plans {} must be at least 1", o.max_plans));
  if (o.max_plan_sizes < 1) {
    throw Error(fmt::format("bench-shapes: --max-plan-sizes {} must be at least 1", o.max_plan_sizes));
  }
  if (o.build_only && !o.output_dir.empty()) {
    throw Error("bench-shapes: --build-only runs nothing, so --output-dir has no outputs to write");
  }
}

int bench_shapes(gpu::Context& ctx, const BenchShapesOptions& o) {
  check_bench_shapes_options(o);
  onnx_import::SessionOptions so;
  so.fp16 = o.fp16;
  so.checked = !o.unchecked;
  so.max_plans = o.max_plans;
  so.max_plan_sizes = o.max_plan_sizes;
  so.size_classes = !o.no_size_classes;
  const auto t_load = clock::now();
  onnx_import::Session s(ctx, o.model, so);
  const double load_ms = ms_since(t_load);

  // Each shape set as --shape arguments of model_inputs().
  std::vector<std::vector<std::string>> sets;
  for (const auto& set : o.sets) sets.push_back(split(set, ';'));
  if (!o.dim.empty()) {
    const auto [name, values] = parse_dim(o.dim);
    bool found = false;
    for (const auto& in : s.inputs()) found |= std::count(in.dim_names.begin(), in.dim_names.end(), name) > 0;
    if (!found) {
      std::vector<std::string> names;
      for (const auto& in : s.inputs())
        for (const auto& d : in.dim_names)
          if (!d.empty() && std::find(names.begin(), names.end(), d) == names.end()) names.push_back(d);
      throw Error(fmt::format("--dim: no input of '{}' has a dim named '{}'; its symbolic dims: {}", o.model, name,
                              names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    for (int64_t v : values) {
      std::vector<std::string> shapes;
      for (const auto& in : s.inputs()) {
        std::vector<std::string> dims;
        bool named = false;
        for (size_t d = 0; d < in.shape.size(); ++d) {
          if (in.dim_names[d] == name) {
            dims.push_back(std::to_string(v));
            named = true;
          } else if (in.shape[d] >= 0) {
            dims.push_back(std::to_string(in.shape[d]));
          } else {
            dims.push_back("");  // from --shape, or an error naming it
          }
        }
        if (!named) continue;
        if (std::find(dims.begin(), dims.end(), "") != dims.end()) {
          throw Error(fmt::format("--dim {}: input '{}' has other dynamic dims; give them a fixed size by exporting "
                                  "the model with them fixed",
                                  o.dim, in.name));
        }
        shapes.push_back(fmt::format("{}={}", in.name, fmt::join(dims, "x")));
      }
      for (const auto& sh : o.shapes) shapes.push_back(sh);
      sets.push_back(shapes);
    }
  }

  std::vector<Row> rows;
  std::map<std::string, HostTensor> outputs;
  for (const auto& set : sets) {
    InputOptions io;
    io.shapes = set;
    io.seed = o.seed;
    parse_int_range(o.int_range, io);
    const std::map<std::string, HostTensor> inputs = model_inputs(s, io);
    Row r;
    r.inputs = describe_inputs(inputs);
    const int builds0 = s.builds();
    const gpu::CreationStats c0 = ctx.creation_stats();
    const auto t0 = clock::now();
    if (o.build_only) {
      s.build(inputs);
    } else {
      s.run(inputs, outputs);
    }
    r.first_ms = ms_since(t0);
    const gpu::CreationStats dc = ctx.creation_stats() - c0;
    r.pipelines = dc.pipelines_created;
    r.pipeline_ms = dc.pipeline_ms + dc.shader_module_ms;
    if (!o.output_dir.empty() && !o.build_only) {
      // DIR/<k>/inputs/<name>.npy and DIR/<k>/<name>.npy, k counting sets from 0.
      namespace fs = std::filesystem;
      const fs::path dir = fs::path(o.output_dir) / std::to_string(rows.size());
      std::error_code ec;
      fs::create_directories(dir / "inputs", ec);
      if (ec) throw Error(fmt::format("--output-dir: cannot create '{}': {}", (dir / "inputs").string(), ec.message()));
      for (const auto& [name, t] : inputs) write_npy((dir / "inputs" / (safe_name(name) + ".npy")).string(), t);
      for (const auto& [name, t] : outputs) write_npy((dir / (safe_name(name) + ".npy")).string(), t);
    }
    r.build_ms = s.builds() > builds0 ? s.last_build_ms() : 0;
    if (!o.build_only) s.settle();  // the steady time of the tensor-core plan where the first run was tiered
    std::vector<double> steady;
    for (int i = 0; i < (o.build_only ? 0 : o.runs); ++i) {
      const auto t = clock::now();
      s.run(inputs, outputs);
      steady.push_back(ms_since(t));
    }
    if (!steady.empty()) {
      std::sort(steady.begin(), steady.end());
      r.steady_ms = steady[steady.size() / 2];
    }
    r.plans = s.plans();
    r.sizes = s.plan_sizes();
    r.evictions = s.evictions();
    r.constants = s.constants().stats().bytes;
    r.intermediates = s.graph().memory().intermediate_pool;
    r.plan_bytes = s.plan_buffer_bytes();
    rows.push_back(r);
    if (!o.json) {
      fmt::print("{:<44} build {:8.1f} ms (pipelines {} new, {:.1f} ms)  first run {:8.1f} ms  steady {:8.3f} ms  "
                 "plans {} (sizes {}, evicted {})  constants {:.2f} MiB  intermediates {:.2f} MiB  plans' buffers "
                 "{:.2f} MiB\n",
                 r.inputs, r.build_ms, r.pipelines, r.pipeline_ms, r.first_ms, r.steady_ms, r.plans, r.sizes,
                 r.evictions, mib(r.constants), mib(r.intermediates), mib(r.plan_bytes));
    }
  }
  double total = 0, later_max = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    total += rows[i].build_ms;
    if (i > 0) later_max = std::max(later_max, rows[i].build_ms);
  }
  const double ratio = rows.empty() || rows[0].build_ms <= 0 ? 0 : later_max / rows[0].build_ms;
  const auto& cs = s.constants().stats();
  if (o.json) {
    json j{{"model", o.model},
           {"adapter", ctx.adapter().name},
           {"load_ms", load_ms},
           {"max_plans", o.max_plans},
           {"size_classes", !o.no_size_classes},
           {"build_only", o.build_only},
           {"total_build_ms", total},
           {"first_build_ms", rows.empty() ? 0 : rows[0].build_ms},
           {"later_build_max_over_first", ratio},
           {"constants_bytes", cs.bytes},
           {"constants_uploaded_bytes", cs.uploaded_bytes},
           {"constants_reused_bytes", cs.reused_bytes},
           {"shapes", json::array()}};
    for (const Row& r : rows) {
      j["shapes"].push_back({{"inputs", r.inputs},
                             {"build_ms", r.build_ms},
                             {"pipelines_created", r.pipelines},
                             {"pipeline_ms", r.pipeline_ms},
                             {"first_run_ms", o.build_only ? json(nullptr) : json(r.first_ms)},
                             {"steady_ms", o.build_only ? json(nullptr) : json(r.steady_ms)},
                             {"plans", r.plans},
                             {"plan_sizes", r.sizes},
                             {"plan_buffer_bytes", r.plan_bytes},
                             {"evictions", r.evictions},
                             {"constants_bytes", r.constants},
                             {"intermediate_bytes", r.intermediates}});
    }
    std::cout << j.dump() << "\n";
    return 0;
  }
  fmt::print("load {:.1f} ms; {} shapes built in {:.1f} ms in all; the slowest later build took {:.0f}% of the "
             "first's\n",
             load_ms, rows.size(), total, 100 * ratio);
  fmt::print("constants on the GPU {:.2f} MiB, uploaded once ({:.2f} MiB uploaded, {:.2f} MiB reused by later "
             "plans)\n",
             mib(cs.bytes), mib(cs.uploaded_bytes), mib(cs.reused_bytes));
  fmt::print("{}\n", s.summary());
  return 0;
}

}  // namespace wgnn::tools
