#include "gpu/describe.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpu/error.h"

namespace wgnn::gpu {
namespace {

using nlohmann::json;

json limits_json(const Limits& l) {
  return json{{"maxBufferSize", l.max_buffer_size},
              {"maxStorageBufferBindingSize", l.max_storage_buffer_binding_size},
              {"maxUniformBufferBindingSize", l.max_uniform_buffer_binding_size},
              {"maxStorageBuffersPerShaderStage", l.max_storage_buffers_per_shader_stage},
              {"maxComputeWorkgroupStorageSize", l.max_compute_workgroup_storage_size},
              {"maxComputeInvocationsPerWorkgroup", l.max_compute_invocations_per_workgroup},
              {"maxComputeWorkgroupSizeX", l.max_compute_workgroup_size_x},
              {"maxComputeWorkgroupsPerDimension", l.max_compute_workgroups_per_dimension},
              {"minStorageBufferOffsetAlignment", l.min_storage_buffer_offset_alignment}};
}

}  // namespace

std::string describe_json(const Context& ctx) {
  const auto& a = ctx.adapter();
  const auto& f = ctx.features();
  const DiskCacheStats pc = ctx.disk_cache_stats();
  json sm_configs = json::array();
  for (const auto& c : f.subgroup_matrix_configs) {
    sm_configs.push_back({{"component", c.component}, {"result", c.result}, {"M", c.m}, {"N", c.n}, {"K", c.k}});
  }
  json j{{"adapter", a.name},
         {"vendor", a.vendor},
         {"architecture", a.architecture},
         {"backend", a.backend},
         {"adapter_type", a.adapter_type},
         {"driver", a.description},
         {"driver_source", a.driver_source},
         {"index", a.index},
         {"uuid", a.uuid},
         {"pci_bus", a.pci_bus},
         {"vendor_id", a.vendor_id},
         {"device_id", a.device_id},
         {"selected_by", a.selected_by},
         {"subgroup_size", {a.subgroup_min_size, a.subgroup_max_size}},
         {"features",
          {{"shader-f16", f.shader_f16},
           {"subgroups", f.subgroups},
           {"timestamp-query", f.timestamp_query},
           {"subgroup-matrix", f.subgroup_matrix},
           {"subgroup-matrix-configs", sm_configs},
           {"adapter", f.adapter_features}}},
         {"limits", limits_json(ctx.limits())},
         {"limits_requested", ctx.limits_mode()},
         {"float16_storage", f.shader_f16 ? "float16" : "float32"},
         {"pipeline_cache",
          pc.enabled ? json{{"folder", pc.folder}, {"max_bytes", pc.max_bytes}} : json{{"off", pc.why_off}}}};
  return j.dump(2);
}

static json adapter_json(const AdapterDesc& a) {
  return json{{"index", a.index},          {"name", a.name},        {"vendor", a.vendor},
              {"vendor_id", a.vendor_id},  {"device_id", a.device_id}, {"backend", a.backend},
              {"type", a.adapter_type},    {"uuid", a.uuid},        {"pci_bus", a.pci_bus}};
}

std::string describe_adapters_json(const std::vector<AdapterDesc>& adapters) {
  json j = json::array();
  for (const auto& a : adapters) j.push_back(adapter_json(a));
  return j.dump(2);
}

std::vector<AdapterDesc> adapters_from_json(const std::string& text) {
  std::vector<AdapterDesc> out;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("the adapter list is not JSON: {}", e.what()));
  }
  if (!j.is_array()) throw Error("the adapter list must be a JSON array of objects");
  for (const auto& e : j) {
    if (!e.is_object()) throw Error("the adapter list must be a JSON array of objects");
    AdapterDesc a;
    a.index = int(out.size());
    a.name = e.value("name", "");
    a.vendor = e.value("vendor", "");
    a.vendor_id = e.value("vendor_id", 0u);
    a.device_id = e.value("device_id", 0u);
    a.backend = e.value("backend", "Vulkan");
    a.adapter_type = e.value("type", "");
    a.uuid = e.value("uuid", "");
    a.pci_bus = e.value("pci_bus", "");
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace wgnn::gpu
