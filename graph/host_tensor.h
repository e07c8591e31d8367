#pragma once
// A tensor in host memory, in host layout (dtype_size bytes per element,
// row-major): what users pass in and get out, what .npy files and ONNX
// TensorProtos hold.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "util/host_memory.h"

namespace wgnn {

struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  // util::HostBytes: a resize() leaves new bytes unset (no zero fill), and
  // large blocks are mapped in huge pages (util/host_memory.h).
  util::HostBytes data;

  HostTensor() = default;
  // Zero-filled. Throws Error for a negative dim, an element count that
  // overflows, or more bytes than host_tensor_limit(): shapes may come from
  // a model's data (ConstantOfShape, Expand, Range, ...), and are checked
  // before anything is allocated.
  HostTensor(DType d, Shape s);
  // The same, its bytes left unset, for a tensor that is written whole
  // next (a run's outputs): whoever writes it takes the page faults of
  // fresh memory, not a zero fill before it.
  static HostTensor uninitialized(DType d, Shape s);
  // Copies with memcpy: a vector with an allocator of its own copies byte
  // by byte in libstdc++ (its memmove path is std::allocator's alone).
  HostTensor(const HostTensor& o);
  HostTensor& operator=(const HostTensor& o);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;
  // The same, holding a copy of the bytes at `src` (as many as the shape
  // takes), written once: no zero fill first (a model's weights at load).
  HostTensor(DType d, Shape s, const void* src);
  int64_t numel() const { return wgnn::numel(shape); }
  size_t nbytes() const { return data.size(); }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data.data());
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
  // Element i as double / int64, converting from the dtype (f16 included).
  double get_double(size_t i) const;
  int64_t get_int(size_t i) const;

 private:
  static size_t checked_size(DType d, const Shape& s);
};

// A float32 tensor as float16 (float_to_half_saturate: finite values beyond
// +-65504 saturate); any other dtype is returned unchanged.
HostTensor to_f16_saturated(const HostTensor& t);
// The same into `out`, reusing its memory (resized, not reallocated when it
// is large enough): a float32 `t` only.
void to_f16_saturated(const HostTensor& t, HostTensor& out);
// The same over n floats (F16C where the CPU has it; large arrays in parts on
// several threads).
void to_half_saturate(const float* src, uint16_t* dst, size_t n);

// The largest HostTensor wgnn makes, in bytes (default 16 GiB): a model
// whose host-folded values would be larger fails with an Error instead of
// exhausting memory. Process-wide; the session fuzz target lowers it.
uint64_t host_tensor_limit();
void set_host_tensor_limit(uint64_t bytes);

}  // namespace wgnn
