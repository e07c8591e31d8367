// Which adapter a Context opens: the selector grammar and the mapping of
// CUDA_VISIBLE_DEVICES, on made-up adapter lists (a machine with one GPU
// cannot show what four do), then on this machine's own list.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_of.h"
#include "gpu/adapters.h"
#include "gpu/describe.h"
#include "gpu_fixture.h"

using namespace wgnn;

namespace {

gpu::AdapterDesc nvidia(int index, const std::string& name, uint32_t device, const std::string& uuid,
                        const std::string& pci) {
  gpu::AdapterDesc a;
  a.index = index;
  a.name = name;
  a.vendor = "nvidia";
  a.vendor_id = 0x10de;
  a.device_id = device;
  a.backend = "Vulkan";
  a.adapter_type = "discrete GPU";
  a.uuid = uuid;
  a.pci_bus = pci;
  return a;
}

// Four H100s that Vulkan lists out of PCI order (as a loader may), then
// lavapipe.
std::vector<gpu::AdapterDesc> machine() {
  std::vector<gpu::AdapterDesc> v;
  v.push_back(nvidia(0, "NVIDIA H100 80GB HBM3", 0x2330, "11111111-aaaa-bbbb-cccc-000000000001", "0000:1b:00.0"));
  v.push_back(nvidia(1, "NVIDIA H100 80GB HBM3", 0x2330, "22222222-aaaa-bbbb-cccc-000000000002", "0000:19:00.0"));
  v.push_back(nvidia(2, "NVIDIA H100 80GB HBM3", 0x2330, "33333333-aaaa-bbbb-cccc-000000000003", "0000:db:00.0"));
  v.push_back(nvidia(3, "NVIDIA H100 80GB HBM3", 0x2330, "44444444-aaaa-bbbb-cccc-000000000004", "0000:bb:00.0"));
  gpu::AdapterDesc lvp;
  lvp.index = 4;
  lvp.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  lvp.vendor = "mesa";
  lvp.vendor_id = 0x10005;
  lvp.backend = "Vulkan";
  lvp.adapter_type = "CPU";
  lvp.uuid = "6d657361-3235-2e30-2e37-2d327e627000";
  v.push_back(lvp);
  return v;
}

}  // namespace

TEST(Adapters, DriverChoicesAreNotSelectors) {
  for (const char* s : {"", "auto", "gpu", "lavapipe"}) EXPECT_TRUE(gpu::is_driver_choice(s)) << s;
  for (const char* s : {"0", "GPU-1111", "nvidia", "10de:2330"}) EXPECT_FALSE(gpu::is_driver_choice(s)) << s;
}

TEST(Adapters, ASelectorNamesOneAdapterEachWay) {
  const auto m = machine();
  EXPECT_EQ(gpu::select_adapter(m, "2"), 2);
  EXPECT_EQ(gpu::select_adapter(m, "GPU-33333333-aaaa-bbbb-cccc-000000000003"), 2);
  EXPECT_EQ(gpu::select_adapter(m, "GPU-4444"), 3);                           // a prefix, as CUDA takes one
  EXPECT_EQ(gpu::select_adapter(m, "22222222aaaabbbbcccc000000000002"), 1);  // no dashes
  EXPECT_EQ(gpu::select_adapter(m, "10de:2330"), 0);                          // the first of those that fit
  EXPECT_EQ(gpu::select_adapter(m, "pci:0000:db:00.0"), 2);
  EXPECT_EQ(gpu::select_adapter(m, "pci:bb:00.0"), 3);
  EXPECT_EQ(gpu::select_adapter(m, "llvmpipe"), 4);
  EXPECT_EQ(gpu::select_adapter(m, "LLVMPIPE"), 4);
  EXPECT_EQ(gpu::select_adapter(m, "h100"), 0);
  EXPECT_EQ(gpu::select_adapter(m, "cpu"), 4);
}

TEST(Adapters, ASelectorThatNamesNothingListsTheAdapters) {
  const auto m = machine();
  for (const char* s : {"5", "GPU-9999", "radeon", "1002:73bf", "pci:00:02.0"}) {
    const std::string e = test::error_of([&] { gpu::select_adapter(m, s); });
    EXPECT_NE(e.find(s), std::string::npos) << e;
    EXPECT_NE(e.find("4: llvmpipe"), std::string::npos) << e;
    EXPECT_NE(e.find("uuid GPU-11111111-aaaa-bbbb-cccc-000000000001"), std::string::npos) << e;
  }
}

