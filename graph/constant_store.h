#pragma once
// GPU constants shared by several graphs on one Context: a Session's plans
// for different input shapes hold one copy of the model's weights.
//
// A constant is identified by its content: dtype, shape and a 128-bit hash
// of its host bytes (XXH3-128; no host copy is kept, so the weights are not
// held twice in host memory). Equal content is uploaded once;
// each graph that uses it holds a reference, and the buffer is freed when the
// last graph holding it is destroyed. Constants are read-only: a graph
// refuses to write one or to bind it where a kernel writes (Graph::prepare).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "gpu/context.h"
#include "graph/host_tensor.h"
#include "graph/tensor.h"

namespace wgnn {

class ConstantStore {
 public:
  explicit ConstantStore(gpu::Context& ctx) : ctx_(ctx) {}
  ConstantStore(const ConstantStore&) = delete;
  ConstantStore& operator=(const ConstantStore&) = delete;

  // The buffer holding this constant (host layout `bytes` of `data`,
  // converted to GPU layout when uploaded), uploaded now if the store lacks
  // it; the caller holds a reference (release() gives it back). `key` is set
  // to what release() takes.
  gpu::Buffer acquire(const Shape& shape, DType dtype, const void* data, size_t bytes, const std::string& name,
                      std::string* key);
  void release(const std::string& key);
  // The same for a constant the caller names by `memo`, an identity that
  // stays valid for the store's life (a Session's initializer and the
  // conversion its upload applies): found again without `make` running, so
  // a later graph neither converts nor hashes the bytes again. `make` gives
  // the host tensor when the store lacks it: one it already holds, or the
  // scratch tensor it is handed, filled (a conversion), so that a tensor
  // uploaded as it is is never copied on the host.
  using MakeHost = std::function<const HostTensor&(HostTensor& scratch)>;
  gpu::Buffer acquire_memo(const std::string& memo, const MakeHost& make, const std::string& name, std::string* key);

  // Frees the scratch memory acquire_memo converts in (the end of a build).
  void release_scratch() { scratch_ = HostTensor(); }

  // The dtype and shape of the constant `key` names (held now).
  const Shape& shape_of(const std::string& key) const;
  DType dtype_of(const std::string& key) const;

  struct Stats {
    size_t entries = 0;
    uint64_t bytes = 0;     // GPU bytes held now
    uint64_t uploads = 0;   // constants uploaded (misses)
    uint64_t reuses = 0;    // acquisitions that found the constant
    uint64_t uploaded_bytes = 0;
    uint64_t reused_bytes = 0;  // bytes not uploaded again
    uint64_t memo_hits = 0;     // acquire_memo calls answered by their memo (no make, no hash)
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    gpu::Buffer buffer;
    Shape shape;
    DType dtype = DType::F32;
    uint64_t gpu_bytes = 0;
    int refs = 0;
  };
  gpu::Buffer reuse(Entry& e);  // one more reference to a held constant

  gpu::Context& ctx_;
  std::unordered_map<std::string, Entry> entries_;
  std::unordered_map<std::string, std::string> memo_;  // memo -> content key
  HostTensor scratch_;  // acquire_memo's conversions: the memory reused (make() should resize, not reassign)
  Stats stats_;
};

}  // namespace wgnn
