#pragma once
// A serialized ModelProto split before parsing: the message without its
// main graph's initializers' raw_data, and where each of those bytes lies
// in the input. Parsing the rest and copying each initializer's bytes once,
// straight from the input into its tensor, spares the copy protobuf makes
// into strings of its own (fresh memory, a page fault per 4 KiB: most of a
// large model's load).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace wgnn::onnx_import {

struct SplitModel {
  std::string rest;  // the ModelProto without those raw_data fields
  // Per initializer of the main graph, in order: its raw_data in the input
  // (`present` false where it has none).
  struct Raw {
    bool present = false;
    size_t offset = 0, size = 0;
  };
  std::vector<Raw> raw;
};

// False where the bytes are not in the plain form this reads (more than one
// graph field, a repeated raw_data, groups, a malformed tag or length): the
// caller then parses them as they are, and protobuf judges them.
bool split_initializer_bytes(std::string_view model, SplitModel& out);

}  // namespace wgnn::onnx_import
