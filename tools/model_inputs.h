#pragma once
// The inputs of a model run from the command line: .npy files given by
// name, the rest seeded random data of the declared shape (dynamic dims set
// with --shape). Shared by `wgnn run`, `wgnn bench` and `wgnn profile`.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/host_tensor.h"
#include "onnx/session.h"

namespace wgnn::tools {

struct InputOptions {
  std::vector<std::string> files;   // NAME=FILE.npy
  std::vector<std::string> shapes;  // NAME=1x3x224x224 (for random inputs)
  uint32_t seed = 0;
  // Integer inputs (token ids, indices) are uniform in [int_lo, int_hi).
  int64_t int_lo = 0, int_hi = 4;
};

// Parses "LO:HI" (LO < HI) into o.int_lo / o.int_hi; throws a clear error.
void parse_int_range(const std::string& spec, InputOptions& o);

// Every input of the session: from its file, or random (floats standard
// normal, integers in the range, bool 0/1) of the declared shape or the
// --shape given. A --shape that differs from a fixed declared dim declares
// the input at that shape (Session::set_input_shape). Errors name the
// input and say what to pass.
std::map<std::string, HostTensor> model_inputs(onnx_import::Session& s, const InputOptions& o);

// A value's name as a file name: characters other than letters, digits,
// '_', '.' and '-' become '_' (what `wgnn run` writes, <name>.npy).
std::string safe_name(const std::string& s);

// "name float32 1x3x224x224, ids int64 1x32"
std::string describe_inputs(const std::map<std::string, HostTensor>& inputs);

}  // namespace wgnn::tools
