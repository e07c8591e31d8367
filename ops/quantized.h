#pragma once
// The quantized ops' arithmetic on the host, for what folds constants
// (the ONNX importer, passes/fuse_matmul_dequant.cpp): the same values the
// dequantize kernel (kernels/quantize.wgsl) computes.
#include <cstdint>

#include "graph/host_tensor.h"

namespace wgnn::ops {

// float32(x - zero_point) * scale, as `out` (float32, or float16 rounded to
// nearest, saturating past +-65504 as every float16 constant does). x
// uint8, int8 or int32; scale float32 or float16; zero_point null or of x's
// dtype, shaped as scale. The scale applies per tensor (one value), per
// `axis` (a 1-D scale of x's size along it) or, with block > 0, per block
// of `block` elements along `axis` (the scale of x's rank, ceil(dim /
// block) along the axis). Throws Error on anything else.
HostTensor dequantize_on_host(const HostTensor& x, const HostTensor& scale, const HostTensor* zero_point, int64_t axis,
                              int64_t block, DType out);

}  // namespace wgnn::ops
