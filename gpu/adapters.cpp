#include "gpu/adapters.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include <fmt/format.h>

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "gpu/adapter_enum.h"
#include "gpu/context_impl.h"
#include "gpu/dawn_values.h"
#include "gpu/driver.h"
#include "gpu/error.h"

// Dawn's native C++ API (dawn/native/DawnNative.h), the one way Dawn lists
// every adapter: webgpu.h's wgpuInstanceRequestAdapter returns one. The npm
// build exports these members but ships no header, so they are declared here
// as Dawn declares them; each class holds one reference-counted pointer
// (checked against the library's code: 8 bytes, the pointer at offset 0).
// Only exported members are called, so nothing depends on Dawn's internals.
namespace dawn::native {
class AdapterBase;
class InstanceBase;
class Adapter {
 public:
  Adapter(const Adapter& other);
  ~Adapter();
  Adapter& operator=(const Adapter& other);
  WGPUAdapter Get() const;  // no reference added

 private:
  AdapterBase* impl_;
};
class Instance {
 public:
  explicit Instance(InstanceBase* impl);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  std::vector<Adapter> EnumerateAdapters(const WGPURequestAdapterOptions* options) const;

 private:
  InstanceBase* impl_;
};
}  // namespace dawn::native
static_assert(sizeof(dawn::native::Adapter) == sizeof(void*));

namespace wgnn::gpu {

const char* backend_name(WGPUBackendType b) {
  switch (b) {
    case WGPUBackendType_Null: return "Null";
    case WGPUBackendType_WebGPU: return "WebGPU";
    case WGPUBackendType_D3D11: return "D3D11";
    case WGPUBackendType_D3D12: return "D3D12";
    case WGPUBackendType_Metal: return "Metal";
    case WGPUBackendType_Vulkan: return "Vulkan";
    case WGPUBackendType_OpenGL: return "OpenGL";
    case WGPUBackendType_OpenGLES: return "OpenGLES";
    default: return "unknown";
  }
}

const char* adapter_type_name(WGPUAdapterType t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "unknown";
  }
}

