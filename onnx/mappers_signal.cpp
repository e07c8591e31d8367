// ONNX's audio front-end operators: DFT (opset 17's axis attribute, opset
// 20's axis input) and STFT on the GPU (wgnn.dft, ops/spectral.cpp), and
// the window functions (HannWindow, HammingWindow, BlackmanWindow) and
// MelWeightMatrix, which compute a constant on the host by the formulas of
// ONNX's definitions (in double precision, then the output dtype). A
// window's size computed on the GPU is read back (Builder::read_size).
#include <fmt/format.h>

#include <cmath>

#include "onnx/host_ops.h"
#include "onnx/mappers_dynamic.h"
#include "onnx/subgraph.h"
#include "onnx/tensor_proto.h"

namespace wgnn::onnx_import {
namespace {



// Scalar integer input i: on the host where it is known there, else read
// back from the GPU.
int64_t int_input(NodeCtx& c, size_t i, const char* what) {
  if (numel(c.shape(i)) != 1) c.fail(fmt::format("{} has shape {}; expected one value", what, shape_str(c.shape(i))));
  if (c.is_host(i)) return host::get_int(c.host(i, what), 0);
  if (c.builder) {
    if (const HostTensor* v = c.builder->host_value(c.node.input(int(i)))) return host::get_int(*v, 0);
  }
  if (!c.builder) c.unsupported(fmt::format("{} is computed on the GPU", what));
  TensorRef t = c.tensor(i);
  if (host::is_float(c.g.info(t).dtype)) c.unsupported(fmt::format("{} must be an integer", what));
  return c.builder->read_size(t, node_label(c) + " " + what);
}

DType output_dtype(NodeCtx& c) {
  return dtype_from_onnx(int(c.attr_int("output_datatype", 1)), c.where());
}

// HannWindow, HammingWindow, BlackmanWindow: w[n] for n < size over
// N = size (periodic, the default) or size - 1 (symmetric).
OpMapper window(int kind) {
  auto make = [kind](NodeCtx& c) {
    const int64_t size = int_input(c, 0, "size");
    if (size < 0) c.fail(fmt::format("size {} is negative", size));
    const double big_n = double(c.attr_int("periodic", 1) != 0 ? size : size - 1);
    HostTensor y(output_dtype(c), {size});
    for (int64_t i = 0; i < size; ++i) {
      const double n = double(i);
      double v = 0;
      if (kind == 0) {
        const double s = std::sin(M_PI * n / big_n);
        v = s * s;
      } else if (kind == 1) {
        const double alpha = 25.0 / 46.0;
        v = alpha - std::cos(2 * M_PI * n / big_n) * (1 - alpha);
      } else {
        v = 0.42 - 0.5 * std::cos(2 * M_PI * n / big_n) + 0.08 * std::cos(4 * M_PI * n / big_n);
      }
      host::set(y, size_t(i), v);
    }
    return y;
  };
  return {{}, [make](NodeCtx& c) { return one(Slot::of_host(make(c))); },
          [make](NodeCtx& c) {
            std::vector<HostTensor> v;
            v.push_back(make(c));
            return v;
          }};
}

// MelWeightMatrix [dft_length / 2 + 1, num_mel_bins]: triangular filters
// between mel points equally spaced from lower to upper edge, each point
// mapped to the spectrogram bin floor((dft_length + 1) * hz / sample_rate).
HostTensor mel_weights(NodeCtx& c) {
  const int64_t mels = host::get_int(c.host(0, "num_mel_bins"), 0);
  const int64_t dft = host::get_int(c.host(1, "dft_length"), 0);
  const double rate = host::get(c.host(2, "sample_rate"), 0);
  const double lo = host::get(c.host(3, "lower_edge_hertz"), 0), hi = host::get(c.host(4, "upper_edge_hertz"), 0);
  if (mels < 1 || dft < 1 || !(rate > 0)) {
    c.fail(fmt::format("num_mel_bins {}, dft_length {}, sample_rate {}: each must be positive", mels, dft, rate));
  }
  const int64_t spec = dft / 2 + 1;
  const double lo_mel = 2595 * std::log1p(lo / 700) / std::log(10.0);
  const double hi_mel = 2595 * std::log1p(hi / 700) / std::log(10.0);
  const double step = (hi_mel - lo_mel) / double(mels + 2);
  std::vector<int64_t> bin(size_t(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700 * std::expm1((double(i) * step + lo_mel) / 2595 * std::log(10.0));
    bin[size_t(i)] = int64_t(std::floor(double(dft + 1) * hz / rate));
  }
  std::vector<double> w(size_t(spec * mels), 0.0);
  auto put = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= spec) c.fail(fmt::format("mel point {} falls outside the {} spectrogram bins", j, spec));
    w[size_t(j * mels + i)] = v;
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = bin[size_t(i)], m = bin[size_t(i + 1)], r = bin[size_t(i + 2)];
    if (m - l == 0) {
      put(m, i, 1);
    } else {
      for (int64_t j = l; j <= m; ++j) put(j, i, double(j - l) / double(m - l));
    }
    if (r - m > 0) {
      for (int64_t j = m; j < r; ++j) put(j, i, double(r - j) / double(r - m));
    }
  }
  HostTensor y(output_dtype(c), {spec, mels});
  for (size_t k = 0; k < w.size(); ++k) host::set(y, k, w[k]);
  return y;
}

// x [..., len, ..., comps] as [outer, len, inner, comps] around `axis`.
Shape dft_view(const Shape& s, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[size_t(d)];
  for (size_t d = size_t(axis) + 1; d + 1 < s.size(); ++d) inner *= s[d];
  return {outer, s[size_t(axis)], inner, s.back()};
}

std::vector<Slot> dft(NodeCtx& c) {
  const Shape& s = c.shape(0);
  const int64_t r = int64_t(s.size());
  if (r < 2 || (s.back() != 1 && s.back() != 2)) {
    c.fail(fmt::format("input {} must end in a dim of 1 (real) or 2 (complex)", shape_str(s)));
  }
  int64_t axis = 1;
  if (c.opset >= 20) {
    axis = c.has(2) ? int_input(c, 2, "axis") : -2;
  } else {
    axis = c.attr_int("axis", 1);
  }
  if (axis < -r || axis >= r) c.fail(fmt::format("axis {} is out of range for input {}", axis, shape_str(s)));
  if (axis < 0) axis += r;
  if (axis == r - 1) c.fail("axis is the last dim (the real and imaginary parts)");
  const bool inverse = c.attr_int("inverse", 0) != 0, onesided = c.attr_int("onesided", 0) != 0;
  const int64_t len = s[size_t(axis)];
  const bool hermitian = inverse && onesided;
  int64_t n = hermitian ? 2 * (len - 1) : len;
  if (c.has(1) && numel(c.shape(1)) > 0) n = int_input(c, 1, "dft_length");
  if (n < 1) c.fail(fmt::format("dft_length {} must be at least 1", n));
  const int64_t bins = hermitian ? n : onesided ? n / 2 + 1 : n;
  Shape out = s;
  out[size_t(axis)] = bins;
  out.back() = hermitian ? 1 : 2;
  TensorRef x = c.view(c.tensor(0), dft_view(s, axis));
  TensorRef y = c.call("wgnn.dft.default", {x, None{}, n, bins, int64_t(1), int64_t(0), inverse, hermitian}).tensor();
  return one(c.out(c.view(y, out)));
}

std::vector<Slot> stft(NodeCtx& c) {
  const Shape& s = c.shape(0);
  if (s.size() != 3 || (s[2] != 1 && s[2] != 2)) {
    c.fail(fmt::format("signal {} must be [batch, length, 1 or 2]", shape_str(s)));
  }
  const int64_t step = int_input(c, 1, "frame_step");
  const bool has_window = c.has(2) && numel(c.shape(2)) > 0;
  int64_t frame = s[1];
  if (c.has(3) && numel(c.shape(3)) > 0) {
    frame = int_input(c, 3, "frame_length");
  } else if (has_window) {
    frame = c.shape(2)[0];
  }
  if (has_window && (c.shape(2).size() != 1 || c.shape(2)[0] != frame)) {
    c.fail(fmt::format("window {} must be 1-D of frame_length {}", shape_str(c.shape(2)), frame));
  }
  if (step < 1 || frame < 1 || frame > s[1]) {
    c.fail(fmt::format("frame_step {} and frame_length {}: both positive, the frame at most the signal's {}", step,
                       frame, s[1]));
  }
  const int64_t frames = 1 + (s[1] - frame) / step;
  const bool onesided = c.attr_int("onesided", 1) != 0;
  const int64_t bins = onesided ? frame / 2 + 1 : frame;
  TensorRef x = c.view(c.tensor(0), {s[0], s[1], 1, s[2]});
  Value w = None{};
  if (has_window) {
    TensorRef wt = c.tensor(2);
    if (c.g.info(wt).dtype != c.g.info(x).dtype) {
      wt = c.call("aten._to_copy.default", {wt, int64_t(c.g.info(x).dtype == DType::F16 ? 5 : 6)}).tensor();
    }
    w = wt;
  }
  TensorRef y = c.call("wgnn.dft.default", {x, w, frame, bins, frames, step, false, false}).tensor();
  return one(c.out(c.view(y, {s[0], frames, bins, 2})));
}

}  // namespace

void add_signal_mappers(std::map<std::string, OpMapper>& m) {
  m["HannWindow"] = window(0);
  m["HammingWindow"] = window(1);
  m["BlackmanWindow"] = window(2);
  m["MelWeightMatrix"] = {{}, [](NodeCtx& c) { return one(Slot::of_host(mel_weights(c))); },
                          [](NodeCtx& c) {
                            std::vector<HostTensor> v;
                            v.push_back(mel_weights(c));
                            return v;
                          }};
  m["DFT"] = {{DType::F32, DType::F16}, dft, nullptr};
  m["STFT"] = {{DType::F32, DType::F16}, stft, nullptr};
}

}  // namespace wgnn::onnx_import
