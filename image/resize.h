#pragma once
// Resampling of float images on the host, one axis after the other: an axis
// that shrinks takes the area (box) filter, each output pixel the mean of the
// source pixels it covers, weighted by coverage (no aliasing, whatever the
// factor); an axis that grows takes bilinear interpolation with pixel centers
// at +0.5 (PyTorch's align_corners=False, ONNX Resize's half_pixel), edges
// clamped; an axis that keeps its size is copied.
#include <vector>

namespace wgnn::image {

// src: h rows of w pixels of c interleaved channels. Returns dh x dw x c.
std::vector<float> resize(const std::vector<float>& src, int w, int h, int c, int dw, int dh);

}  // namespace wgnn::image
