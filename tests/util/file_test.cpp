// util/file.h: atomic output files. A failed write (full disk, file size
// limit, no folder, not a regular file) is an Error naming the file, and the
// file keeps what it held before; no temporary file is left behind.
#include <fcntl.h>
#include <signal.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "error_of.h"
#include "file_size_limit.h"
#include "util/file.h"

using namespace wgnn;
using testing::HasSubstr;
using wgnn::test::error_of;
using wgnn::test::FileSizeLimit;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("wgnn_file_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t entries(const fs::path& d) { return size_t(std::distance(fs::directory_iterator(d), fs::directory_iterator())); }

}  // namespace

TEST(AtomicFile, WritesAndReplaces) {
  const fs::path d = fresh_dir("replace");
  const std::string p = (d / "out.bin").string();
  util::write_file_atomic(p, "first");
  EXPECT_EQ(slurp(p), "first");
  util::write_file_atomic(p, std::string(100000, 'x'));
  EXPECT_EQ(slurp(p), std::string(100000, 'x'));
  util::write_file_atomic(p, "");
  EXPECT_EQ(slurp(p), "");
  EXPECT_EQ(entries(d), 1u) << "no temporary file left";
}

TEST(AtomicFile, FullDiskKeepsTheOldFile) {
  const fs::path d = fresh_dir("full");
  const std::string p = (d / "out.bin").string();
  util::write_file_atomic(p, "the good file");
  std::string e;
  {
    FileSizeLimit limit(4096);
    e = error_of([&] { util::write_file_atomic(p, std::string(1 << 20, 'y')); });
  }
  EXPECT_THAT(e, HasSubstr("out.bin"));
  EXPECT_THAT(e, HasSubstr("the file size limit was reached"));
  EXPECT_EQ(slurp(p), "the good file");
  EXPECT_EQ(entries(d), 1u) << "the temporary file is removed";
}

TEST(AtomicFile, DevFullIsReported) {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "no /dev/full";
  const std::string e = error_of([&] { util::write_all(fd, std::string(1 << 16, 'z'), "'/dev/full'"); });
  ::close(fd);
  EXPECT_THAT(e, HasSubstr("writing '/dev/full' failed: no space left on the disk"));
}

TEST(AtomicFile, RefusesWhatIsNotARegularFile) {
  const fs::path d = fresh_dir("special");
  const std::string fifo = (d / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { util::write_file_atomic(fifo, "x"); }), HasSubstr("is not a regular file"));
  EXPECT_THAT(error_of([&] { util::write_file_atomic(d.string(), "x"); }), HasSubstr("is not a regular file"));
  EXPECT_THAT(error_of([&] { util::write_file_atomic((d / "no" / "such" / "x").string(), "x"); }),
              HasSubstr("cannot write"));
  EXPECT_THAT(error_of([&] { util::write_file_atomic("/dev/full", "x"); }), HasSubstr("is not a regular file"));
}

TEST(AtomicFile, SignalRemovesTheTemporaryFile) {
  // A child writes a large file over and over; SIGINT lands at some moment
  // of it (a write, the fsync, the rename, between two): afterwards the
  // folder holds the complete file or nothing, and no temporary file.
  const fs::path d = fresh_dir("signal");
  const fs::path p = d / "big.bin";
  const std::string bytes(32 << 20, 'x');
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    util::remove_temp_files_on_signal();
    for (;;) util::write_file_atomic(p.string(), bytes);
  }
  ::usleep(300 * 1000);
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  for (const auto& e : fs::directory_iterator(d)) {
    EXPECT_EQ(e.path().filename(), "big.bin") << "left behind: " << e.path();
  }
  if (fs::exists(p)) EXPECT_EQ(fs::file_size(p), bytes.size());
}

TEST(ReadAll, ReadsAPipeToItsEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "abc", 3), 3);
  ::close(fds[1]);
  EXPECT_EQ(util::read_all(fds[0], "the pipe", 100), "abc");
  ::close(fds[0]);
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "abcdef", 6), 6);
  ::close(fds[1]);
  EXPECT_THAT(error_of([&] { util::read_all(fds[0], "stdin", 5); }), HasSubstr("stdin holds more than 5 bytes"));
  ::close(fds[0]);
}

TEST(CheckFolderWritable, SaysWhatIsWrong) {
  const fs::path d = fresh_dir("writable");
  util::check_folder_writable(d.string());
  EXPECT_EQ(entries(d), 0u);  // the probe is gone
  EXPECT_THAT(error_of([&] { util::check_folder_writable((d / "absent").string()); }), HasSubstr("does not exist"));
  std::ofstream(d / "f") << "x";
  EXPECT_THAT(error_of([&] { util::check_folder_writable((d / "f").string()); }), HasSubstr("is not a folder"));
  if (::geteuid() != 0) {  // root writes anywhere
    fs::create_directories(d / "ro");
    fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THAT(error_of([&] { util::check_folder_writable((d / "ro").string()); }), HasSubstr("cannot write into"));
    fs::permissions(d / "ro", fs::perms::owner_all);
  }
}

TEST(ReadExact, ReadsEveryByteOrSaysTheFileEndedEarly) {
  const fs::path p = fs::temp_directory_path() / ("wgnn-read-exact-" + std::to_string(::getpid()));
  std::string want(300000, '\0');
  for (size_t i = 0; i < want.size(); ++i) want[i] = char(i * 31 + 7);
  { std::ofstream(p, std::ios::binary) << want; }
  std::string got(want.size(), '\0');
  int fd = ::open(p.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  util::read_exact(fd, got.data(), got.size(), "the file");
  ::close(fd);
  EXPECT_EQ(got, want);
  std::string more(want.size() + 1, '\0');
  fd = ::open(p.c_str(), O_RDONLY);
  EXPECT_THAT(error_of([&] { util::read_exact(fd, more.data(), more.size(), "the file"); }),
              HasSubstr("the file ended after 300000 of its 300001 bytes"));
  ::close(fd);
  fs::remove(p);
}
