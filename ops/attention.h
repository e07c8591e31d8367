#pragma once
// What ops/attention.cpp shares with the importer's attention fusion.
#include <cstdint>

namespace wgnn::ops {

// The most keys wgnn.attention's one-dispatch kernel takes
// (WGNN_ATTENTION_MAX_KEYS, default 1024; anything but a number of keys is
// an error). Beyond it the op runs two products and a softmax.
int64_t attention_max_keys();

}  // namespace wgnn::ops
