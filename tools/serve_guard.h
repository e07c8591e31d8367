// Checks `wgnn serve` makes before it spends work on a request: a photo's
// bytes end where its format says they end, and the connection a request
// came on is still there.
#pragma once

#include <string>

namespace wgnn::tools::serve_guard {

// Empty when the bytes hold a whole PNG (through IEND), a whole JPEG
// (through its end-of-image marker), or a WebP whose RIFF size fits; else
// why not ("truncated: ..." or "corrupt: ..."). Other formats: empty (their
// decoders report short data themselves).
std::string incomplete_photo(const std::string& bytes);

// The descriptor of this process's TCP socket from local_port to
// peer_addr:peer_port, or -1.
int find_connection(int local_port, const std::string& peer_addr, int peer_port);

// The descriptor of this process's listening TCP socket on local_port, or -1.
int find_listener(int local_port);

// True when the peer on `fd` has closed its side (end of stream, reset or
// error). A client that shuts down its sending side and waits for the
// answer counts as gone, as in most HTTP servers.
bool peer_gone(int fd);

}  // namespace wgnn::tools::serve_guard
