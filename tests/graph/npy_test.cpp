// .npy reading and writing, checked against files numpy itself writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "file_size_limit.h"
#include "graph/npy.h"

using namespace wgnn;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {
fs::path tmpdir() {
  fs::path d = fs::temp_directory_path() / ("wgnn_npy_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}
int python(const std::string& code) {
  const fs::path script = tmpdir() / "gen.py";
  std::ofstream(script) << code;
  return std::system(("/usr/bin/python3 " + script.string()).c_str());
}
std::string read_error(const fs::path& p) {
  try {
    read_npy(p);
  } catch (const wgnn::Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0; }

TEST(Npy, ReadsWhatNumpyWrites) {
  if (!have_numpy()) GTEST_SKIP() << "Debian's python3-numpy is not installed (scripts/setup installs it)";
  const fs::path d = tmpdir();
  ASSERT_EQ(python("import numpy as np\nd='" + d.string() +
                   "'\n"
                   "np.save(d+'/f32.npy', np.arange(6, dtype=np.float32).reshape(2,3) / 4)\n"
                   "np.save(d+'/f16.npy', np.array([1.5, -2.25, 65504], dtype=np.float16))\n"
                   "np.save(d+'/i64.npy', np.array([[-3], [2**40]], dtype=np.int64))\n"
                   "np.save(d+'/b.npy', np.array([True, False, True]))\n"
                   "np.save(d+'/scalar.npy', np.float32(7.5))\n"
                   "np.save(d+'/u8.npy', np.arange(5, dtype=np.uint8))\n"
                   "np.save(d+'/fortran.npy', np.asfortranarray(np.ones((2,3), np.float32)))\n"
                   "np.save(d+'/f64.npy', np.ones(3))\n"),
            0);
  HostTensor a = read_npy(d / "f32.npy");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (Shape{2, 3}));
  EXPECT_FLOAT_EQ(a.as<float>()[5], 1.25f);
  HostTensor h = read_npy(d / "f16.npy");
  EXPECT_EQ(h.dtype, DType::F16);
  EXPECT_DOUBLE_EQ(h.get_double(1), -2.25);
  EXPECT_DOUBLE_EQ(h.get_double(2), 65504);
  HostTensor i = read_npy(d / "i64.npy");
  EXPECT_EQ(i.shape, (Shape{2, 1}));
  EXPECT_EQ(i.as<int64_t>()[1], int64_t(1) << 40);
  HostTensor b = read_npy(d / "b.npy");
  EXPECT_EQ(b.dtype, DType::Bool);
  EXPECT_EQ(b.as<uint8_t>()[1], 0);
  HostTensor s = read_npy(d / "scalar.npy");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_FLOAT_EQ(s.as<float>()[0], 7.5f);
  EXPECT_EQ(read_npy(d / "u8.npy").as<uint8_t>()[4], 4);
  EXPECT_THAT(read_error(d / "fortran.npy"), HasSubstr("Fortran"));
  EXPECT_THAT(read_error(d / "f64.npy"), HasSubstr("'<f8' is not supported"));
}

TEST(Npy, NumpyReadsWhatWeWrite) {
  if (!have_numpy()) GTEST_SKIP() << "Debian's python3-numpy is not installed (scripts/setup installs it)";
  const fs::path d = tmpdir();
  HostTensor t(DType::F32, {2, 2, 3});
  for (int k = 0; k < 12; ++k) t.as<float>()[k] = float(k) - 5.5f;
  write_npy(d / "w.npy", t);
  HostTensor v(DType::I64, {4});
  for (int k = 0; k < 4; ++k) v.as<int64_t>()[k] = -k * 1000000000000LL;
  write_npy(d / "v.npy", v);
  HostTensor e(DType::F16, {});
  e.as<uint16_t>()[0] = 0x3C00;  // 1.0
  write_npy(d / "e.npy", e);
  EXPECT_EQ(python("import numpy as np\nd='" + d.string() +
                   "'\n"
                   "a = np.load(d+'/w.npy'); assert a.shape == (2,2,3) and a.dtype == np.float32, a\n"
                   "assert (a.ravel() == np.arange(12) - 5.5).all()\n"
                   "v = np.load(d+'/v.npy'); assert v.dtype == np.int64 and v[3] == -3 * 10**12\n"
                   "e = np.load(d+'/e.npy'); assert e.shape == () and e.dtype == np.float16 and e == 1.0\n"),
            0);
  EXPECT_EQ(read_npy(d / "w.npy").data, t.data);
}

TEST(Npy, TruncatedAndGarbageAreErrors) {
  EXPECT_THROW(parse_npy("hello", "x"), Error);
  HostTensor t(DType::F32, {4});
  std::string good = format_npy(t);
  EXPECT_THROW(parse_npy(good.substr(0, good.size() - 3), "x"), Error);
  EXPECT_THROW(parse_npy(good.substr(0, 12), "x"), Error);
  EXPECT_THROW(read_npy("/nonexistent/file.npy"), Error);
}

// Headers a fuzzer would try: each is an Error naming the problem, checked
// before the data is allocated.
TEST(Npy, MalformedHeadersAreErrorsBeforeAllocating) {
  auto npy = [](const std::string& header, const std::string& data = "") {
    std::string b("\x93NUMPY\x01\x00", 8);
    b.push_back(char(header.size() & 0xFF));
    b.push_back(char(header.size() >> 8));
    return b + header + data;
  };
  auto error = [](const std::string& bytes) {
    try {
      parse_npy(bytes, "x.npy");
    } catch (const wgnn::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1048576), }", "abcd")),
              HasSubstr(".npy data is 4 bytes"));
  EXPECT_THAT(error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }")),
              HasSubstr("more elements than int64 counts"));
  EXPECT_THAT(error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }")),
              HasSubstr("bad .npy shape"));
  EXPECT_THAT(error(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }")),
              HasSubstr("'fortran_order' is 'Maybe'"));
  EXPECT_THAT(error(npy("{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }")), HasSubstr("x.npy"));
  EXPECT_THAT(error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, }")),
              HasSubstr("'shape' value is not closed"));
  EXPECT_THAT(error(npy("{'descr'")), HasSubstr("no ':' after 'descr'"));
  EXPECT_THAT(error(npy("{'descr':  ")), HasSubstr("ends after 'descr'"));
  std::string v2("\x93NUMPY\x02\x00\xff\xff\xff\x00", 12);  // a 16 MiB header, present
  v2.append(0xffffff, ' ');
  EXPECT_THAT(error(v2), HasSubstr("over the 65536 bytes accepted"));
  const std::string ok = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
  EXPECT_EQ(parse_npy(ok, "x.npy").shape, (Shape{1}));
}

// A full disk (here a file size limit) while writing an output: an Error
// naming the file, and the good file already there is kept whole.
TEST(Npy, FailedWriteKeepsTheOldFile) {
  const fs::path p = tmpdir() / "kept.npy";
  HostTensor small(DType::F32, {2});
  small.as<float>()[0] = 1.5f;
  small.as<float>()[1] = -2.0f;
  write_npy(p.string(), small);
  const HostTensor big(DType::F32, {1 << 18});
  std::string e = "no error";
  {
    wgnn::test::FileSizeLimit limit(64 * 1024);
    try {
      write_npy(p.string(), big);
    } catch (const wgnn::Error& err) {
      e = err.what();
    }
  }
  EXPECT_THAT(e, HasSubstr("kept.npy"));
  EXPECT_THAT(e, HasSubstr("file size limit"));
  const HostTensor back = read_npy(p.string());
  EXPECT_EQ(back.shape, small.shape);
  EXPECT_EQ(back.data, small.data);
  for (const auto& entry : fs::directory_iterator(tmpdir())) {
    EXPECT_EQ(entry.path().filename().string().find(".kept.npy.tmp"), std::string::npos) << entry.path();
  }
}
