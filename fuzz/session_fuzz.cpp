// libFuzzer target: a model that loads is also built and run, on lavapipe,
// with small inputs (dynamic dims 1, at most 64 Ki elements each): the ONNX
// mappers, host folding, op argument checks and the memory plan see
// arbitrary graphs. Any input must run or throw wgnn::Error; an error that
// Dawn reports (GpuError: wgnn let something invalid reach the GPU), a crash,
// a sanitizer report, a hang or a leak is a bug. Slower than the loader
// target (shaders compile per new kernel variant): run it for minutes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <string>

#include "gpu/context.h"
#include "gpu/error.h"
#include "onnx/session.h"

namespace {
wgnn::gpu::Context* ctx = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  wgnn::gpu::ContextOptions o;
  o.adapter = "lavapipe";
  ctx = new wgnn::gpu::Context(o);  // lives for the process
  // Host-folded values a model asks for (ConstantOfShape of [1e9], ...)
  // are an Error past this, well under libFuzzer's 2 GB memory limit.
  wgnn::set_host_tensor_limit(uint64_t(64) << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wgnn;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    onnx_import::LoadedModel m = onnx_import::load_model_from_bytes(bytes, "fuzz input", "/nonexistent/wgnn-fuzz");
    std::map<std::string, HostTensor> inputs;
    for (const auto& in : m.inputs) {
      Shape shape = in.shape;
      int64_t n = 1;
      for (auto& d : shape) {
        if (d < 0) d = 1;
        if (d > 65536) return 0;
        n *= d;
        if (n > 65536) return 0;
      }
      HostTensor t(in.dtype, shape);
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = uint8_t(i * 37 % 61);  // small, varied bytes
      inputs.emplace(in.name, std::move(t));
    }
    onnx_import::Session s(*ctx, std::move(m));
    s.run(inputs);
  } catch (const gpu::GpuError& e) {
    std::fprintf(stderr, "a WebGPU error reached the device: %s\n", e.what());
    std::abort();
  } catch (const Error&) {
  }
  return 0;
}
