#pragma once
// The page `wgnn serve` offers at /: drop a photo (or choose one), see its
// cut-out over a checkerboard, download the PNG. Self-contained HTML, CSS
// and script, compiled into the binary.
#include <string>

namespace wgnn::tools {

const std::string& serve_page();

}  // namespace wgnn::tools
