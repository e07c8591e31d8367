#pragma once
// Which WebGPU adapter a Context opens, when a machine has several: the list
// of adapters (Dawn's, with the Vulkan device UUID and PCI address that Dawn
// does not report), the selector grammar of ContextOptions::adapter, and the
// mapping of CUDA_VISIBLE_DEVICES (how Ray, Slurm and CUDA programs hand a
// process its GPU) onto that list. docs/ADAPTERS.md describes both.
#include <optional>
#include <string>
#include <vector>

namespace wgnn::gpu {

struct AdapterDesc {
  int index = 0;             // position in the list: the selector "N"
  std::string name;          // e.g. "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string vendor;        // Dawn's vendor name, e.g. "nvidia", "mesa"
  uint32_t vendor_id = 0;    // PCI vendor id (0x10de: NVIDIA)
  uint32_t device_id = 0;
  std::string backend;       // "Vulkan", ...
  std::string adapter_type;  // "discrete GPU", "integrated GPU", "CPU", "unknown"
  // The Vulkan device UUID as CUDA and nvidia-smi write it (36 characters:
  // 8-4-4-4-12 hex digits; without CUDA's "GPU-" prefix); "" where unknown.
  std::string uuid;
  // The PCI address "dddd:bb:dd.f" (VK_EXT_pci_bus_info); "" where unknown.
  std::string pci_bus;
};

// Whether `adapter` (ContextOptions::adapter) chooses a Vulkan driver ("",
// "auto", "gpu", "lavapipe") rather than naming one adapter.
bool is_driver_choice(const std::string& adapter);

// A selector names one adapter of `adapters`:
//   "N"                     the N-th (decimal), as `wgnn info --adapters` lists them
//   "GPU-<uuid>" or "<uuid>"  a UUID, or a prefix of one of at least 4 hex digits
//                           (dashes optional), as nvidia-smi -L writes them
//   "VVVV:DDDD"             PCI vendor and device id in hex ("10de:2330", "0x10de:0x2330")
//   "pci:dddd:bb:dd.f"      a PCI address (or "pci:bb:dd.f")
//   anything else           a case-insensitive part of the name, vendor or type
// Several matches: the first in list order. No match: wgnn::Error listing
// every adapter.
int select_adapter(const std::vector<AdapterDesc>& adapters, const std::string& selector);

// What CUDA_VISIBLE_DEVICES (`value`; nullopt: the variable is unset) makes
// of `adapters`, CUDA's way: only NVIDIA adapters (vendor 0x10de) count; the
// first entry of the list is the device. An index counts NVIDIA adapters in
// PCI order (CUDA's own order when CUDA_DEVICE_ORDER=PCI_BUS_ID, and for
// GPUs of one model also its default order); "GPU-<uuid>" (or a unique
// prefix) is exact. Returns the adapter's index, or nullopt when the
// variable does not apply: unset, or no NVIDIA adapter in the list (a
// machine whose GPU is not NVIDIA's, or lavapipe). Throws wgnn::Error when it
// applies but names nothing: empty or "-1" (every NVIDIA GPU hidden, as Ray
// does for a task without num_gpus), an index past the NVIDIA adapters, an
// unknown UUID, a MIG instance (MIG has no Vulkan).
std::optional<int> cuda_visible_adapter(const std::vector<AdapterDesc>& adapters,
                                        const std::optional<std::string>& value);

// The list as lines for errors and `wgnn info --adapters`.
std::string describe_adapters(const std::vector<AdapterDesc>& adapters);

// Every adapter the Vulkan driver choice `adapter` (as ContextOptions) gives
// this process, in Dawn's order, with UUIDs and PCI addresses where Vulkan
// reports them. Starts a WebGPU instance (no device).
std::vector<AdapterDesc> list_adapters(const std::string& adapter = "");

}  // namespace wgnn::gpu
