// util/file.h: atomic output files. A failed write (full disk, file size
// limit, no folder, not a regular file) is an Error naming the file, and the
// file keeps what it held before; no temporary file is left behind.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
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
