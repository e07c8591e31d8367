#pragma once
// Numbers that the webgpu.h we compile against gets wrong for the Dawn binary
// we load. The npm Dawn (bun-webgpu-linux-x64 0.1.7) is older than the only
// header to be had (react-native-webgpu 0.5.17), and between the two the
// standard WGPUFeatureName values were renumbered: the header says
// TimestampQuery 0x9, ShaderF16 0xB, Subgroups 0x12, but the binary reads 0x9
// as IndirectFirstInstance, 0xB as RG11B10UfloatRenderable and 0x12 as
// CoreFeaturesAndLimits. Asking for the header's values gives a device that
// *has* those features yet rejects `enable f16;` and timestamp query sets.
// Every such number lives here and nowhere else; tests/gpu/dawn_values_test
// proves each against the loaded library. None of this applies to a Dawn
// built from source (WGNN_DAWN_NPM=0): there the header's names are used.
#include <cstddef>
#include <cstdint>
#include <string>

#if !WGNN_DAWN_NPM
#include <webgpu/webgpu.h>
#endif

namespace wgnn::gpu::dawn {

#if WGNN_DAWN_NPM
// sType of WGPUDawnTogglesDescriptor: the same in header and binary.
inline constexpr uint32_t kSTypeTogglesDescriptor = 0x0005000A;
// sType of WGPUDawnCacheDeviceDescriptor (the blob cache callbacks): the
// header's 0x50007 is the binary's too (the pipeline cache test sees Dawn
// call them).
inline constexpr uint32_t kSTypeCacheDeviceDescriptor = 0x00050007;
// The binary's numbering of the standard features (the webgpu.h of early 2025).
inline constexpr uint32_t kFeatureDepthClipControl = 0x1;
inline constexpr uint32_t kFeatureDepth32FloatStencil8 = 0x2;
inline constexpr uint32_t kFeatureTimestampQuery = 0x3;
inline constexpr uint32_t kFeatureTextureCompressionBC = 0x4;
inline constexpr uint32_t kFeatureIndirectFirstInstance = 0x9;
inline constexpr uint32_t kFeatureShaderF16 = 0xA;
inline constexpr uint32_t kFeatureRG11B10UfloatRenderable = 0xB;
inline constexpr uint32_t kFeatureBGRA8UnormStorage = 0xC;
inline constexpr uint32_t kFeatureFloat32Filterable = 0xD;
inline constexpr uint32_t kFeatureFloat32Blendable = 0xE;
inline constexpr uint32_t kFeatureClipDistances = 0xF;
inline constexpr uint32_t kFeatureDualSourceBlending = 0x10;
inline constexpr uint32_t kFeatureSubgroups = 0x11;
inline constexpr uint32_t kFeatureCoreFeaturesAndLimits = 0x12;
// Dawn's own features as the binary numbers them (the header says 0x50034
// for subgroup matrices).
inline constexpr uint32_t kFeatureTimestampQueryInsidePasses = 0x00050003;
inline constexpr uint32_t kFeatureSubgroupMatrix = 0x00050037;
// implicit-device-synchronization: the next of Dawn's own numbers after
// 0x50003, as in the header (tests/gpu/dawn_values_test: a device asked for
// it has it, and buffers made on several threads at once with it).
inline constexpr uint32_t kFeatureImplicitDeviceSynchronization = 0x00050004;
// WGSL language features (wgpuInstanceHasWGSLLanguageFeature): the header's
// number is the binary's (tests/gpu/dawn_values_test compiles the builtin).
inline constexpr uint32_t kWgslPacked4x8IntegerDotProduct = 0x2;
#else
inline constexpr uint32_t kSTypeTogglesDescriptor = WGPUSType_DawnTogglesDescriptor;
inline constexpr uint32_t kSTypeCacheDeviceDescriptor = WGPUSType_DawnCacheDeviceDescriptor;
// Dawn built from source (cmake -DWGNN_DAWN=source) with the webgpu.h
// generated in the same build: the header's numbers are the binary's, so they
// are taken from the header as they are.
inline constexpr uint32_t kFeatureCoreFeaturesAndLimits = WGPUFeatureName_CoreFeaturesAndLimits;
inline constexpr uint32_t kFeatureDepthClipControl = WGPUFeatureName_DepthClipControl;
inline constexpr uint32_t kFeatureDepth32FloatStencil8 = WGPUFeatureName_Depth32FloatStencil8;
inline constexpr uint32_t kFeatureTextureCompressionBC = WGPUFeatureName_TextureCompressionBC;
inline constexpr uint32_t kFeatureTimestampQuery = WGPUFeatureName_TimestampQuery;
inline constexpr uint32_t kFeatureIndirectFirstInstance = WGPUFeatureName_IndirectFirstInstance;
inline constexpr uint32_t kFeatureShaderF16 = WGPUFeatureName_ShaderF16;
inline constexpr uint32_t kFeatureRG11B10UfloatRenderable = WGPUFeatureName_RG11B10UfloatRenderable;
inline constexpr uint32_t kFeatureBGRA8UnormStorage = WGPUFeatureName_BGRA8UnormStorage;
inline constexpr uint32_t kFeatureFloat32Filterable = WGPUFeatureName_Float32Filterable;
inline constexpr uint32_t kFeatureFloat32Blendable = WGPUFeatureName_Float32Blendable;
inline constexpr uint32_t kFeatureClipDistances = WGPUFeatureName_ClipDistances;
inline constexpr uint32_t kFeatureDualSourceBlending = WGPUFeatureName_DualSourceBlending;
inline constexpr uint32_t kFeatureSubgroups = WGPUFeatureName_Subgroups;
inline constexpr uint32_t kFeatureTimestampQueryInsidePasses = WGPUFeatureName_ChromiumExperimentalTimestampQueryInsidePasses;
inline constexpr uint32_t kFeatureSubgroupMatrix = WGPUFeatureName_ChromiumExperimentalSubgroupMatrix;
inline constexpr uint32_t kFeatureImplicitDeviceSynchronization = WGPUFeatureName_ImplicitDeviceSynchronization;
inline constexpr uint32_t kWgslPacked4x8IntegerDotProduct = WGPUWGSLLanguageFeatureName_Packed4x8IntegerDotProduct;
// The bytes between two configs in the array of subgroup-matrix
// configurations the binary returns (AdapterPropertiesSubgroupMatrixConfigs).
// The Dawn in dawn.node (WGNN_DAWN_NODE) is a few weeks newer than its
// header and appends two uint32 fields to the header's five (componentType,
// resultComponentType, M, N, K): read raw on an H100, its ten configs are
// 7 words apart, each ending in 32, 32. The first five fields keep their
// offsets. tests/gpu/dawn_values_test checks every config is plausible.
#if WGNN_DAWN_NODE
inline constexpr size_t kSubgroupMatrixConfigStride = 7 * sizeof(uint32_t);
#else
inline constexpr size_t kSubgroupMatrixConfigStride = sizeof(WGPUSubgroupMatrixConfig);
#endif
#endif

// The name of a feature number of the loaded binary ("0x..." if unknown).
std::string feature_name(uint32_t feature);

}  // namespace wgnn::gpu::dawn

namespace wgnn::gpu {
class Context;
// Requests a second device with `feature` on the context's adapter and
// returns Dawn's error message ("" if the device was created). Dawn names the
// feature in that message, which is how the values above are checked.
std::string probe_feature_request(Context& ctx, uint32_t feature);
}  // namespace wgnn::gpu
