#pragma once
// Inside gpu/: the adapters of a WebGPU instance, with their handles, for
// Context and list_adapters (gpu/adapters.h).
#include <vector>

#include <webgpu/webgpu.h>

#include "gpu/adapters.h"

namespace wgnn::gpu {

struct FoundAdapter {
  WGPUAdapter handle = nullptr;  // one reference, released by the owner
  AdapterDesc desc;
};

// Every adapter `instance` offers for `options` (Dawn's Null backend left
// out), in Dawn's order, with the UUID and PCI address Vulkan reports for it.
std::vector<FoundAdapter> enumerate_adapters(WGPUInstance instance, const WGPURequestAdapterOptions* options);

const char* backend_name(WGPUBackendType b);
const char* adapter_type_name(WGPUAdapterType t);

// The adapter description Dawn gives (name, vendor, ids, backend, type).
AdapterDesc describe_adapter(WGPUAdapter adapter);

}  // namespace wgnn::gpu
