#include "util/settings.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpu/error.h"

namespace wgnn {

const std::vector<SettingInfo>& Settings::known() {
  static const std::vector<SettingInfo> k = {
      // The device (gpu/context.cpp, gpu/driver.cpp, docs/ADAPTERS.md).
      {"WGNN_ADAPTER", "the Vulkan driver (auto, gpu, lavapipe) or one adapter, when the caller names none"},
      {"WGNN_LIMITS", "adapter or default: the limits the device is requested with"},
      {"WGNN_ALLOW_UNSAFE_APIS", "1 on, 0 off: Dawn's allow_unsafe_apis toggle (subgroup matrices); default on with a Dawn that has them"},
      {"WGNN_ROBUSTNESS", "1: Dawn's robustness transform (index clamping in every shader)"},
      {"WGNN_SKIP_VALIDATION", "1: Dawn's skip_validation toggle"},
      {"WGNN_DAWN_TOGGLES", "more Dawn device toggles, comma-separated"},
      {"WGNN_GPU_TIMEOUT_S", "seconds a GPU wait may take before it is an error"},
      {"WGNN_SPIN_WAIT_US", "microseconds a GPU wait polls before it blocks"},
      {"WGNN_ASYNC_PIPELINES", "0: compile pipelines one at a time"},
      {"WGNN_DAWN_WORKERS", "threads that compile pipelines in the dawn-node Dawn (default: one per core, at most 16)"},
      {"WGNN_STAGED_WRITES", "0: large writes as queue writes, not through staging buffers"},
      {"WGNN_LOG_BUFFERS", "1: each counted buffer on stderr"},
      {"WGNN_PIPELINE_TIMES", "1: a line on stderr per pipeline created, with its time"},
      {"WGNN_PIPELINE_CACHE", "0: no pipeline cache on disk"},
      {"WGNN_PIPELINE_CACHE_MAX_MB", "the pipeline cache's bound, MiB"},
      {"WGNN_CACHE_DIR", "the cache folder (else $XDG_CACHE_HOME/wgnn, else ~/.cache/wgnn)"},
      {"WGNN_DEPS_DIR", "the folder of Dawn and lavapipe (scripts/setup's .deps), when not beside the library"},
      {"WGNN_HOME", "a folder whose models/ is searched first for remove-bg's model"},
      {"XDG_CACHE_HOME", "the user's cache folder (freedesktop.org)"},
      {"HOME", "the user's home folder"},
      {"VK_DRIVER_FILES", "Vulkan driver files the user chose: the automatic driver choice keeps them"},
      {"VK_ICD_FILENAMES", "the older name of VK_DRIVER_FILES"},
      {"CUDA_VISIBLE_DEVICES", "the NVIDIA GPU a scheduler gave this process (docs/ADAPTERS.md)"},
      // Sessions (onnx/session.cpp, passes/optimize.cpp).
      {"WGNN_NO_FUSION", "1: no fusions (as SessionOptions::fusion = false)"},
      {"WGNN_DISABLE_PASSES", "IR passes to skip, by name, comma-separated"},
      {"WGNN_IR_IMPORT", "0 or 1: overrides SessionOptions::ir_import"},
      {"WGNN_DUMP_IR", "1: each plan's IR on stderr, before and after the passes"},
      {"WGNN_TIERED", "0 or 1: overrides SessionOptions::tiered"},
      {"WGNN_TIER_GRACE_MS", "a plan whose pipelines are ready within this is not tiered"},
      {"WGNN_TIER_DISK_WAIT_MS", "how long a build waits for pipelines all found in the disk cache"},
      {"WGNN_PREFETCH_PIPELINES", "0: no compiling ahead of pipelines the disk cache has"},
      {"WGNN_PREFETCH_READBACK", "0: no read-back buffers made ahead on another thread"},
      // Graphs (graph/graph.cpp) and host copies (util/copy.cpp).
      {"WGNN_UPLOAD_STAGING", "0: inputs written by queue writes, not staged"},
      {"WGNN_SUBMIT_PARTS", "0: one command buffer per run"},
      {"WGNN_SUBMIT_FIRST", "dispatches in a run's first command buffer"},
      {"WGNN_ENCODE_AHEAD", "0: each run encodes its own dispatches"},
      {"WGNN_PARALLEL_COPY", "0: host copies on one thread"},
      // Kernel choices, for measuring (ops/).
      {"WGNN_NO_VIEWS", "1: slices, permutes and concatenations always copy"},
      {"WGNN_COPY_KERNEL", "element: every copy on the one-element kernel"},
      {"WGNN_MATMUL_CONFIG", "the matmul configuration(s), fixed"},
      {"WGNN_MATMUL_TILE", "the matmul tile, fixed (64x64, 32x64, 32x32)"},
      {"WGNN_MATMUL_SPLITK", "the matmul split over K, fixed"},
      {"WGNN_MATMUL_PAD", "1: pad weight rows for the matmul"},
      {"WGNN_NO_GEMV", "1: no matrix-vector kernel"},
      {"WGNN_GEMV_CV", "the matrix-vector kernel's columns per thread (1, 2, 4)"},
      {"WGNN_SUBGROUP_RESIDUAL", "0: no residual add in the tensor-core matmul's epilogue"},
      {"WGNN_ATTENTION_TILE", "the attention tile BQxKSxBK, fixed"},
      {"WGNN_ATTENTION_MAX_KEYS", "the most keys the one-dispatch attention takes"},
      {"WGNN_SUBGROUP_ATTENTION", "0 or 1: tensor-core attention off or forced"},
      {"WGNN_SUBGROUP_ATTENTION_SPLITS", "the tensor-core attention's key splits, fixed"},
      {"WGNN_SUBGROUP_ATTENTION_PREFETCH", "0: no prefetch in the tensor-core attention"},
      {"WGNN_SUBGROUP_ATTENTION_TILE", "the tensor-core attention's tile, fixed"},
      {"WGNN_SUBGROUP_ATTENTION_QREG", "0: queries not kept in registers"},
      {"WGNN_SUBGROUP_ATTENTION_VTILES", "1: single value tiles"},
      {"WGNN_SUBGROUP_ATTENTION_SHUFFLE", "0: no subgroup shuffles"},
      {"WGNN_SUBGROUP_ATTENTION_PPAD", "0: no padding of the probabilities' tile"},
      {"WGNN_SUBGROUP_MATMUL", "0 or 1: tensor-core matmul off or forced"},
      {"WGNN_SUBGROUP_MATMUL_CONFIG", "the tensor-core matmul configuration, fixed"},
      {"WGNN_SUBGROUP_SMALL_TILES", "0 or 1: the small tensor-core tiles"},
      {"WGNN_SUBGROUP_BIG_TILES", "0 or 1: the big tensor-core tiles"},
      {"WGNN_SUBGROUP_DEEP", "0 or 1: the deep tensor-core tiles"},
      {"WGNN_SUBGROUP_PREFETCH", "0 or 1: prefetch in the tensor-core matmul"},
      {"WGNN_SUBGROUP_VEC4_TILES", "0 or 1: vec4 tile loads in the tensor-core matmul"},
      {"WGNN_SUBGROUP_SPLITK", "the tensor-core matmul's split over K, fixed"},
      {"WGNN_SUBGROUP_SPLIT_TARGET", "the workgroups a tensor-core split aims at"},
      {"WGNN_SUBGROUP_CONV", "0: no tensor-core convolution"},
      {"WGNN_SUBGROUP_ODD_N", "0: no tensor-core matmul for N not a multiple of 8"},
      {"WGNN_CONV_PATCHES", "0 or 1: the patch convolution for small inputs"},
      {"WGNN_DEPTHWISE_VEC4", "0 or 1: the vec4 depthwise convolution"},
      {"WGNN_DEPTHWISE_THREADS", "2^N threads for the depthwise convolution"},
      {"WGNN_LAYER_NORM_TPR", "threads per row of layer norm"},
      {"WGNN_GROUP_NORM_SPLIT", "0 or 1: group norm split in two passes"},
      {"WGNN_SOFTMAX_TPR", "the most threads per row of softmax"},
      {"WGNN_DOT4", "0: no packed 4x8-bit dot products"},
      {"WGNN_CONV_INTEGER", "direct: the direct integer convolution"},
      {"WGNN_RECURRENT", "step or loop: how recurrent ops run"},
  };
  return k;
}

namespace {

const SettingInfo* find_known(std::string_view name) {
  for (const auto& k : Settings::known())
    if (name == k.name) return &k;
  return nullptr;
}

[[noreturn]] void unknown(std::string_view name) {
  std::string near;
  const std::string_view stem = name.substr(0, name.find('_', name.rfind("WGNN_", 0) == 0 ? 5 : 0));
  for (const auto& k : Settings::known())
    if (std::string_view(k.name).rfind(stem, 0) == 0) near += fmt::format("{}{}", near.empty() ? "" : ", ", k.name);
  throw Error(fmt::format("unknown setting '{}'{}", name,
                          near.empty() ? " (docs/SETTINGS.md lists them)" : fmt::format("; known: {}", near)));
}

}  // namespace

Settings Settings::from_variables(const Lookup& lookup) {
  Settings s;
  if (!lookup) return s;
  for (const auto& k : known())
    if (const char* v = lookup(k.name)) s.values_[k.name] = v;
  return s;
}

void Settings::set(std::string_view name, std::string value) {
  if (!find_known(name)) unknown(name);
  values_[std::string(name)] = std::move(value);
}

void Settings::unset(std::string_view name) {
  if (!find_known(name)) unknown(name);
  if (auto it = values_.find(name); it != values_.end()) values_.erase(it);
}

const char* Settings::get(std::string_view name) const {
  if (!find_known(name)) unknown(name);
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second.c_str();
}

std::string Settings::value(std::string_view name) const {
  const char* v = get(name);
  return v ? std::string(v) : std::string();
}

bool Settings::is(std::string_view name, std::string_view v) const {
  const char* got = get(name);
  return got && v == got;
}

}  // namespace wgnn