TEST(Adapters, CudaVisibleDevicesCountsNvidiaGpusInPciOrder) {
  const auto m = machine();
  // PCI order: 19 (adapter 1), 1b (0), bb (3), db (2).
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::string("0")), 1);
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::string("1")), 0);
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::string("2")), 3);
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::string("3,0")), 2);  // the first entry is the device
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::string(" 2 ")), 3);
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::string("GPU-33333333-aaaa-bbbb-cccc-000000000003")), 2);
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::string("GPU-2222")), 1);
  EXPECT_EQ(gpu::cuda_visible_adapter(m, std::nullopt), std::nullopt);
}

TEST(Adapters, CudaVisibleDevicesDoesNotApplyWithoutNvidiaAdapters) {
  auto m = machine();
  const std::vector<gpu::AdapterDesc> lavapipe_only{m.back()};
  // Ray sets the variable on machines whose GPUs it only models (custom
  // resources, lavapipe): it names nothing there, and is not an error.
  EXPECT_EQ(gpu::cuda_visible_adapter(lavapipe_only, std::string("1")), std::nullopt);
  EXPECT_EQ(gpu::cuda_visible_adapter(lavapipe_only, std::string("")), std::nullopt);
}

TEST(Adapters, CudaVisibleDevicesThatNamesNoGpuIsAnError) {
  const auto m = machine();
  struct Case {
    std::string value, says;
  };
  for (const auto& c : std::vector<Case>{{"", "hides every NVIDIA GPU"},
                                         {"-1", "hides every NVIDIA GPU"},
                                         {"4", "Vulkan shows 4 NVIDIA GPUs"},
                                         {"GPU-9999", "no NVIDIA GPU has the UUID"},
                                         {"GPU-", "neither a GPU index nor a GPU UUID"},
                                         {"MIG-6d1f3e2a-1111-2222-3333-444444444444", "MIG"},
                                         {"first", "neither a GPU index nor a GPU UUID"}}) {
    const std::string e = test::error_of([&] { gpu::cuda_visible_adapter(m, c.value); });
    EXPECT_NE(e.find(c.says), std::string::npos) << c.value << ": " << e;
    EXPECT_NE(e.find("CUDA_VISIBLE_DEVICES='" + c.value + "'"), std::string::npos) << e;
  }
  // A UUID prefix that fits two GPUs names neither.
  auto twins = m;
  twins[1].uuid = "11111111-aaaa-bbbb-cccc-000000000009";
  const std::string e = test::error_of([&] { gpu::cuda_visible_adapter(twins, std::string("GPU-1111")); });
  EXPECT_NE(e.find("fits several GPUs"), std::string::npos) << e;
}

TEST(Adapters, TheListRoundTripsThroughJson) {
  const auto m = machine();
  const auto back = gpu::adapters_from_json(gpu::describe_adapters_json(m));
  ASSERT_EQ(back.size(), m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(back[i].index, m[i].index);
    EXPECT_EQ(back[i].name, m[i].name);
    EXPECT_EQ(back[i].uuid, m[i].uuid);
    EXPECT_EQ(back[i].pci_bus, m[i].pci_bus);
    EXPECT_EQ(back[i].vendor_id, m[i].vendor_id);
    EXPECT_EQ(back[i].device_id, m[i].device_id);
  }
  EXPECT_NE(test::error_of([] { gpu::adapters_from_json("{"); }).find("not JSON"), std::string::npos);
  EXPECT_NE(test::error_of([] { gpu::adapters_from_json("[1]"); }).find("array of objects"), std::string::npos);
}

TEST(Adapters, TheContextOpensTheAdapterItsSelectorNames) {
  // This machine's list: the test context's adapter is in it, and naming it
  // by index, UUID or name opens it again.
  const auto& a = test::ctx().adapter();
  const auto list = gpu::Context::list_adapters();
  ASSERT_FALSE(list.empty());
  ASSERT_LT(size_t(a.index), list.size());
  EXPECT_EQ(list[size_t(a.index)].name, a.name);
  EXPECT_EQ(list[size_t(a.index)].uuid, a.uuid);
  if (a.backend == "Vulkan") EXPECT_EQ(a.uuid.size(), 36u) << "Vulkan reports every device's UUID";
  for (const std::string& s : {std::to_string(a.index), a.uuid.empty() ? a.name : "GPU-" + a.uuid}) {
    gpu::ContextOptions o;
    o.adapter = s;
    gpu::Context c(o);
    EXPECT_EQ(c.adapter().index, a.index) << s;
    EXPECT_EQ(c.adapter().name, a.name) << s;
    EXPECT_EQ(c.adapter().selected_by, "adapter '" + s + "'");
  }
  gpu::ContextOptions bad;
  bad.adapter = std::to_string(list.size());
  const std::string e = test::error_of([&] { gpu::Context c(bad); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  EXPECT_NE(e.find("0: " + list[0].name), std::string::npos) << e;
}
