#include "util/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <climits>
#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "gpu/error.h"

namespace wgnn::util {
namespace {

namespace fs = std::filesystem;

std::string reason(int err) {
  if (err == ENOSPC) return "no space left on the disk";
  if (err == EFBIG) return "the file size limit was reached";
  if (err == EDQUOT) return "the disk quota is exceeded";
  return std::strerror(err);
}

// The temporary files write_file_atomic has open, for the signal handler:
// fixed slots of fixed size (a handler may not allocate or lock).
constexpr size_t kSlots = 16;
struct TempSlot {
  std::atomic<bool> used{false};
  std::atomic<bool> ready{false};
  char path[PATH_MAX];
};
std::array<TempSlot, kSlots> g_temps;

int claim_temp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (size_t i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (g_temps[i].used.compare_exchange_strong(expected, true)) {
      std::memcpy(g_temps[i].path, path.c_str(), path.size() + 1);
      g_temps[i].ready.store(true);
      return int(i);
    }
  }
  return -1;  // more writers at once than slots: that one is not cleaned up on a signal
}
void release_temp(int slot) {
  if (slot < 0) return;
  g_temps[size_t(slot)].ready.store(false);
  g_temps[size_t(slot)].used.store(false);
}

extern "C" void on_fatal_signal(int sig) {
  for (auto& t : g_temps) {
    if (t.ready.load()) ::unlink(t.path);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void remove_temp_files_on_signal() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa{};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

std::string read_all(int fd, const std::string& what, size_t max_bytes) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("reading {} failed: {}", what, std::strerror(errno)));
    if (n == 0) return out;
    if (out.size() + size_t(n) > max_bytes) {
      throw Error(fmt::format("{} holds more than {} bytes; that is more than is read", what, max_bytes));
    }
    out.append(buf, size_t(n));
  }
}

void read_exact(int fd, void* dst, size_t bytes, const std::string& what) {
  auto* out = static_cast<char*>(dst);
  for (size_t at = 0; at < bytes;) {
    const ssize_t n = ::read(fd, out + at, bytes - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("reading {} failed: {}", what, std::strerror(errno)));
    if (n == 0) throw Error(fmt::format("{} ended after {} of its {} bytes (it changed while read)", what, at, bytes));
    at += size_t(n);
  }
}

void check_folder_writable(const std::string& dir_name) {
  const fs::path dir = dir_name.empty() ? fs::path(".") : fs::path(dir_name);
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error(fmt::format("the folder '{}' does not exist", dir.string()));
  if (!fs::is_directory(dir, ec)) throw Error(fmt::format("'{}' is not a folder", dir.string()));
  const fs::path probe = dir / fmt::format(".wgnn-write-check-{}", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw Error(fmt::format("cannot write into the folder '{}': {}", dir.string(), reason(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_all(int fd, std::string_view bytes, const std::string& what) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("writing {} failed: {}", what, reason(errno)));
    if (n == 0) throw Error(fmt::format("writing {} failed: the system wrote nothing", what));
    p += n;
    left -= size_t(n);
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes, Sync sync) {
  if (path.empty()) throw Error("cannot write a file with an empty name");
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw Error(fmt::format("cannot write '{}': it exists and is not a regular file", path));
  }
  const fs::path target(path);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  static std::atomic<unsigned> counter{0};
  const fs::path tmp = dir / fmt::format(".{}.tmp-{}-{}", target.filename().string(), ::getpid(), counter++);
  const int slot = claim_temp(tmp.string());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    release_temp(slot);
    throw Error(fmt::format("cannot write '{}': {}", path, reason(err)));
  }
  const std::string what = fmt::format("'{}'", path);
  auto fail = [&](const std::string& message) {
    ::unlink(tmp.c_str());
    release_temp(slot);
    throw Error(message);
  };
  try {
    write_all(fd, bytes, what);
  } catch (const Error& e) {
    ::close(fd);
    fail(e.what());
  }
  if (sync == Sync::Yes && ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail(fmt::format("writing '{}' failed: fsync: {}", path, reason(err)));
  }
  if (::close(fd) != 0) fail(fmt::format("writing '{}' failed: close: {}", path, reason(errno)));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    fail(fmt::format("writing '{}' failed: renaming the finished file into place: {}", path, reason(errno)));
  }
  release_temp(slot);
  if (sync == Sync::No) return;
  // The rename itself reaches the disk with the folder's metadata.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace wgnn::util

namespace wgnn::util {

std::string cache_dir(const Settings& settings) {
  const auto env = [&](const char* name) { return settings.value(name); };
  if (std::string d = env("WGNN_CACHE_DIR"); !d.empty()) return d;
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && x.front() == '/') return x + "/wgnn";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/wgnn";
  return {};
}

}  // namespace wgnn::util
