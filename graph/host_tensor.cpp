#include "graph/host_tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <thread>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "gpu/error.h"
#include "graph/half.h"

namespace wgnn {

namespace {
std::atomic<uint64_t> g_host_tensor_limit{uint64_t(16) << 30};
}

uint64_t host_tensor_limit() { return g_host_tensor_limit.load(); }
void set_host_tensor_limit(uint64_t bytes) { g_host_tensor_limit.store(bytes); }

size_t HostTensor::checked_size(DType d, const Shape& s) {
  const uint64_t bytes = checked_nbytes(s, dtype_size(d), "host tensor");
  if (bytes > host_tensor_limit()) {
    throw Error(fmt::format("a host tensor {} {} would take {} bytes, over the limit of {} bytes "
                            "(wgnn::set_host_tensor_limit)",
                            dtype_name(d), shape_str(s), bytes, host_tensor_limit()));
  }
  return size_t(bytes);
}

HostTensor::HostTensor(DType d, Shape s) : HostTensor(uninitialized(d, std::move(s))) {
  if (!util::host_alloc_zeroed(data.size())) std::fill(data.begin(), data.end(), uint8_t(0));
}

HostTensor HostTensor::uninitialized(DType d, Shape s) {
  HostTensor t;
  t.dtype = d;
  t.shape = std::move(s);
  t.data.resize(checked_size(d, t.shape));
  return t;
}

HostTensor::HostTensor(DType d, Shape s, const void* src) : dtype(d), shape(std::move(s)) {
  data.resize(checked_size(dtype, shape));
  if (!data.empty()) std::memcpy(data.data(), src, data.size());
}

HostTensor::HostTensor(const HostTensor& o) : dtype(o.dtype), shape(o.shape) {
  data.resize(o.data.size());
  if (!data.empty()) std::memcpy(data.data(), o.data.data(), data.size());
}

HostTensor& HostTensor::operator=(const HostTensor& o) {
  if (this == &o) return *this;
  dtype = o.dtype;
  shape = o.shape;
  if (data.size() != o.data.size()) {
    util::HostBytes fresh;  // not resize(): that would move the old bytes first
    fresh.resize(o.data.size());
    data.swap(fresh);
  }
  if (!data.empty()) std::memcpy(data.data(), o.data.data(), data.size());
  return *this;
}

double HostTensor::get_double(size_t i) const {
  switch (dtype) {
    case DType::F32: return as<float>()[i];
    case DType::F16: return half_to_float(as<uint16_t>()[i]);
    case DType::I32: return as<int32_t>()[i];
    case DType::I64: return double(as<int64_t>()[i]);
    case DType::Bool:
    case DType::U8: return as<uint8_t>()[i];
    case DType::I8: return as<int8_t>()[i];
  }
  return 0;
}

int64_t HostTensor::get_int(size_t i) const {
  switch (dtype) {
    case DType::I64: return as<int64_t>()[i];
    case DType::I32: return as<int32_t>()[i];
    case DType::Bool:
    case DType::U8: return as<uint8_t>()[i];
    case DType::I8: return as<int8_t>()[i];
    default: return int64_t(get_double(i));
  }
}

namespace {

void to_half_saturate_scalar(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_half_saturate(src[i]);
}

#if defined(__x86_64__)
// Eight at a time with the F16C conversion (round to nearest even, as
// Imath's): finite values beyond +-65504 are first replaced by +-65504;
// infinities and NaN pass through. tests/graph/half_test.cpp checks it bit
// for bit against float_to_half_saturate.
__attribute__((target("avx,f16c"))) void to_half_saturate_f16c(const float* src, uint16_t* dst, size_t n) {
  const __m256 kmax = _mm256_set1_ps(65504.f);
  const __m256 fmax = _mm256_set1_ps(3.4028235e38f);
  const __m256 sign = _mm256_set1_ps(-0.f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    const __m256 a = _mm256_andnot_ps(sign, v);
    const __m256 big = _mm256_and_ps(_mm256_cmp_ps(a, kmax, _CMP_GT_OQ), _mm256_cmp_ps(a, fmax, _CMP_LE_OQ));
    v = _mm256_blendv_ps(v, _mm256_or_ps(_mm256_and_ps(v, sign), kmax), big);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  to_half_saturate_scalar(src + i, dst + i, n - i);
}
#endif

void to_half_saturate_part(const float* src, uint16_t* dst, size_t n) {
#if defined(__x86_64__)
  static const bool f16c = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  if (f16c) return to_half_saturate_f16c(src, dst, n);
#endif
  to_half_saturate_scalar(src, dst, n);
}

}  // namespace

void to_half_saturate(const float* src, uint16_t* dst, size_t n) {
  // A model's weights are converted when its first plan is built: in
  // parts on several threads when large (DaViT-B's 88 M took most of a
  // float16 build on one).
  constexpr size_t kPart = size_t(1) << 20;
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({hw, size_t(8), (n + kPart - 1) / kPart});
  if (threads <= 1) return to_half_saturate_part(src, dst, n);
  const size_t per = (n + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (size_t k = 1; k < threads; ++k) {
    const size_t lo = k * per, hi = std::min(n, lo + per);
    if (lo < hi) workers.emplace_back(to_half_saturate_part, src + lo, dst + lo, hi - lo);
  }
  to_half_saturate_part(src, dst, std::min(n, per));
  for (auto& w : workers) w.join();
}

HostTensor to_f16_saturated(const HostTensor& t) {
  if (t.dtype != DType::F32) return t;
  HostTensor h;
  to_f16_saturated(t, h);
  return h;
}

void to_f16_saturated(const HostTensor& t, HostTensor& out) {
  if (t.dtype != DType::F32) throw Error(fmt::format("to_f16_saturated: a {} tensor, not float32", dtype_name(t.dtype)));
  out.dtype = DType::F16;
  out.shape = t.shape;
  out.data.clear();  // a larger size then reallocates without moving the old bytes
  out.data.resize(size_t(t.numel()) * 2);
  to_half_saturate(t.as<float>(), out.as<uint16_t>(), size_t(t.numel()));
}

}  // namespace wgnn
