// libFuzzer target: the ONNX loader on arbitrary bytes. It runs everything
// Session's constructor checks (protobuf parsing, opset, initializers and
// their data, graph inputs and outputs, node order, supported operators)
// without a GPU. Any input must either load or throw wgnn::Error; a crash,
// another exception, a sanitizer report, a hang or a leak is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/error.h"
#include "onnx/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    // External data is looked up in a folder that does not exist: the
    // loader must refuse it with an Error, never read outside.
    wgnn::onnx_import::LoadedModel m =
        wgnn::onnx_import::load_model_from_bytes(bytes, "fuzz input", "/nonexistent/wgnn-fuzz-model-dir");
    (void)m;
  } catch (const wgnn::Error&) {
  }
  return 0;
}
