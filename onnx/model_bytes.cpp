#include "onnx/model_bytes.h"

#include <cstdint>

namespace wgnn::onnx_import {
namespace {

// ModelProto.graph, GraphProto.initializer, TensorProto.raw_data (onnx.proto).
constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5;

struct Reader {
  std::string_view in;
  size_t at = 0;
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= in.size()) return false;
      const uint8_t b = uint8_t(in[at++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return shift < 63 || b <= 1;
    }
    return false;
  }
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

// One field: its number, wire type and, for a length-delimited one, where its
// payload lies; `end` is past the whole field. False on anything malformed.
struct Field {
  uint32_t number = 0, type = 0;
  size_t start = 0, tag_end = 0, payload = 0, size = 0, end = 0;
};

bool next_field(Reader& r, Field& f) {
  f.start = r.at;
  uint64_t tag = 0;
  if (!r.varint(tag) || tag > 0xffffffffu || (tag >> 3) == 0) return false;
  f.number = uint32_t(tag >> 3);
  f.type = uint32_t(tag & 7);
  f.tag_end = r.at;
  uint64_t v = 0;
  switch (f.type) {
    case kVarint:
      if (!r.varint(v)) return false;
      break;
    case kFixed64:
      if (r.in.size() - r.at < 8) return false;
      r.at += 8;
      break;
    case kFixed32:
      if (r.in.size() - r.at < 4) return false;
      r.at += 4;
      break;
    case kLength:
      if (!r.varint(v) || v > r.in.size() - r.at) return false;
      f.payload = r.at;
      f.size = size_t(v);
      r.at += size_t(v);
      break;
    default:
      return false;  // groups (deprecated) or invalid
  }
  f.end = r.at;
  return true;
}

// A length-delimited field again: its tag as it was, then `payload`.
void put_length_field(std::string& out, std::string_view input, const Field& f, const std::string& payload) {
  out.append(input.substr(f.start, f.tag_end - f.start));
  put_varint(out, payload.size());
  out.append(payload);
}

bool split_tensor(std::string_view in, size_t base, std::string& rest, SplitModel::Raw& raw) {
  Reader r{in};
  Field f;
  while (r.at < in.size()) {
    if (!next_field(r, f)) return false;
    if (f.number == kTensorRawData) {
      if (f.type != kLength || raw.present) return false;
      raw.present = true;
      raw.offset = base + f.payload;
      raw.size = f.size;
      continue;
    }
    rest.append(in.substr(f.start, f.end - f.start));
  }
  return true;
}

bool split_graph(std::string_view in, size_t base, std::string& rest, std::vector<SplitModel::Raw>& raws) {
  Reader r{in};
  Field f;
  std::string tensor;
  while (r.at < in.size()) {
    if (!next_field(r, f)) return false;
    if (f.number == kGraphInitializer && f.type == kLength) {
      tensor.clear();
      SplitModel::Raw raw;
      if (!split_tensor(in.substr(f.payload, f.size), base + f.payload, tensor, raw)) return false;
      raws.push_back(raw);
      put_length_field(rest, in, f, tensor);
      continue;
    }
    if (f.number == kGraphInitializer) return false;
    rest.append(in.substr(f.start, f.end - f.start));
  }
  return true;
}

}  // namespace

bool split_initializer_bytes(std::string_view model, SplitModel& out) {
  out = SplitModel{};
  Reader r{model};
  Field f;
  bool graph = false;
  std::string g;
  while (r.at < model.size()) {
    if (!next_field(r, f)) return false;
    if (f.number == kModelGraph) {
      if (f.type != kLength || graph) return false;
      graph = true;
      g.clear();
      if (!split_graph(model.substr(f.payload, f.size), f.payload, g, out.raw)) return false;
      put_length_field(out.rest, model, f, g);
      continue;
    }
    out.rest.append(model.substr(f.start, f.end - f.start));
  }
  return graph;
}

}  // namespace wgnn::onnx_import
