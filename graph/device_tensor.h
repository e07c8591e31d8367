#pragma once
// A tensor that stays on the GPU between runs (what ONNX Runtime calls IO
// binding): a Session output kept on the device, given to a later run as an
// input, read back only when the caller asks. Its storage is in GPU layout
// (graph/tensor.h: int64 as int32, bool and 8-bit types widened, float16 as
// float16 or, where the adapter lacks shader-f16, as float32), so only
// wgnn's own graphs read it. The buffer may be larger than the tensor (its
// capacity): a tensor that grows run after run (a key/value cache) is
// written into the same buffer until it no longer fits, and then into one
// of twice the size (ensure_capacity).
#include <cstdint>
#include <string>

#include "gpu/context.h"
#include "graph/host_tensor.h"
#include "graph/tensor.h"

namespace wgnn {

struct DeviceTensor {
  DType dtype = DType::F32;
  Shape shape;
  gpu::Buffer buffer;  // starts at byte 0; buffer.size() is the capacity
  // The GPU-side dtype the bytes hold: dtype, or float32 for float16 values
  // on an adapter without shader-f16.
  DType stored = DType::F32;

  int64_t numel() const { return wgnn::numel(shape); }
  uint64_t gpu_bytes() const { return uint64_t(numel()) * gpu_dtype_size(stored); }
  bool valid() const { return buffer.valid(); }
};

// Gives `t` a buffer of at least `bytes` (rounded up to 16): its own buffer
// when it is large enough, else a new one of max(bytes, twice the old
// capacity). The contents are not kept.
void ensure_capacity(gpu::Context& ctx, DeviceTensor& t, uint64_t bytes, const std::string& label);

// Uploads a host tensor (GPU layout conversion included; float16 stays
// float16).
DeviceTensor to_device(gpu::Context& ctx, const HostTensor& t, const std::string& label = {});
// Reads a device tensor back (one wait).
HostTensor to_host(gpu::Context& ctx, const DeviceTensor& t);

}  // namespace wgnn