namespace {

constexpr uint32_t kNvidia = 0x10de;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Lowercase hex digits only ("GPU-" and dashes dropped); "" if anything else.
std::string uuid_digits(std::string s) {
  s = lower(s);
  if (s.rfind("gpu-", 0) == 0) s = s.substr(4);
  std::string out;
  for (char c : s) {
    if (c == '-') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return {};
    out.push_back(c);
  }
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<uint32_t> parse_hex_id(std::string s) {
  s = lower(s);
  if (s.rfind("0x", 0) == 0) s = s.substr(2);
  if (s.empty() || s.size() > 4) return std::nullopt;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  return uint32_t(std::stoul(s, nullptr, 16));
}

// The adapters whose UUID starts with `digits` (at least 4 hex digits).
std::vector<int> by_uuid(const std::vector<AdapterDesc>& adapters, const std::string& digits,
                         const std::vector<int>& among) {
  std::vector<int> hits;
  for (int i : among) {
    const std::string u = uuid_digits(adapters[size_t(i)].uuid);
    if (!u.empty() && u.rfind(digits, 0) == 0) hits.push_back(i);
  }
  return hits;
}

[[noreturn]] void no_match(const std::vector<AdapterDesc>& adapters, const std::string& what) {
  throw Error(fmt::format("{}. The adapters:\n{}", what, describe_adapters(adapters)));
}

// Vulkan's view of the physical devices: UUID and PCI address, which
// webgpu.h's adapter info lacks. A separate Vulkan instance over the same
// driver files as Dawn's (the driver choice set them in the environment).
struct VulkanDevice {
  uint32_t vendor_id = 0, device_id = 0;
  std::string name, uuid, pci_bus;
};

std::string format_uuid(const uint8_t* b) {
  return fmt::format("{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                     b[15]);
}

std::vector<VulkanDevice> vulkan_devices() {
  std::vector<VulkanDevice> out;
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return out;
  auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!gipa) return out;
  auto create = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
  if (!create) return out;
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "wgnn adapter list";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  if (create(&ci, nullptr, &instance) != VK_SUCCESS) return out;
#define WGNN_VK(name) auto name = reinterpret_cast<PFN_##name>(gipa(instance, #name))
  WGNN_VK(vkDestroyInstance);
  WGNN_VK(vkEnumeratePhysicalDevices);
  WGNN_VK(vkGetPhysicalDeviceProperties);
  WGNN_VK(vkGetPhysicalDeviceProperties2);
  WGNN_VK(vkEnumerateDeviceExtensionProperties);
#undef WGNN_VK
  uint32_t n = 0;
  if (vkEnumeratePhysicalDevices && vkGetPhysicalDeviceProperties && vkEnumeratePhysicalDevices(instance, &n, nullptr) == VK_SUCCESS) {
    std::vector<VkPhysicalDevice> devices(n);
    if (vkEnumeratePhysicalDevices(instance, &n, devices.data()) == VK_SUCCESS) {
      devices.resize(n);
      for (VkPhysicalDevice d : devices) {
        VkPhysicalDeviceProperties base{};
        vkGetPhysicalDeviceProperties(d, &base);
        VulkanDevice v;
        v.vendor_id = base.vendorID;
        v.device_id = base.deviceID;
        v.name = base.deviceName;
        bool pci = false;
        uint32_t ne = 0;
        if (vkEnumerateDeviceExtensionProperties &&
            vkEnumerateDeviceExtensionProperties(d, nullptr, &ne, nullptr) == VK_SUCCESS) {
          std::vector<VkExtensionProperties> ext(ne);
          if (vkEnumerateDeviceExtensionProperties(d, nullptr, &ne, ext.data()) == VK_SUCCESS) {
            for (uint32_t i = 0; i < ne; ++i)
              if (std::string(ext[i].extensionName) == VK_EXT_PCI_BUS_INFO_EXTENSION_NAME) pci = true;
          }
        }
        if (vkGetPhysicalDeviceProperties2 && VK_API_VERSION_MINOR(base.apiVersion) >= 1) {
          VkPhysicalDevicePCIBusInfoPropertiesEXT bus{};
          bus.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
          VkPhysicalDeviceIDProperties id{};
          id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
          id.pNext = pci ? &bus : nullptr;
          VkPhysicalDeviceProperties2 p2{};
          p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
          p2.pNext = &id;
          vkGetPhysicalDeviceProperties2(d, &p2);
          v.uuid = format_uuid(id.deviceUUID);
          if (pci) v.pci_bus = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", bus.pciDomain, bus.pciBus, bus.pciDevice, bus.pciFunction);
        }
        out.push_back(std::move(v));
      }
    }
  }
  if (vkDestroyInstance) vkDestroyInstance(instance, nullptr);
  // The loader stays loaded (Dawn holds it too); closing it here could
  // unload a driver Dawn is using.
  return out;
}

}  // namespace

bool is_driver_choice(const std::string& adapter) {
  return adapter.empty() || adapter == "auto" || adapter == "gpu" || adapter == "lavapipe";
}

std::string describe_adapters(const std::vector<AdapterDesc>& adapters) {
  if (adapters.empty()) return "  (none)\n";
  std::string out;
  for (const auto& a : adapters) {
    out += fmt::format("  {}: {} | {} {:04x}:{:04x} | {} | {}{}{}\n", a.index, a.name, a.vendor.empty() ? "vendor" : a.vendor,
                       a.vendor_id, a.device_id, a.backend, a.adapter_type,
                       a.uuid.empty() ? "" : " | uuid GPU-" + a.uuid, a.pci_bus.empty() ? "" : " | pci " + a.pci_bus);
  }
  return out;
}

int select_adapter(const std::vector<AdapterDesc>& adapters, const std::string& selector) {
  if (selector.empty()) throw Error("an empty adapter selector names no adapter");
  std::vector<int> all(adapters.size());
  for (size_t i = 0; i < adapters.size(); ++i) all[i] = int(i);
  if (all_digits(selector)) {
    const size_t i = std::stoul(selector);
    if (i >= adapters.size()) no_match(adapters, fmt::format("adapter {} does not exist", selector));
    return int(i);
  }
  const std::string s = lower(selector);
  if (s.rfind("pci:", 0) == 0) {
    std::string want = s.substr(4);
    if (std::count(want.begin(), want.end(), ':') == 1) want = "0000:" + want;
    for (int i : all)
      if (adapters[size_t(i)].pci_bus == want) return i;
    no_match(adapters, fmt::format("no adapter at PCI address '{}'", selector));
  }
  if (const auto colon = s.find(':'); colon != std::string::npos && s.find(':', colon + 1) == std::string::npos) {
    const auto vendor = parse_hex_id(s.substr(0, colon));
    const auto device = parse_hex_id(s.substr(colon + 1));
    if (vendor && device) {
      for (int i : all)
        if (adapters[size_t(i)].vendor_id == *vendor && adapters[size_t(i)].device_id == *device) return i;
      no_match(adapters, fmt::format("no adapter has vendor:device {:04x}:{:04x}", *vendor, *device));
    }
  }
  if (const std::string digits = uuid_digits(s); digits.size() >= 4 && (s.rfind("gpu-", 0) == 0 || digits.size() >= 8)) {
    if (const auto hits = by_uuid(adapters, digits, all); !hits.empty()) return hits.front();
    if (s.rfind("gpu-", 0) == 0) no_match(adapters, fmt::format("no adapter has the UUID {}", selector));
  }
  for (int i : all) {
    const auto& a = adapters[size_t(i)];
    for (const std::string& field : {a.name, a.vendor, a.adapter_type})
      if (lower(field).find(s) != std::string::npos) return i;
  }
  no_match(adapters, fmt::format("no adapter matches '{}' (an index, a UUID, vendor:device in hex, pci:ADDRESS, or a "
                                 "part of the name)",
                                 selector));
}

std::optional<int> cuda_visible_adapter(const std::vector<AdapterDesc>& adapters,
                                        const std::optional<std::string>& value) {
  if (!value) return std::nullopt;
  // CUDA's NVIDIA devices, in PCI order (stable for those without an address).
  std::vector<int> nvidia;
  for (const auto& a : adapters)
    if (a.vendor_id == kNvidia) nvidia.push_back(a.index);
  if (nvidia.empty()) return std::nullopt;
  std::stable_sort(nvidia.begin(), nvidia.end(), [&](int x, int y) {
    const auto& px = adapters[size_t(x)].pci_bus;
    const auto& py = adapters[size_t(y)].pci_bus;
    if (px.empty() || py.empty()) return false;
    return px < py;
  });
  // The first entry decides (a process uses its first visible device, as
  // CUDA's device 0); blanks around it are ignored.
  std::string first = value->substr(0, value->find(','));
  first.erase(0, first.find_first_not_of(" \t"));
  first.erase(first.find_last_not_of(" \t") + 1);
  const std::string where = fmt::format("CUDA_VISIBLE_DEVICES='{}'", *value);
  if (first.empty() || first == "-1" || lower(first) == "nodevfiles") {
    no_match(adapters,
             fmt::format("{} hides every NVIDIA GPU from this process (Ray does so for a task or actor without "
                         "num_gpus). Ask for a GPU (num_gpus=1), or name an adapter (--adapter, "
                         "SessionOptions.adapter), which overrides the variable",
                         where));
  }
  if (lower(first).rfind("mig-", 0) == 0) {
    no_match(adapters, fmt::format("{} names a MIG instance: MIG instances have no Vulkan, so WebGPU cannot use one. "
                                   "Name a whole GPU",
                                   where));
  }
  if (all_digits(first)) {
    const size_t i = std::stoul(first);
    if (i >= nvidia.size()) {
      no_match(adapters, fmt::format("{} names NVIDIA GPU {}, but Vulkan shows {} NVIDIA GPU{}", where, first,
                                     nvidia.size(), nvidia.size() == 1 ? "" : "s"));
    }
    return nvidia[i];
  }
  const std::string digits = uuid_digits(first);
  if (digits.size() >= 4) {
    const auto hits = by_uuid(adapters, digits, nvidia);
    if (hits.size() == 1) return hits.front();
    if (hits.size() > 1) no_match(adapters, fmt::format("{}: the UUID prefix '{}' fits several GPUs", where, first));
    no_match(adapters, fmt::format("{}: no NVIDIA GPU has the UUID '{}'", where, first));
  }
  no_match(adapters, fmt::format("{}: '{}' is neither a GPU index nor a GPU UUID", where, first));
}

AdapterDesc describe_adapter(WGPUAdapter adapter) {
  Guarded<WGPUAdapterInfo> gi;
  if (wgpuAdapterGetInfo(adapter, &gi.value) != WGPUStatus_Success) throw GpuError("wgpuAdapterGetInfo failed");
  const WGPUAdapterInfo& ai = gi.value;
  AdapterDesc d;
  d.name = str(ai.device);
  d.vendor = str(ai.vendor);
  d.vendor_id = ai.vendorID;
  d.device_id = ai.deviceID;
  d.backend = backend_name(ai.backendType);
  d.adapter_type = adapter_type_name(ai.adapterType);
  wgpuAdapterInfoFreeMembers(gi.value);
  return d;
}

std::vector<FoundAdapter> enumerate_adapters(WGPUInstance instance, const WGPURequestAdapterOptions* options) {
  std::vector<FoundAdapter> out;
  {
    ::dawn::native::Instance native(reinterpret_cast<::dawn::native::InstanceBase*>(instance));
    for (const auto& a : native.EnumerateAdapters(options)) {
      WGPUAdapter h = a.Get();
      if (!h) continue;
      wgpuAdapterAddRef(h);
      FoundAdapter f{h, describe_adapter(h)};
      if (f.desc.backend == std::string("Null")) {
        wgpuAdapterRelease(h);
        continue;
      }
      f.desc.index = int(out.size());
      out.push_back(std::move(f));
    }
  }
  // Dawn lists Vulkan's physical devices in Vulkan's order: the k-th of a
  // (vendor, device, name) among Dawn's is the k-th among Vulkan's.
  bool vulkan = false;
  for (const auto& f : out) vulkan |= f.desc.backend == "Vulkan";
  if (vulkan) {
    const std::vector<VulkanDevice> vk = vulkan_devices();
    std::map<std::tuple<uint32_t, uint32_t, std::string>, size_t> seen;
    for (auto& f : out) {
      if (f.desc.backend != "Vulkan") continue;
      const auto key = std::make_tuple(f.desc.vendor_id, f.desc.device_id, f.desc.name);
      size_t k = seen[key]++;
      for (const auto& v : vk) {
        if (std::make_tuple(v.vendor_id, v.device_id, v.name) != key) continue;
        if (k-- == 0) {
          f.desc.uuid = v.uuid;
          f.desc.pci_bus = v.pci_bus;
          break;
        }
      }
    }
  }
  return out;
}

std::vector<AdapterDesc> list_adapters(const std::string& adapter) {
  ContextOptions o;
  o.adapter = adapter;
  return Context::list_adapters(o);
}

}  // namespace wgnn::gpu
