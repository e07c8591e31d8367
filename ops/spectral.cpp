// wgnn.dft: a direct discrete Fourier transform on the GPU
// (kernels/dft.wgsl), the one kernel of ONNX DFT and STFT.
//
//   wgnn.dft.default(x, window, n, bins, frames, step, inverse, hermitian) -> y
//
// x [outer, len, inner, comps] (float32 or float16; comps 1: real, 2:
// complex as (re, im)), transformed along `len`; y [outer, frames, bins,
// inner, 2], or [..., 1] when hermitian. Bin k (k < bins) of frame f sums
// the n terms x[f * step + j] (zero past len) * window[j] (when window is a
// tensor of at least n values; None: 1) * exp(-2 pi i j k / n), the sign +
// and a 1 / n scale when inverse. hermitian (with inverse): x holds a
// one-sided spectrum; term j > n / 2 is the conjugate of term n - j and the
// result is real (numpy's irfft). Each bin costs n terms (no FFT): the
// audio front-ends this serves take frames of a few hundred samples.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "ops/helpers.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::ops {
namespace {

Value dft(Graph& g, const ValueList& args) {
  Args a{"wgnn.dft.default", args, g};
  TensorRef x = a.tensor(0, "self");
  a.require_float(x, "self");
  a.require_fits_binding(x, "self");
  const Shape in = g.info(x).shape;
  if (in.size() != 4 || (in[3] != 1 && in[3] != 2)) {
    a.fail(fmt::format("argument 'self' {} must be [outer, len, inner, comps] with comps 1 or 2", shape_str(in)));
  }
  TensorRef w = a.optional_tensor(1, "window");
  const int64_t n = a.integer(2, "n", 0), bins = a.integer(3, "bins", 0), frames = a.integer(4, "frames", 1),
                step = a.integer(5, "step", 0);
  const bool inverse = a.boolean(6, "inverse", false), hermitian = a.boolean(7, "hermitian", false);
  if (n < 1) a.fail(fmt::format("argument 'n' is {}; it must be at least 1", n));
  if (bins < 1 || frames < 1 || step < 0) {
    a.fail(fmt::format("bins {}, frames {}, step {}: bins and frames must be at least 1, step at least 0", bins,
                       frames, step));
  }
  if (hermitian && !inverse) a.fail("argument 'hermitian' needs 'inverse'");
  if (w.id >= 0) {
    if (g.info(w).dtype != g.info(x).dtype || g.info(w).numel() < n) {
      a.fail(fmt::format("argument 'window' {} {} must have the dtype of 'self' ({}) and at least n = {} values",
                         dtype_name(g.info(w).dtype), shape_str(g.info(w).shape), dtype_name(g.info(x).dtype), n));
    }
  }
  const int64_t out_comps = hermitian ? 1 : 2;
  const Shape out{in[0], frames, bins, in[2], out_comps};
  const int64_t count = in[0] * frames * bins * in[2];
  if (count * out_comps > int64_t(UINT32_MAX) || n > int64_t(INT32_MAX) || in[1] > int64_t(INT32_MAX)) {
    a.fail(fmt::format("the result {} (or n = {}) is too large for 32-bit indices", shape_str(out), n));
  }
  TensorRef y = g.add_tensor(out, g.info(x).dtype);
  if (count == 0) return y;
  DftParams p{uint32_t(count),   uint32_t(frames),   uint32_t(bins), uint32_t(in[2]),
              uint32_t(in[1]),   uint32_t(in[3]),    uint32_t(n),    uint32_t(step),
              uint32_t(inverse), uint32_t(hermitian), uint32_t(w.id >= 0), uint32_t(out_comps)};
  // cos and sin of 2 pi m / n, in double on the host (the shader's are too coarse).
  if (n > (int64_t(1) << 24)) a.fail(fmt::format("argument 'n' is {}; at most 2^24", n));
  std::vector<float> tw(size_t(2 * n));
  for (int64_t m = 0; m < n; ++m) {
    const double theta = 2 * M_PI * double(m) / double(n);
    tw[size_t(2 * m)] = float(std::cos(theta));
    tw[size_t(2 * m + 1)] = float(std::sin(theta));
  }
  TensorRef twiddle = g.add_constant({n, 2}, DType::F32, tw.data(), fmt::format("dft_twiddle_{}", n));
  const gpu::Pipeline& pl = kernel(g, "ops/kernels/dft.wgsl", float_subs(g, g.info(x).dtype, a.op));
  g.add_dispatch(pl,
                 {Binding::of(y), g.uniform(p), Binding::of(x),
                  w.id >= 0 ? Binding::of(w) : optional_input(g, Value()), Binding::of(twiddle)},
                 grid_for(g, gpu::ceil_div(uint64_t(count), 256)), std::string(a.op), "dft");
  return y;
}

}  // namespace

void register_spectral_ops(OpRegistry& r) { r.add("wgnn.dft.default", dft); }

}  // namespace wgnn::ops
