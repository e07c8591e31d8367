#pragma once
// What wgnn throws: wgnn::Error and its kinds (Unsupported, HostOutOfMemory,
// gpu::GpuError, gpu::DeviceLost).
#include "gpu/error.h"
