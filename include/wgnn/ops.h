#pragma once
// The op library: wgnn::ops::call(graph, "aten.relu.default", {...}) and the
// registered operator names.
#include "ops/registry.h"
