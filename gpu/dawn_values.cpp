#include "gpu/dawn_values.h"

#include "gpu/context_impl.h"

#include <fmt/format.h>

namespace wgnn::gpu {

std::string dawn::feature_name(uint32_t f) {
  switch (f) {
    case kFeatureCoreFeaturesAndLimits: return "core-features-and-limits";
    case kFeatureDepthClipControl: return "depth-clip-control";
    case kFeatureDepth32FloatStencil8: return "depth32float-stencil8";
    case kFeatureTextureCompressionBC: return "texture-compression-bc";
    case kFeatureTimestampQuery: return "timestamp-query";
    case kFeatureIndirectFirstInstance: return "indirect-first-instance";
    case kFeatureShaderF16: return "shader-f16";
    case kFeatureRG11B10UfloatRenderable: return "rg11b10ufloat-renderable";
    case kFeatureBGRA8UnormStorage: return "bgra8unorm-storage";
    case kFeatureFloat32Filterable: return "float32-filterable";
    case kFeatureFloat32Blendable: return "float32-blendable";
    case kFeatureClipDistances: return "clip-distances";
    case kFeatureDualSourceBlending: return "dual-source-blending";
    case kFeatureSubgroups: return "subgroups";
    case kFeatureTimestampQueryInsidePasses: return "chromium-experimental-timestamp-query-inside-passes";
    case kFeatureSubgroupMatrix: return "chromium-experimental-subgroup-matrix";
    case kFeatureImplicitDeviceSynchronization: return "implicit-device-synchronization";
    default: return fmt::format("0x{:x}", f);
  }
}

std::string probe_feature_request(Context& ctx, uint32_t feature) {
  Context::Impl& s = ctx.impl();
  // A fresh adapter with the context's toggles: a newer Dawn lets an adapter
  // create one device only ("adapter is consumed").
  std::string adapter_message;
  WGPUAdapter adapter = s.request_adapter(&adapter_message);
  if (!adapter) return "no adapter for the probe: " + adapter_message;
  WGPUFeatureName f = static_cast<WGPUFeatureName>(feature);
  WGPUDeviceDescriptor d = WGPU_DEVICE_DESCRIPTOR_INIT;
  d.requiredFeatureCount = 1;
  d.requiredFeatures = &f;
  struct R : CallbackState {
    WGPUDevice device = nullptr;
    std::string message;
  };
  Pending<R> r(s);
  WGPURequestDeviceCallbackInfo cb = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView msg, void* ud, void*) {
    auto* rr = arrived<R>(ud);
    if (status == WGPURequestDeviceStatus_Success) rr->device = device;
    rr->message = str(msg);
  };
  cb.userdata1 = r.userdata();
  try {
    s.wait(wgpuAdapterRequestDevice(adapter, &d, cb), "probing a Dawn feature");
  } catch (...) {
    wgpuAdapterRelease(adapter);
    throw;
  }
  wgpuAdapterRelease(adapter);
  if (r->device) {
    wgpuDeviceDestroy(r->device);
    wgpuDeviceRelease(r->device);
    return {};
  }
  return r->message.empty() ? std::string("device request failed without a message") : r->message;
}

}  // namespace wgnn::gpu
