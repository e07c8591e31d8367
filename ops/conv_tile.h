#pragma once
// Host pieces shared by the implicit-GEMM convolutions (ops/conv.cpp's
// float kernels/conv.wgsl, ops/quantized.cpp's integer
// kernels/conv_integer_tiled.wgsl): the tile shape and the table that
// decodes the reduction index k = (ci, kd, kh, kw).
#include <array>
#include <cstdint>
#include <vector>

namespace wgnn::ops {

// TM output channels x TN pixels, TK reduction step. The kernels' 256
// threads stage at most 4 weights and 8 col values each (TM * TK <= 1024,
// TK * TN <= 2048, TN divides 256).
struct ConvTile {
  uint32_t tm, tn, tk;
};

// The tile that pads the product (cout_g channels x npix pixels) least;
// ties go to the square tile.
ConvTile pick_conv_tile(uint64_t cout_g, uint64_t npix);

// The k table, four int32 per k = (ci * kvol + (kd * KH + kh) * KW + kw):
//   (ci * in_vol, kd * dil_d, kh * dil_h, kw * dil_w),
// and for a transposed convolution four more per k (8 per k in all):
//   (ci * cout_g * kvol + kernel offset, 0, 0, 0).
// `kernel` and `dil` are D, H, W (missing dims 1).
std::vector<int32_t> conv_k_table(int64_t cin_g, const std::array<int64_t, 3>& kernel,
                                  const std::array<int64_t, 3>& dil, int64_t in_vol, bool transposed = false,
                                  int64_t cout_g = 0);

}  // namespace wgnn::ops
