#pragma once
// Subcommands of the wgnn CLI that are more than a few lines.
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/context.h"

namespace wgnn::tools {

struct BenchCopyOptions {
  uint64_t mib = 256;
  int iters = 20;
  int reps = 5;
  bool json = false;
};
int bench_copy(gpu::Context& ctx, const BenchCopyOptions& o);

struct RunOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string output_dir = ".";
  uint32_t seed = 0;
  int repeat = 1;
  bool verbose = false;
};
int run_model(gpu::Context& ctx, const RunOptions& o);

struct ConformanceOptions {
  std::vector<std::string> dirs;
  std::string filter;
  double rtol = 1e-3, atol = 1e-5;
  bool verbose = false;
  bool quiet_unsupported = false;
};
int conformance(gpu::Context& ctx, const ConformanceOptions& o);

struct RemoveBgOptions {
  std::string input;
  std::string output;  // default: <input's stem>_cutout.png in the current folder
  std::string mask;    // the matte alone as 8-bit gray PNG (optional)
  std::string model;   // default: models/isnet_any_size.onnx beside the wgnn binary
  int size = 0;        // 0: the model's own
  std::string preprocess = "auto";
  int runs = 1;
  bool quiet = false;
};
// Reads the photo before it creates the Context (a wrong path fails at once).
int remove_bg(const gpu::ContextOptions& context_options, const RemoveBgOptions& o);
int selfcheck(gpu::Context& ctx);

}  // namespace wgnn::tools
