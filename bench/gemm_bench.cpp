// Subgroup-matrix (tensor-core) GEMM benchmark: C = A @ B with A (MxK) and B
// (KxN) float16, f32 accumulation, C float32 (or float16 through the
// kernel's epilogue, --f16-out), for several kernel configurations, on
// square sizes and MxNxK shapes; each configuration is warmed up for
// --warmup-ms before it is timed. Per configuration and size: GPU microseconds (timestamps,
// median of reps), TFLOP/s (2*M*N*K per product) and the largest error on
// 512 sampled elements against a double-precision CPU reference computed
// from the same float16 inputs. One JSON object per line;
// bench/torch_gemm.py measures PyTorch on the same shapes, and
// bench/gemm_report.py puts both in one table.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "gpu/recorder.h"
#include "graph/half.h"
#include "ops/subgroup_matmul.h"

using namespace wgnn;

int main(int argc, char** argv) {
  CLI::App app{"wgnn subgroup-matrix GEMM benchmark"};
  std::vector<int64_t> sizes{4096};
  std::vector<std::string> configs{"128x128x32:2x2:1", "128x128x32:2x2:1/c", "128x128x32:2x2:1/t1", "64x64x32:2x2:1"};
  int iters = 10, reps = 5;
  double warmup_ms = 300;
  bool robustness = false, emulate = false, f16_out = false;
  app.add_flag("--f16-out", f16_out, "float16 results through the kernel's epilogue (what wgnn's float16 models run) "
               "instead of float32 results stored directly");
  app.add_flag("--emulate", emulate, "run the kernels emulated (scalar code in place of subgroup matrices; for checking "
               "a configuration's results on a device without them, not for speed)");
  app.add_flag("--robustness", robustness, "turn Dawn's robustness (index clamping) on (wgnn's default is off)");
  app.add_option("--sizes", sizes, "square sizes M=N=K");
  std::vector<std::string> shapes;
  app.add_option("--shapes", shapes, "products MxNxK (after the square sizes), e.g. 36864x384x128");
  app.add_option("--configs", configs, "kernel configurations BMxBNxBK:SGMxSGN:STAGES[:v|:f][/dN][/tN][/r][/c][/w][/v][/pN][/aN]");
  app.add_option("--iters", iters, "products per timed pass");
  app.add_option("--reps", reps, "timed passes (median)");
  app.add_option("--warmup-ms", warmup_ms,
                 "GPU milliseconds of untimed products before the timed passes of each configuration and size "
                 "(an idle GPU runs at lower clocks for its first tens of milliseconds)");
  std::string print;
  app.add_option("--print-wgsl", print, "print the WGSL of one configuration and exit");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!print.empty()) {
      std::cout << ops::subgroup_matmul_wgsl(ops::parse_subgroup_matmul_config(print));
      return 0;
    }
    gpu::ContextOptions opts;
    opts.settings = Settings::from_variables(&std::getenv);
    opts.allow_unsafe_apis = true;
    opts.robustness = robustness;
    gpu::Context ctx(opts);
    if (!emulate && !ops::subgroup_matmul_supported(ctx)) {
      std::cerr << "this adapter/Dawn offers no f16 subgroup matrices (16x16x16, f32 results): nothing to measure\n";
      return 2;
    }
    std::vector<std::array<int64_t, 3>> products;
    for (int64_t n : sizes) products.push_back({n, n, n});
    for (const std::string& text : shapes) {
      std::array<int64_t, 3> mnk{};
      if (std::sscanf(text.c_str(), "%ldx%ldx%ld", &mnk[0], &mnk[1], &mnk[2]) != 3 || mnk[0] < 1 || mnk[1] < 8 ||
          mnk[2] < 8 || mnk[1] % 8 || mnk[2] % 8)
        throw std::runtime_error("bad --shapes entry '" + text + "' (MxNxK, N and K multiples of 8)");
      products.push_back(mnk);
    }
    for (const auto& [M, N, K] : products) {
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> a(size_t(M * K)), b(size_t(K * N));
      for (auto& v : a) v = dist(rng);
      for (auto& v : b) v = dist(rng);
      const std::vector<uint16_t> ah = to_half(a), bh = to_half(b);
      a = from_half(ah);
      b = from_half(bh);
      gpu::Buffer ab = ctx.create_buffer(ah.size() * 2, gpu::kStorageUsage, "A");
      gpu::Buffer bb = ctx.create_buffer(bh.size() * 2, gpu::kStorageUsage, "B");
      gpu::Buffer cb = ctx.create_buffer(uint64_t(M * N) * 4, gpu::kStorageUsage, "C");
      ctx.write(ab, ah.data(), ah.size() * 2);
      ctx.write(bb, bh.data(), bh.size() * 2);
      std::vector<std::pair<int64_t, int64_t>> samples;
      for (int s = 0; s < 512; ++s) samples.emplace_back(int64_t(rng() % M), int64_t(rng() % N));
      // Reference for each layout (bit 1: the buffer holds A as K x M, bit 2: B as N x K).
      std::array<std::vector<double>, 4> wants, scales;
      for (int layout = 0; layout < 4; ++layout) {
        for (auto [i, j] : samples) {
          double acc = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double x = a[size_t((layout & 1) ? k * M + i : i * K + k)];
            const double y = b[size_t((layout & 2) ? j * K + k : k * N + j)];
            acc += x * y;
            mag += std::abs(x * y);
          }
          wants[size_t(layout)].push_back(acc);
          scales[size_t(layout)].push_back(mag);
        }
      }
      for (const auto& text : configs) {
        nlohmann::json out{{"bench", "gemm"}, {"config", text + (robustness ? " robust" : "") + (f16_out ? " f16out" : "")}, {"M", M}, {"N", N}, {"K", K}};
        try {
          ops::SubgroupMatmulConfig cfg = ops::parse_subgroup_matmul_config(text);
          cfg.emulate = emulate;
          cfg.out_f16 = f16_out;
          if (!ops::subgroup_matmul_supported(ctx, cfg)) {
            out["error"] = fmt::format("needs {} bytes of workgroup storage or {} invocations", cfg.workgroup_bytes(),
                                       cfg.threads());
            std::cout << out.dump() << std::endl;
            continue;
          }
          const auto& pipe = ctx.pipeline(cfg.name(), ops::subgroup_matmul_wgsl(cfg));
          ops::SubgroupMatmulParams p{};
          p.M = uint32_t(M), p.N = uint32_t(N), p.K = uint32_t(K);
          p.tiles_n = uint32_t(gpu::ceil_div(N, cfg.bn));
          p.alpha = 1.0f, p.beta = 0.0f;
          gpu::Buffer ub = ctx.uniform(&p, sizeof(p), "gemm params");
          if (cfg.full_tiles && (M % cfg.bm || N % cfg.bn)) throw std::runtime_error("the full-tile variant needs M and N multiples of the tile");
          const gpu::BindGroup group = ctx.bind_group(pipe, {{&ab}, {&bb}, {&cb}, {&ub}});
          const gpu::Grid grid{p.tiles_n, uint32_t(gpu::ceil_div(M, cfg.bm)), 1};
          auto pass = [&] {  // GPU ms of `iters` products
            gpu::Recorder rec(ctx, gpu::Timing::Total);
            for (int i = 0; i < iters; ++i) rec.dispatch(pipe, group, grid, "gemm");
            rec.finish();
            return rec.total_gpu_ms();
          };
          for (double warm = 0; warm < warmup_ms;) warm += std::max(pass(), 0.01);
          std::vector<double> t;
          for (int r = 0; r < reps + 1; ++r) {
            const double ms = pass();
            if (r > 0) t.push_back(ms / iters);
          }
          std::sort(t.begin(), t.end());
          const double ms = t[t.size() / 2];
          std::vector<float> c(size_t(M * N));
          if (f16_out) {
            std::vector<uint16_t> h(size_t(M * N));
            ctx.read(cb, h.data(), h.size() * 2);
            c = from_half(h);
          } else {
            ctx.read(cb, c.data(), c.size() * 4);
          }
          const size_t layout = (cfg.a_trans ? 1 : 0) + (cfg.b_trans ? 2 : 0);
          const std::vector<double>& want = wants[layout];
          const std::vector<double>& scale = scales[layout];
          double worst = 0;  // error / (1e-3 * sum |a b| + 1e-5): must stay below 1
          double max_abs = 0;
          for (size_t s = 0; s < samples.size(); ++s) {
            const double got = c[size_t(samples[s].first * N + samples[s].second)];
            const double err = std::abs(got - want[s]);
            max_abs = std::max(max_abs, err);
            worst = std::max(worst, err / (1e-3 * scale[s] + 1e-5));
          }
          out["us"] = ms * 1e3;
          out["tflops"] = 2.0 * double(M) * double(N) * double(K) / (ms * 1e-3) / 1e12;
          out["max_abs_err"] = max_abs;
          out["ok"] = worst < 1.0 && std::isfinite(worst);
          out["workgroup_bytes"] = cfg.workgroup_bytes();
        } catch (const std::exception& e) {
          out["error"] = e.what();
        }
        std::cout << out.dump() << std::endl;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
