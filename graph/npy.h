#pragma once
// NumPy .npy files (format 1.0-3.0) to and from HostTensor: float32, float16,
// int32, int64, uint8, int8 and bool, little-endian, C order. Anything else
// (Fortran order, big-endian, other dtypes, truncated data) is an Error that
// names the file and what was found.
#include <string>

#include "gpu/error.h"
#include "graph/host_tensor.h"

namespace wgnn {

HostTensor read_npy(const std::string& path);
HostTensor parse_npy(const std::string& bytes, const std::string& what);
// Atomic (util/file.h): `path` keeps its old content unless the whole new
// file was written; a failure (disk full, ...) is an Error naming `path`.
void write_npy(const std::string& path, const HostTensor& t);
std::string format_npy(const HostTensor& t);

}  // namespace wgnn
