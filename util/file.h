#pragma once
// Writing output files so that a crash, a kill or a full disk never leaves
// a half-written one. Host only.
#include <string>
#include <string_view>

#include "util/settings.h"

namespace wgnn::util {

// Writes `bytes` to `path` atomically: into a new temporary file beside it
// (".NAME.tmp-PID-N" in the same folder), every write checked, fsync, close
// checked, then renamed over `path` and the folder synced. `path` then holds
// either what it held before or all of `bytes`, never a part. Any failure
// (no such folder, no permission, disk full, file size limit) throws a
// wgnn::Error naming `path` and the reason, with the temporary file removed
// and `path` untouched. An existing `path` that is not a regular file (a
// folder, a FIFO, a device) is refused. Sync::No skips both fsyncs: still
// all or nothing for readers, but a power cut may lose the file (or, on
// some filesystems, leave it empty or garbled): for caches whose readers
// check what they read, where an fsync per entry would cost more than
// the entry saves.
enum class Sync { Yes, No };
void write_file_atomic(const std::string& path, std::string_view bytes, Sync sync = Sync::Yes);

// Reads everything from the open file descriptor `fd` (stdin: 0) up to its
// end, retrying EINTR; more than `max_bytes` or a read error throws a
// wgnn::Error naming `what`.
std::string read_all(int fd, const std::string& what, size_t max_bytes);
// Reads exactly `bytes` from `fd` into `dst`, retrying EINTR; a read error
// or an end before them throws a wgnn::Error naming `what`.
void read_exact(int fd, void* dst, size_t bytes, const std::string& what);

// Checks that files can be created in the folder `dir` (by creating and
// removing a temporary one there): an Error naming `dir` and the reason
// otherwise. Outputs are checked this way before a long run.
void check_folder_writable(const std::string& dir);

// Makes SIGINT, SIGTERM and SIGHUP remove the temporary files
// write_file_atomic has open at that moment before the process dies of the
// signal as before: an interrupted run leaves neither a partial output nor
// a temporary file.
void remove_temp_files_on_signal();

// Writes all of `bytes` to the open file descriptor `fd`, retrying short
// writes and EINTR; throws a wgnn::Error naming `what` and the reason.
void write_all(int fd, std::string_view bytes, const std::string& what);

}  // namespace wgnn::util

namespace wgnn::util {

// The folder of wgnn's caches (the pipeline cache lives in it): the setting
// WGNN_CACHE_DIR, else $XDG_CACHE_HOME/wgnn (when that is an absolute path),
// else $HOME/.cache/wgnn, as `settings` gives them (the front ends map the
// environment onto them); empty when none is set. The folder need not exist
// yet. The one place that decides it.
std::string cache_dir(const Settings& settings);

}  // namespace wgnn::util
