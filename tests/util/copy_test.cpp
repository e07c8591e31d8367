// util/copy.h: large copies on several threads give memcpy's bytes, for
// jobs of every size, alignment and count, around the thresholds.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "util/copy.h"

using namespace wgnn;

namespace {

std::vector<uint8_t> noise(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

}  // namespace

TEST(CopyParallel, GivesWhatMemcpyGives) {
  const size_t mib = size_t(1) << 20;
  // (sizes of the jobs): one small, one at the threshold, odd sizes and
  // offsets spanning parts, many jobs, an empty one.
  const std::vector<std::vector<size_t>> cases = {
      {100},
      {util::kParallelCopyMin - 1},
      {util::kParallelCopyMin},
      {3 * mib + 5, 0, 7 * mib + 3, 1},
      {24 * mib + 13},
      {mib, mib, mib, mib, mib, mib, mib, mib, 17},
  };
  uint32_t seed = 1;
  for (const auto& sizes : cases) {
    std::vector<std::vector<uint8_t>> src, dst;
    std::vector<util::CopyJob> jobs;
    for (size_t n : sizes) {
      src.push_back(noise(n + 3, seed++));
      dst.push_back(std::vector<uint8_t>(n + 6, 0xAB));
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      // Unaligned on both sides: 3 bytes into the source, 1 into the destination.
      jobs.push_back({dst[k].data() + 1, src[k].data() + 3, sizes[k]});
    }
    util::copy_parallel(jobs);
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t n = sizes[k];
      ASSERT_EQ(dst[k][0], 0xAB);
      ASSERT_TRUE(std::equal(src[k].begin() + 3, src[k].begin() + 3 + std::ptrdiff_t(n), dst[k].begin() + 1))
          << "job " << k << " of " << sizes.size() << ", " << n << " bytes";
      for (size_t i = n + 1; i < n + 6; ++i) ASSERT_EQ(dst[k][i], 0xAB) << "written past job " << k;
    }
  }
}

// Every thread count, whatever this machine's cores: totals whose share per
// thread is a whole number of 4 KiB pages plus a remainder (1 MiB + 2 bytes
// on 4 threads, 8 MiB + 17 on 8) lost their last bytes once.
TEST(CopyParallel, EveryThreadCountCopiesEveryByte) {
  const size_t mib = size_t(1) << 20;
  const std::vector<std::vector<size_t>> cases = {
      {mib + 2}, {8 * mib + 17}, {mib, mib, mib, mib, mib, mib, mib, mib, 17}, {4096 * 3 + 1}, {5, 0, 3}, {}};
  uint32_t seed = 100;
  for (const int threads : {0, 1, 2, 3, 4, 5, 7, 8, 16}) {
    for (const auto& sizes : cases) {
      std::vector<std::vector<uint8_t>> src, dst;
      std::vector<util::CopyJob> jobs;
      for (size_t n : sizes) {
        src.push_back(noise(n, seed++));
        dst.push_back(std::vector<uint8_t>(n + 1, 0xAB));
      }
      for (size_t k = 0; k < sizes.size(); ++k) jobs.push_back({dst[k].data(), src[k].data(), sizes[k]});
      util::copy_parallel(jobs, threads);
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t n = sizes[k];
        ASSERT_TRUE(std::equal(src[k].begin(), src[k].end(), dst[k].begin()))
            << threads << " threads, job " << k << " of " << sizes.size() << ", " << n << " bytes";
        ASSERT_EQ(dst[k][n], 0xAB) << "written past job " << k << " on " << threads << " threads";
      }
    }
  }
}

TEST(CopyParallel, ThreadsOnlyForLargeCopies) {
  EXPECT_EQ(util::copy_threads(util::kParallelCopyMin - 1), 1);
  EXPECT_GE(util::copy_threads(64 << 20), 1);
  EXPECT_LE(util::copy_threads(64 << 20), 8);
}
