#pragma once
// What ops/attention.cpp shares with the attention fusion (passes/fuse_attention.cpp).
#include <cstdint>

#include "gpu/context.h"

namespace wgnn::ops {

// The most keys wgnn.attention's one-dispatch kernel takes
// (WGNN_ATTENTION_MAX_KEYS, default 1024; anything but a number of keys is
// an error). Beyond it the op runs two products and a softmax.
int64_t attention_max_keys(const Settings& settings);

// Whether float16 attention of BH (batch times heads) x L queries with head
// dims D, Dv runs on subgroup matrices (tensor cores) on this device, over
// any number of keys (ops/subgroup_attention.h; WGNN_SUBGROUP_ATTENTION=0:
// never).
bool attention_on_tensor_cores(const gpu::Context& ctx, int64_t BH, int64_t L, int64_t D, int64_t DV);

}  // namespace wgnn::ops
