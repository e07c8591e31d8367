// libFuzzer target: the .pte front end on arbitrary bytes (pte/program.h):
// the extended header, the program flatbuffer (verified before it is
// read), segments, constants, the Vulkan delegate's header and graph, and
// the op mapping into IR, without a GPU. Any input must either load or
// throw wgnn::Error; a crash, another exception, a sanitizer report, a hang
// or a leak is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpu/error.h"
#include "pte/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    wgnn::pte::Model m =
        wgnn::pte::load_from_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz input");
    (void)m;
  } catch (const wgnn::Error&) {
  }
  return 0;
}
