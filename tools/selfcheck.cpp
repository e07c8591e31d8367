#include <fmt/format.h>

#include <vector>

#include "gpu/recorder.h"
#include "tools/commands.h"

namespace wgnn::tools {

// A small end-to-end check that the adapter computes: copy a pattern through
// the GPU and compare every element.
int selfcheck(gpu::Context& ctx) {
  const size_t n = 1 << 16;
  std::vector<float> in(n), out(n, -1.f);
  for (size_t i = 0; i < n; ++i) in[i] = float(i) * 0.5f - 7.f;
  gpu::Buffer a = ctx.create_buffer(n * 4, gpu::kStorageUsage, "selfcheck in");
  gpu::Buffer b = ctx.create_buffer(n * 4, gpu::kStorageUsage, "selfcheck out");
  ctx.write(a, in.data(), n * 4);
  gpu::Recorder rec(ctx);
  rec.dispatch(ctx.kernel("gpu/kernels/copy_vec4.wgsl"), {{&a}, {&b}},
               gpu::RowDispatchGrid(n / 4 / 256, ctx.limits().max_compute_workgroups_per_dimension));
  rec.finish();
  ctx.read(b, out.data(), n * 4);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += out[i] != in[i];
  fmt::print("selfcheck on {} ({}): copy of {} floats: {}\n", ctx.adapter().name, ctx.adapter().backend, n,
             bad ? fmt::format("{} wrong", bad) : "ok");
  return bad ? 1 : 0;
}

}  // namespace wgnn::tools
