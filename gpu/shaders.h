#pragma once
// WGSL kernels are files in the source tree (gpu/kernels, ops/kernels),
// embedded at build time by cmake/embed_wgsl.cmake.
#include <map>
#include <string_view>

namespace wgnn::gpu {

// Every embedded kernel, keyed by its path relative to the repository root,
// e.g. "ops/kernels/layer_norm.wgsl".
const std::map<std::string_view, std::string_view>& embedded_shaders();

// The text of one embedded kernel; throws wgnn::Error naming the unknown file.
std::string_view shader_source(std::string_view path);

}  // namespace wgnn::gpu
