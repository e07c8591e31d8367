#include "graph/npy.h"

#include <fmt/format.h>

#include <fstream>
#include <cctype>
#include <sstream>

#include "gpu/error.h"
#include "util/file.h"

namespace wgnn {
namespace {

const char* descr_of(DType d) {
  switch (d) {
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::I8: return "|i1";
    case DType::Bool: return "|b1";
  }
  return "?";
}

DType dtype_of(const std::string& descr, const std::string& what) {
  static const std::pair<const char*, DType> table[] = {
      {"<f4", DType::F32}, {"<f2", DType::F16}, {"<i4", DType::I32}, {"<i8", DType::I64},
      {"|u1", DType::U8},  {"|i1", DType::I8},  {"|b1", DType::Bool}, {"<u1", DType::U8},
      {"<i1", DType::I8},  {"<b1", DType::Bool}};
  for (const auto& [k, v] : table) {
    if (descr == k) return v;
  }
  throw Error(fmt::format("{}: .npy dtype '{}' is not supported; accepted: float32 (<f4), float16 (<f2), int32 (<i4), "
                          "int64 (<i8), uint8 (|u1), int8 (|i1), bool (|b1), little-endian",
                          what, descr));
}

// numpy writes headers of a few dozen bytes and reads at most 10000.
constexpr size_t kMaxHeader = 65536;

// The text of key `key` in the header dict: a quoted string without its
// quotes, a parenthesized tuple without its parentheses, or a bare word
// (True, False).
std::string header_value(const std::string& h, const std::string& key, const std::string& what) {
  const std::string quoted = "'" + key + "'";
  size_t p = h.find(quoted);
  if (p == std::string::npos) throw Error(fmt::format("{}: .npy header has no '{}'", what, key));
  p += quoted.size();
  auto skip = [&] {
    while (p < h.size() && (h[p] == ' ' || h[p] == '\t')) ++p;
  };
  skip();
  if (p >= h.size() || h[p] != ':') throw Error(fmt::format("{}: .npy header: no ':' after '{}'", what, key));
  ++p;
  skip();
  if (p >= h.size()) throw Error(fmt::format("{}: .npy header ends after '{}'", what, key));
  const char open = h[p];
  if (open == '\'' || open == '(') {
    const char close = open == '(' ? ')' : '\'';
    const size_t end = h.find(close, p + 1);
    if (end == std::string::npos) throw Error(fmt::format("{}: .npy header: '{}' value is not closed", what, key));
    return h.substr(p + 1, end - p - 1);
  }
  size_t end = p;
  while (end < h.size() && std::isalpha(static_cast<unsigned char>(h[end]))) ++end;
  return h.substr(p, end - p);
}

}  // namespace

HostTensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    throw Error(fmt::format("{}: not a .npy file (no \\x93NUMPY magic)", what));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (size_t(static_cast<unsigned char>(bytes[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(fmt::format("{}: truncated .npy header", what));
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= size_t(static_cast<unsigned char>(bytes[8 + size_t(i)])) << (8 * i);
    start = 12;
  } else {
    throw Error(fmt::format("{}: .npy format version {} is not supported (1, 2 or 3)", what, major));
  }
  if (bytes.size() < start + header_len) throw Error(fmt::format("{}: truncated .npy header", what));
  if (header_len > kMaxHeader) {
    throw Error(fmt::format("{}: .npy header of {} bytes is over the {} bytes accepted", what, header_len, kMaxHeader));
  }
  const std::string header = bytes.substr(start, header_len);
  const DType dtype = dtype_of(header_value(header, "descr", what), what);
  const std::string order = header_value(header, "fortran_order", what);
  if (order == "True") throw Error(fmt::format("{}: Fortran-order .npy arrays are not supported; save in C order", what));
  if (order != "False") throw Error(fmt::format("{}: .npy 'fortran_order' is '{}', not True or False", what, order));
  const std::string dims = header_value(header, "shape", what);
  Shape shape;
  std::stringstream ss(dims);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \tL") + 1);
    if (item.empty()) continue;
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0) throw Error(fmt::format("{}: bad .npy shape '({})'", what, dims));
    shape.push_back(v);
  }
  const uint64_t need = checked_nbytes(shape, dtype_size(dtype), what);
  const size_t data_start = start + header_len;
  if (bytes.size() - data_start != need) {
    throw Error(fmt::format("{}: .npy data is {} bytes; shape {} of {} needs {}", what, bytes.size() - data_start,
                            shape_str(shape), dtype_name(dtype), need));
  }
  HostTensor t(dtype, shape);
  if (t.nbytes()) std::memcpy(t.data.data(), bytes.data() + data_start, t.nbytes());
  return t;
}

HostTensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open '{}'", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_npy(buf.str(), path);
}

std::string format_npy(const HostTensor& t) {
  std::string shape;
  for (int64_t d : t.shape) shape += fmt::format("{}, ", d);
  if (t.shape.size() > 1) shape.resize(shape.size() - 1);  // "(2, 3)" but "(5,)"
  if (t.shape.size() > 1) shape.pop_back();
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr_of(t.dtype), shape);
  // Pad so the data starts at a multiple of 64 bytes; the header ends in '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(char(header.size() & 0xFF));
  out.push_back(char(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

void write_npy(const std::string& path, const HostTensor& t) { util::write_file_atomic(path, format_npy(t)); }

}  // namespace wgnn
