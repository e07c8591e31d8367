#pragma once
// wgnn::HostTensor (a tensor in host memory), wgnn::DType and wgnn::Shape.
#include "graph/host_tensor.h"
