#include "util/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
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

}  // namespace

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

void write_file_atomic(const std::string& path, std::string_view bytes) {
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
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw Error(fmt::format("cannot write '{}': {}", path, reason(errno)));
  const std::string what = fmt::format("'{}'", path);
  auto fail = [&](const std::string& message) {
    ::unlink(tmp.c_str());
    throw Error(message);
  };
  try {
    write_all(fd, bytes, what);
  } catch (const Error& e) {
    ::close(fd);
    fail(e.what());
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail(fmt::format("writing '{}' failed: fsync: {}", path, reason(err)));
  }
  if (::close(fd) != 0) fail(fmt::format("writing '{}' failed: close: {}", path, reason(errno)));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    fail(fmt::format("writing '{}' failed: renaming the finished file into place: {}", path, reason(errno)));
  }
  // The rename itself reaches the disk with the folder's metadata.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace wgnn::util
