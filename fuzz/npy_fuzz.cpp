// libFuzzer target: the .npy reader on arbitrary bytes. Any input must
// either parse or throw wgnn::Error; a parsed tensor must have exactly the
// bytes its dtype and shape need, and must write back to an equal file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpu/error.h"
#include "graph/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  wgnn::HostTensor t;
  try {
    t = wgnn::parse_npy(bytes, "fuzz input");
  } catch (const wgnn::Error&) {
    return 0;
  }
  if (t.data.size() != size_t(t.numel()) * wgnn::dtype_size(t.dtype)) std::abort();
  const wgnn::HostTensor back = wgnn::parse_npy(wgnn::format_npy(t), "round trip");
  if (back.dtype != t.dtype || back.shape != t.shape || back.data != t.data) std::abort();
  return 0;
}
