// Seed-op benchmark: per kernel and shape, GPU microseconds, achieved GB/s
// (bytes that must move: inputs read once, outputs written once) and the
// ratio to a vec4 copy of the same bytes measured in the same run.
// One JSON object per line; bench/seed_ops_report.py makes the table.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "gpu/recorder.h"
#include "graph/half.h"
#include "ops/registry.h"

using namespace wgnn;

namespace {

struct Case {
  std::string op;    // "layer_norm", "batch_norm", "relu", "sigmoid"
  Shape shape;
  DType dtype;
};

double time_nodes(gpu::Context& ctx, const std::vector<DispatchNode>& nodes, int iters, int reps) {
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    gpu::Recorder rec(ctx, gpu::Timing::Total);
    for (int i = 0; i < iters; ++i)
      for (const auto& n : nodes) rec.dispatch(*n.pipeline, n.group, n.grid, n.label);
    rec.finish();
    if (r > 0) t.push_back(rec.total_gpu_ms() / iters);  // first is warm-up
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// GPU ms of one vec4 copy of `bytes` bytes.
double copy_ms(gpu::Context& ctx, uint64_t bytes, int iters, int reps) {
  gpu::Buffer a = ctx.create_buffer(bytes, gpu::kStorageUsage, "copy a");
  gpu::Buffer b = ctx.create_buffer(bytes, gpu::kStorageUsage, "copy b");
  ctx.clear(a);
  const auto& p = ctx.kernel("gpu/kernels/copy_vec4.wgsl");
  DispatchNode n;
  n.pipeline = &p;
  n.group = ctx.bind_group(p, {{&a}, {&b}});
  n.grid = gpu::RowDispatchGrid(gpu::ceil_div(bytes / 16, 256), ctx.limits().max_compute_workgroups_per_dimension);
  n.label = "copy";
  return time_nodes(ctx, {n}, iters, reps);
}

nlohmann::json run_case(gpu::Context& ctx, const Case& c, int iters, int reps) {
  Graph g(ctx);
  const int64_t n = numel(c.shape);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.5f, 2.0f);
  auto upload = [&](const Shape& s, TensorKind kind) {
    std::vector<float> v(size_t(numel(s)));
    for (auto& x : v) x = dist(rng);
    if (c.dtype == DType::F16) {
      auto h = to_half(v);
      if (kind == TensorKind::Constant) return g.add_constant(s, c.dtype, h.data());
      TensorRef t = g.add_tensor(s, c.dtype, kind);
      g.write(t, h.data(), h.size() * 2);
      return t;
    }
    if (kind == TensorKind::Constant) return g.add_constant(s, c.dtype, v.data());
    TensorRef t = g.add_tensor(s, c.dtype, kind);
    g.write(t, v.data(), v.size() * 4);
    return t;
  };
  TensorRef x = upload(c.shape, TensorKind::Input);
  const uint64_t elem = dtype_size(c.dtype);
  uint64_t bytes = 2 * uint64_t(n) * elem;
  if (c.op == "layer_norm") {
    const int64_t w = c.shape.back();
    TensorRef wt = upload({w}, TensorKind::Constant), bt = upload({w}, TensorKind::Constant);
    ops::call(g, "aten.native_layer_norm.default", {x, IntList{w}, wt, bt, 1e-5});
    bytes += 2 * uint64_t(w) * elem + 2 * uint64_t(n / w) * 4;
  } else if (c.op == "batch_norm") {
    const int64_t ch = c.shape[1];
    std::vector<TensorRef> p;
    for (int i = 0; i < 4; ++i) p.push_back(upload({ch}, TensorKind::Constant));
    ops::call(g, "aten._native_batch_norm_legit_no_training.default",
              {x, p[0], p[1], p[2], p[3], 0.1, 1e-5});
  } else {
    ops::call(g, "aten." + c.op + ".default", {x});
  }
  g.prepare();  // folds constants (outside the timing, as at model load)
  const double ms = time_nodes(ctx, g.dispatches(), iters, reps);
  const double cms = copy_ms(ctx, uint64_t(n) * elem, iters, reps);
  const double gbs = double(bytes) / (ms * 1e-3) / 1e9;
  const double copy_gbs = 2.0 * double(uint64_t(n) * elem) / (cms * 1e-3) / 1e9;
  return {{"impl", "wgnn"},
          {"op", c.op},
          {"shape", c.shape},
          {"dtype", dtype_name(c.dtype)},
          {"us", ms * 1e3},
          {"gbs", gbs},
          {"copy_us", cms * 1e3},
          {"copy_gbs", copy_gbs},
          {"ratio_to_copy", gbs / copy_gbs},
          {"dispatches", g.dispatches().size()},
          {"kernels", [&] {
             std::vector<std::string> k;
             for (const auto& d : g.dispatches()) k.push_back(d.label);
             return k;
           }()}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wgnn seed-op benchmark"};
  int iters = 50, reps = 5;
  bool f16 = false;
  std::string only;
  bool f16_only = false;
  int rounds = 1;
  app.add_option("--iters", iters, "dispatches per timed pass");
  app.add_option("--reps", reps, "timed passes (median)");
  app.add_flag("--f16", f16, "also run float16");
  app.add_option("--only", only, "comma-separated ops to run (layer_norm,batch_norm,relu,sigmoid)");
  app.add_flag("--f16-only", f16_only, "run the float16 cases only");
  app.add_option("--rounds", rounds, "run the case list this many times in one process");
  CLI11_PARSE(app, argc, argv);
  try {
    gpu::ContextOptions opts;
    opts.settings = Settings::from_variables(&std::getenv);
    gpu::Context ctx(opts);
    std::vector<Case> cases = {
        {"layer_norm", {4096, 768}, DType::F32},   {"layer_norm", {4096, 1024}, DType::F32},
        {"layer_norm", {4096, 3072}, DType::F32},  {"layer_norm", {65536, 1024}, DType::F32},
        {"layer_norm", {1500, 512}, DType::F32},   {"batch_norm", {1, 64, 512, 512}, DType::F32},
        {"batch_norm", {1, 32, 256, 256}, DType::F32}, {"batch_norm", {8, 256, 64, 64}, DType::F32},
        {"relu", {64 << 20}, DType::F32},          {"sigmoid", {64 << 20}, DType::F32},
    };
    if (f16 && ctx.features().shader_f16) {
      const size_t k = cases.size();
      for (size_t i = 0; i < k; ++i) cases.push_back({cases[i].op, cases[i].shape, DType::F16});
    }
    std::cerr << "adapter: " << ctx.adapter().name << "\n";
    if (f16_only) {
      if (!ctx.features().shader_f16) throw Error("--f16-only: this adapter has no shader-f16");
      std::erase_if(cases, [](const Case& c) { return c.dtype != DType::F16; });
    }
    const std::vector<Case> once = cases;
    for (int r = 1; r < rounds; ++r) cases.insert(cases.end(), once.begin(), once.end());
    for (const auto& c : cases) {
      if (!only.empty() && ("," + only + ",").find("," + c.op + ",") == std::string::npos) continue;
      auto j = run_case(ctx, c, iters, reps);
      j["adapter"] = ctx.adapter().name;
      std::cout << j.dump() << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "wgnn_bench_ops: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
