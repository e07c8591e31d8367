#pragma once
// Writing output files so that a crash, a kill or a full disk never leaves
// a half-written one. Host only.
#include <string>
#include <string_view>

namespace wgnn::util {

// Writes `bytes` to `path` atomically: into a new temporary file beside it
// (".NAME.tmp-PID-N" in the same folder), every write checked, fsync, close
// checked, then renamed over `path` and the folder synced. `path` then holds
// either what it held before or all of `bytes`, never a part. Any failure
// (no such folder, no permission, disk full, file size limit) throws a
// wgnn::Error naming `path` and the reason, with the temporary file removed
// and `path` untouched. An existing `path` that is not a regular file (a
// folder, a FIFO, a device) is refused.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Writes all of `bytes` to the open file descriptor `fd`, retrying short
// writes and EINTR; throws a wgnn::Error naming `what` and the reason.
void write_all(int fd, std::string_view bytes, const std::string& what);

}  // namespace wgnn::util
