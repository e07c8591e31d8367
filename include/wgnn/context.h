#pragma once
// The GPU: wgnn::gpu::Context (adapter, device, limits, features) and its
// options (which adapter, which limits).
#include "gpu/context.h"
