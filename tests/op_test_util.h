#pragma once
// Helpers for op tests: random inputs, f32/f16 upload and read-back as
// float, and comparison against a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/half.h"
#include "gpu_fixture.h"
#include "ops/registry.h"

namespace wgnn::test {

inline std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Rounds values to what `dtype` stores (f16 keeps 11 bits).
inline std::vector<float> quantize(const std::vector<float>& v, DType dtype) {
  return dtype == DType::F16 ? from_half(to_half(v)) : v;
}

inline TensorRef upload(Graph& g, const Shape& shape, const std::vector<float>& data, DType dtype,
                        TensorKind kind = TensorKind::Input) {
  TensorRef t = g.add_tensor(shape, dtype, kind);
  if (dtype == DType::F16) {
    auto h = to_half(data);
    g.write(t, h.data(), h.size() * 2);
  } else {
    g.write(t, data.data(), data.size() * 4);
  }
  return t;
}

inline TensorRef constant(Graph& g, const Shape& shape, const std::vector<float>& data, DType dtype) {
  if (dtype == DType::F16) {
    auto h = to_half(data);
    return g.add_constant(shape, dtype, h.data());
  }
  return g.add_constant(shape, dtype, data.data());
}

inline std::vector<float> download(Graph& g, TensorRef t) {
  const TensorInfo& ti = g.info(t);
  if (ti.dtype == DType::F16) return from_half(g.read<uint16_t>(t));
  return g.read<float>(t);
}

// Every element within atol + rtol * |ref|; NaN never passes. Reports the
// first few failures and the worst error.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& ref,
                                            double atol, double rtol) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != reference " << ref.size();
  }
  size_t bad = 0;
  double worst = 0;
  size_t worst_i = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - ref[i]);
    const bool ok = !std::isnan(got[i]) && err <= atol + rtol * std::abs(ref[i]);
    if (!ok || std::isnan(err)) {
      if (bad < 5) first += "\n  [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " +
                            std::to_string(ref[i]);
      ++bad;
    }
    if (err > worst || std::isnan(err)) {
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = i;
    }
  }
  if (bad) {
    return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements off (atol " << atol
                                         << ", rtol " << rtol << "), worst error " << worst << " at " << worst_i
                                         << first;
  }
  return ::testing::AssertionSuccess();
}

// A float16 product (matrix product, convolution: float16 operands, a
// float32 accumulator, one rounding of the result to float16), element by
// element: |got - ref| <= 2^-10 |ref| + 2^-14 sum_k |a_k b_k| + 2^-24.
// `abs_ref` holds sum_k |a_k b_k| (plus |bias|) per element: the same
// reference on the operands' magnitudes. 2^-10 |ref| is one float16 ulp of
// the result (the last rounding, to either neighbour); float32 accumulation
// of K terms errs by at most about K 2^-24 of the sum of magnitudes (under
// 2^-16 for the few hundred terms here), so 2^-14 (a quarter of float16's
// ulp at that sum) leaves headroom. A kernel that accumulates in float16
// rounds each partial sum to 2^-11 of itself and passes it.
inline ::testing::AssertionResult f16_product_close(const std::vector<float>& got, const std::vector<double>& ref,
                                                    const std::vector<double>& abs_ref) {
  if (got.size() != ref.size() || abs_ref.size() != ref.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != reference " << ref.size() << " / "
                                         << abs_ref.size();
  }
  size_t bad = 0, worst_i = 0;
  double worst = 0;  // error / tolerance
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = std::ldexp(std::abs(ref[i]), -10) + std::ldexp(abs_ref[i], -14) + std::ldexp(1.0, -24);
    const double err = std::abs(double(got[i]) - ref[i]);
    const double r = std::isnan(err) ? INFINITY : err / tol;
    if (!(err <= tol)) {
      if (bad < 5) {
        first += "\n  [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " + std::to_string(ref[i]) +
                 " (sum |a b| " + std::to_string(abs_ref[i]) + ")";
      }
      ++bad;
    }
    if (r > worst) worst = r, worst_i = i;
  }
  if (bad) {
    return ::testing::AssertionFailure() << bad << " of " << got.size()
                                         << " elements off the float16 product bound, worst " << worst
                                         << " times it at " << worst_i << first;
  }
  return ::testing::AssertionSuccess();
}

// |v| elementwise (the operands of the sum-of-magnitudes reference).
inline std::vector<float> magnitudes(std::vector<float> v) {
  for (float& x : v) x = std::abs(x);
  return v;
}

}  // namespace wgnn::test
