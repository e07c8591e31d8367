#pragma once
// What `wgnn info --json` prints and `wgnn.get_device_info()` returns: the
// adapter, backend, driver, features and limits of a Context, as one JSON
// object (two-space indented).
#include <string>
#include <vector>

#include "gpu/context.h"

namespace wgnn::gpu {

std::string describe_json(const Context& ctx);

// An adapter list (Context::list_adapters) as a JSON array of objects: index,
// name, vendor, vendor_id, device_id, backend, type, uuid, pci_bus. And back
// (the fields absent are empty; indexes follow the array's order), for the
// bindings' selection functions and tests with made-up lists.
std::string describe_adapters_json(const std::vector<AdapterDesc>& adapters);
std::vector<AdapterDesc> adapters_from_json(const std::string& text);

}  // namespace wgnn::gpu
