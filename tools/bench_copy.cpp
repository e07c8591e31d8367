#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "gpu/recorder.h"
#include "tools/commands.h"

namespace wgnn::tools {

// GB/s of dst = src over `mib` MiB, counting bytes read plus bytes written.
// Two figures: `iters` copies batched in one pass and one submit (GPU
// timestamps and wall clock), and one copy per submit (wall clock), the
// cost a dispatch pays when it is submitted alone.
int bench_copy(gpu::Context& ctx, const BenchCopyOptions& o) {
  const uint64_t bytes = o.mib << 20;
  gpu::Buffer src = ctx.create_buffer(bytes, gpu::kStorageUsage, "copy source");
  gpu::Buffer dst = ctx.create_buffer(bytes, gpu::kStorageUsage, "copy destination");
  {
    std::vector<float> init(bytes / 4);
    for (size_t i = 0; i < init.size(); ++i) init[i] = float(i % 9973);
    ctx.write(src, init.data(), bytes);
  }
  const auto& pipeline = ctx.kernel("gpu/kernels/copy_vec4.wgsl");
  const gpu::Grid grid = gpu::RowDispatchGrid(gpu::ceil_div(bytes / 16, 256),
                                              ctx.limits().max_compute_workgroups_per_dimension);
  const gpu::BindGroup group = ctx.bind_group(pipeline, {{&src}, {&dst}});
  const bool timestamps = ctx.features().timestamp_query;
  using clock = std::chrono::steady_clock;

  auto batched = [&](int iters, double* gpu_ms) {
    gpu::Recorder rec(ctx, timestamps ? gpu::Timing::Total : gpu::Timing::None);
    for (int i = 0; i < iters; ++i) rec.dispatch(pipeline, group, grid, "copy");
    const auto t0 = clock::now();
    rec.finish();
    const double wall = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    *gpu_ms = timestamps ? rec.total_gpu_ms() : 0.0;
    return wall;
  };
  double ignore = 0;
  batched(2, &ignore);  // warm-up

  std::vector<double> wall, gpu, single;
  for (int r = 0; r < o.reps; ++r) {
    double g = 0;
    wall.push_back(batched(o.iters, &g));
    gpu.push_back(g);
  }
  for (int r = 0; r < o.reps * o.iters; ++r) {
    gpu::Recorder rec(ctx);
    rec.dispatch(pipeline, group, grid, "copy");
    const auto t0 = clock::now();
    rec.finish();
    single.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  // Check the copy really happened.
  std::vector<float> back(std::min<uint64_t>(bytes / 4, 1 << 20));
  ctx.read(dst, back.data(), back.size() * 4);
  for (size_t i = 0; i < back.size(); ++i) {
    if (back[i] != float(i % 9973)) throw Error(fmt::format("bench-copy: wrong value at element {}", i));
  }

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double moved = 2.0 * double(bytes);  // read + write
  const double gbs_wall = moved * o.iters / (median(wall) * 1e-3) / 1e9;
  const double gbs_gpu = timestamps ? moved * o.iters / (median(gpu) * 1e-3) / 1e9 : 0.0;
  const double gbs_single = moved / (median(single) * 1e-3) / 1e9;
  if (o.json) {
    nlohmann::json j{{"adapter", ctx.adapter().name},
                     {"bytes", bytes},
                     {"iters", o.iters},
                     {"batched_wall_ms", median(wall)},
                     {"batched_gpu_ms", timestamps ? median(gpu) : -1.0},
                     {"single_wall_ms", median(single)},
                     {"gbs_batched_wall", gbs_wall},
                     {"gbs_batched_gpu", gbs_gpu},
                     {"gbs_single_submit_wall", gbs_single}};
    std::cout << j.dump() << "\n";
  } else {
    fmt::print("copy {} MiB on {} (read+write counted)\n", o.mib, ctx.adapter().name);
    fmt::print("  batched, {} per submit: {:8.1f} GB/s wall", o.iters, gbs_wall);
    if (timestamps) fmt::print(", {:8.1f} GB/s GPU timestamps", gbs_gpu);
    fmt::print("\n  one per submit:        {:8.1f} GB/s wall ({:.3f} ms each)\n", gbs_single, median(single));
  }
  return 0;
}

}  // namespace wgnn::tools
