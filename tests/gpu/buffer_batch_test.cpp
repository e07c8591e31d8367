// gpu::BufferBatch: buffers made on a thread of their own (Dawn's
// implicit-device-synchronization), taken by size.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "gpu/buffer_batch.h"
#include "gpu/recorder.h"
#include "gpu_fixture.h"

using namespace wgnn;

namespace {

bool thread_safe() { return test::ctx().features().thread_safe; }

}  // namespace

TEST(BufferBatch, TheDeviceIsThreadSafeWhereDawnOffersIt) {
  const auto& f = test::ctx().features().adapter_features;
  const bool offered = std::find(f.begin(), f.end(), "implicit-device-synchronization") != f.end();
  EXPECT_EQ(thread_safe(), offered);
  gpu::ContextOptions o;
  o.thread_safe_device = false;
  gpu::Context c(o);
  EXPECT_FALSE(c.features().thread_safe);
  // Without it a batch makes nothing: the caller makes its own.
  gpu::BufferBatch none(c, {64, 128}, gpu::kMapRead | gpu::kCopyDst, "readback");
  EXPECT_EQ(none.made(), 0u);
  EXPECT_FALSE(none.take(64, gpu::kMapRead | gpu::kCopyDst).valid());
}

TEST(BufferBatch, TakesTheSmallestThatFits) {
  if (!thread_safe()) GTEST_SKIP() << "the adapter does not offer implicit-device-synchronization";
  gpu::Context& c = test::ctx();
  const uint64_t usage = gpu::kMapRead | gpu::kCopyDst;
  const uint64_t before = c.buffers_created();
  gpu::BufferBatch batch(c, {4096, 100, 1 << 20, 4096}, usage, "readback");
  EXPECT_EQ(batch.made(), 4u);
  EXPECT_EQ(c.buffers_created(), before);  // not counted as the caller's
  EXPECT_FALSE(batch.take(64, gpu::kStorageUsage).valid());  // another usage
  gpu::Buffer a = batch.take(90, usage);
  ASSERT_TRUE(a.valid());
  EXPECT_EQ(a.size(), 112u);  // 100 rounded up to 16 bytes
  EXPECT_EQ(a.usage(), usage);
  gpu::Buffer b = batch.take(4000, usage), d = batch.take(4096, usage);
  ASSERT_TRUE(b.valid() && d.valid());
  EXPECT_EQ(b.size(), 4096u);
  EXPECT_EQ(d.size(), 4096u);
  EXPECT_FALSE(b == d);
  EXPECT_FALSE(batch.take(2 << 20, usage).valid());  // none that large
  gpu::Buffer e = batch.take(1, usage);
  ASSERT_TRUE(e.valid());
  EXPECT_EQ(e.size(), uint64_t(1) << 20);
  EXPECT_FALSE(batch.take(1, usage).valid());  // all taken
  EXPECT_EQ(batch.taken(), 4u);
  // A buffer taken is an ordinary readback buffer: a copy into it is mapped
  // and read.
  gpu::Buffer src = c.create_buffer(4096, gpu::kStorageUsage, "src");
  std::vector<uint32_t> data(1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint32_t(i * 2654435761u);
  c.write(src, data.data(), 4096);
  gpu::Recorder rec(c);
  rec.copy(src, 0, b, 0, 4096);
  rec.submit();
  c.map_for_read({&b});
  rec.finish_completed();
  std::vector<uint32_t> back(1024);
  std::memcpy(back.data(), c.mapped(b, 4096), 4096);
  c.unmap(b);
  EXPECT_EQ(back, data);
}

// Dawn locks the device in every call: a batch making buffers while this
// thread makes, writes and reads others is safe (run under the sanitizers'
// eyes in the GPU job too).
TEST(BufferBatch, MakesBuffersWhileTheCallerUsesTheDevice) {
  if (!thread_safe()) GTEST_SKIP() << "the adapter does not offer implicit-device-synchronization";
  gpu::Context& c = test::ctx();
  const uint64_t usage = gpu::kMapRead | gpu::kCopyDst;
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 48; ++i) sizes.push_back(uint64_t(4096) << (i % 6));
  gpu::BufferBatch batch(c, sizes, usage, "readback");
  for (int i = 0; i < 48; ++i) {
    gpu::Buffer b = c.create_buffer(1024, gpu::kStorageUsage, "caller's");
    std::vector<float> v(256, float(i));
    c.write(b, v.data(), 1024);
    std::vector<float> back(256);
    c.read(b, back.data(), 1024);
    ASSERT_EQ(back, v) << i;
  }
  EXPECT_EQ(batch.made(), sizes.size());
  for (int i = 0; i < 48; ++i) EXPECT_TRUE(batch.take(4096, usage).valid()) << i;
  EXPECT_FALSE(batch.take(4096, usage).valid());
}

// Dropped before it is done: the thread stops after the buffer it is making.
TEST(BufferBatch, DroppedEarlyStopsItsThread) {
  if (!thread_safe()) GTEST_SKIP() << "the adapter does not offer implicit-device-synchronization";
  std::vector<uint64_t> sizes(200, 1 << 16);
  { gpu::BufferBatch batch(test::ctx(), sizes, gpu::kMapRead | gpu::kCopyDst, "readback"); }
  gpu::BufferBatch again(test::ctx(), {64}, gpu::kMapRead | gpu::kCopyDst, "readback");
  EXPECT_EQ(again.made(), 1u);
}
