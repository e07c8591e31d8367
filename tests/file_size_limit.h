#pragma once
// RLIMIT_FSIZE below a file's size makes write() fail with EFBIG as a full
// disk makes it fail with ENOSPC (SIGXFSZ ignored, as under a shell's
// `ulimit -f` with the signal trapped): a full disk for one test, restored
// on scope exit.
#include <sys/resource.h>

#include <csignal>

namespace wgnn::test {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit r = old_;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace wgnn::test
