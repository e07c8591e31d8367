// util/host_memory.h: tensors' host memory. Small blocks from malloc, large
// ones mapped on huge-page boundaries and zeroed by the kernel; HostTensor
// zero-filled unless asked for uninitialised memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/error.h"
#include "graph/host_tensor.h"
#include "util/host_memory.h"

using namespace wgnn;

TEST(HostMemory, BlocksOfEverySizeHoldWhatIsWritten) {
  for (size_t n : {size_t(1), size_t(4095), size_t(1) << 20, util::kHostMapMin - 1, util::kHostMapMin,
                   util::kHostMapMin + 12345}) {
    auto* p = static_cast<uint8_t*>(util::host_alloc(n));
    ASSERT_NE(p, nullptr);
    if (util::host_alloc_zeroed(n)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (uintptr_t(2) << 20), 0u) << n;  // on a huge-page boundary
      EXPECT_TRUE(std::all_of(p, p + n, [](uint8_t b) { return b == 0; })) << n;
    }
    for (size_t i = 0; i < n; i += 997) p[i] = uint8_t(i * 7 + 1);
    p[n - 1] = 0xab;
    for (size_t i = 0; i < n - 1; i += 997) ASSERT_EQ(p[i], uint8_t(i * 7 + 1)) << n;
    EXPECT_EQ(p[n - 1], 0xab);
    util::host_free(p, n);
  }
  util::host_free(nullptr, 10);  // a no-op, as free(nullptr)
}

TEST(HostMemory, ZeroedExactlyFromTheMappingThreshold) {
  EXPECT_FALSE(util::host_alloc_zeroed(util::kHostMapMin - 1));
  EXPECT_TRUE(util::host_alloc_zeroed(util::kHostMapMin));
}

TEST(HostMemory, HostTensorsAreZeroFilledUnlessAskedNotTo) {
  // Small ones come from malloc, so make the allocator hand back memory
  // that held something: a zero fill must still be zeros.
  for (int round = 0; round < 3; ++round) {
    {
      HostTensor dirty(DType::F32, {64, 64});
      std::memset(dirty.data.data(), 0x5a, dirty.nbytes());
    }
    HostTensor t(DType::F32, {64, 64});
    EXPECT_TRUE(std::all_of(t.data.begin(), t.data.end(), [](uint8_t b) { return b == 0; }));
  }
  const int64_t big = int64_t(util::kHostMapMin / 4) + 3;  // float32 elements over the threshold
  HostTensor t(DType::F32, {big});
  EXPECT_EQ(t.nbytes(), size_t(big) * 4);
  EXPECT_TRUE(std::all_of(t.data.begin(), t.data.end(), [](uint8_t b) { return b == 0; }));
  HostTensor u = HostTensor::uninitialized(DType::I64, {3, 5});
  EXPECT_EQ(u.dtype, DType::I64);
  EXPECT_EQ(u.shape, (Shape{3, 5}));
  EXPECT_EQ(u.nbytes(), size_t(120));
  // The checks on a shape hold for uninitialised tensors as well.
  EXPECT_THROW(HostTensor::uninitialized(DType::F32, {-1}), Error);
}

TEST(HostMemory, VectorsCopyMoveAndCompareAsStdVectorsDo) {
  util::HostBytes a(util::kHostMapMin + 100);
  for (size_t i = 0; i < a.size(); i += 4096) a[i] = uint8_t(i >> 12);
  util::HostBytes b = a;
  EXPECT_EQ(a, b);
  b[4096] ^= 1;
  EXPECT_NE(a, b);
  util::HostBytes c = std::move(a);
  EXPECT_EQ(c.size(), util::kHostMapMin + 100);
  EXPECT_EQ(c[8192], uint8_t(2));
  c.resize(10);
  c.shrink_to_fit();
  EXPECT_EQ(c.size(), 10u);
  util::HostBytes d(c.begin(), c.end());
  EXPECT_EQ(d, c);
}

TEST(HostMemory, HostTensorCopiesAreWholeAndIndependent) {
  for (int64_t n : {int64_t(0), int64_t(5), int64_t(util::kHostMapMin / 4) + 1}) {
    HostTensor a(DType::F32, {n});
    for (int64_t i = 0; i < n; i += 4099) a.as<float>()[i] = float(i) * 0.5f;
    HostTensor b(a);
    EXPECT_EQ(b.dtype, a.dtype);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
    HostTensor c(DType::I32, {3});
    c = a;  // another size and dtype
    EXPECT_EQ(c.dtype, DType::F32);
    EXPECT_EQ(c.data, a.data);
    HostTensor d(DType::F32, {n});
    d = a;  // the same size: copied in place
    EXPECT_EQ(d.data, a.data);
    if (n > 0) {
      b.as<float>()[0] = 42.f;
      EXPECT_NE(a.as<float>()[0], 42.f);
    }
    const HostTensor& self = c;
    c = self;
    EXPECT_EQ(c.data, a.data);
    HostTensor moved(std::move(b));
    EXPECT_EQ(moved.shape, a.shape);
  }
}
