// A check `wgnn serve` makes before it spends work on a request: a photo's
// bytes end where its format says they end.
#pragma once

#include <string>

namespace wgnn::tools::serve_guard {

// Empty when the bytes hold a whole PNG (through IEND), a whole JPEG
// (through its end-of-image marker), or a WebP whose RIFF size fits; else
// why not ("truncated: ..." or "corrupt: ..."). Other formats: empty (their
// decoders report short data themselves).
std::string incomplete_photo(const std::string& bytes);

}  // namespace wgnn::tools::serve_guard
