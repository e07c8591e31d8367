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
// proves each against the loaded library.
#include <cstdint>
#include <string>

namespace wgnn::gpu::dawn {

// sType of WGPUDawnTogglesDescriptor: the same in header and binary.
inline constexpr uint32_t kSTypeTogglesDescriptor = 0x0005000A;

#if WGNN_DAWN_NPM
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
#else
// A Dawn built with its own header: the header's numbers hold.
inline constexpr uint32_t kFeatureCoreFeaturesAndLimits = 0x1;
inline constexpr uint32_t kFeatureDepthClipControl = 0x2;
inline constexpr uint32_t kFeatureDepth32FloatStencil8 = 0x3;
inline constexpr uint32_t kFeatureTextureCompressionBC = 0x4;
inline constexpr uint32_t kFeatureTimestampQuery = 0x9;
inline constexpr uint32_t kFeatureIndirectFirstInstance = 0xA;
inline constexpr uint32_t kFeatureShaderF16 = 0xB;
inline constexpr uint32_t kFeatureRG11B10UfloatRenderable = 0xC;
inline constexpr uint32_t kFeatureBGRA8UnormStorage = 0xD;
inline constexpr uint32_t kFeatureFloat32Filterable = 0xE;
inline constexpr uint32_t kFeatureFloat32Blendable = 0xF;
inline constexpr uint32_t kFeatureClipDistances = 0x10;
inline constexpr uint32_t kFeatureDualSourceBlending = 0x11;
inline constexpr uint32_t kFeatureSubgroups = 0x12;
inline constexpr uint32_t kFeatureTimestampQueryInsidePasses = 0x00050003;
inline constexpr uint32_t kFeatureSubgroupMatrix = 0x00050034;
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
