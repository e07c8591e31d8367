// et_webgpu_run: runs a .pte through ExecuTorch's own runtime and its WebGPU
// backend (registered as "VulkanBackend", the delegate id WebGPUPartitioner
// writes), to compare with `wgnn run` on the same file.
//
//   et_webgpu_run MODEL.pte [--input NAME_OR_INDEX=FILE.npy ...]
//                 [--output-dir DIR] [--runs N] [--warmup K] [--method NAME]
//                 [--json]
//
// Inputs are named as wgnn names them (input_0, input_1, ...) or by index
// (0, 1, ...). .npy files of float32, float16, float64, int64, int32, int8,
// uint8 or bool are read; a file whose dtype differs from the program's is
// converted to it (with a note on stderr). With --output-dir every input must
// be given; without it, an input that is not given is filled with
// deterministic values: floats ((i * 37) % 101) / 50 - 1 for element i (in
// [-1, 1]), integers 0, bools true on even elements.
//
// Timing: each run is host to host, measured around Module::execute (setting
// the inputs, which copies them into the method's input tensors, executing the
// method, the WebGPU delegate uploading inputs, dispatching and reading its
// outputs back into the method's output tensors before it returns). The first
// run (a warmup one when --warmup > 0) is reported as first_run_ms; median_ms
// and min_ms are over the N measured runs. load_ms is the WebGPU device
// creation (also given alone as device_ms), the program load and the method
// load (the delegate's graph, buffers and pipelines are built then).
//
// The backend asks Dawn for an adapter without naming a backend; where no real
// driver offers one, Dawn gives its Null adapter, which computes nothing. That
// is refused. On a machine without a GPU, point VK_DRIVER_FILES at a lavapipe
// ICD json.
//
// Outputs of the last run are written as DIR/output_0.npy, output_1.npy, ...
// --json prints one line with the timings and the outputs' shapes and dtypes.
// Any error is printed and the exit status is 1 (2 for a usage error).

#include <executorch/backends/webgpu/runtime/WebGPUDevice.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/executor/method_meta.h>
#include <executorch/runtime/platform/runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

using executorch::aten::ScalarType;
using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::MethodMeta;
using executorch::runtime::Tag;

struct Fail : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& msg) {
  throw Fail(msg);
}

std::string err_str(Error e) {
  std::ostringstream s;
  s << executorch::runtime::to_string(e) << " (0x" << std::hex
    << static_cast<int>(e) << ")";
  return s.str();
}

// ---- dtypes -----------------------------------------------------------------

struct DType {
  ScalarType st;
  const char* npy;   // descr in .npy
  const char* name;  // numpy name, for --json
  size_t size;
};

const DType kDTypes[] = {
    {ScalarType::Float, "<f4", "float32", 4},
    {ScalarType::Half, "<f2", "float16", 2},
    {ScalarType::Double, "<f8", "float64", 8},
    {ScalarType::Long, "<i8", "int64", 8},
    {ScalarType::Int, "<i4", "int32", 4},
    {ScalarType::Short, "<i2", "int16", 2},
    {ScalarType::Char, "|i1", "int8", 1},
    {ScalarType::Byte, "|u1", "uint8", 1},
    {ScalarType::Bool, "|b1", "bool", 1},
};

const DType* dtype_of(ScalarType st) {
  for (const auto& d : kDTypes)
    if (d.st == st) return &d;
  return nullptr;
}

const DType* dtype_of_npy(std::string descr) {
  // Single-byte types may be written with '<', '>' or '=' too.
  if (descr.size() == 3 && descr[2] == '1' &&
      (descr[0] == '<' || descr[0] == '>' || descr[0] == '='))
    descr[0] = '|';
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';
  for (const auto& d : kDTypes)
    if (descr == d.npy) return &d;
  return nullptr;
}

std::string scalar_name(ScalarType st) {
  const DType* d = dtype_of(st);
  return d ? d->name : ("ScalarType(" + std::to_string(static_cast<int>(st)) + ")");
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t float_to_half(float f) {
  // Round to nearest even, via the bits.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 31) return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return sign | h;
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return static_cast<uint16_t>(h);
}

double load_as_double(const uint8_t* p, ScalarType st) {
  switch (st) {
    case ScalarType::Float: { float v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::Half: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case ScalarType::Double: { double v; std::memcpy(&v, p, 8); return v; }
    case ScalarType::Long: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case ScalarType::Int: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::Short: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::Char: return static_cast<int8_t>(*p);
    case ScalarType::Byte: return *p;
    case ScalarType::Bool: return *p ? 1.0 : 0.0;
    default: fail("unsupported dtype " + scalar_name(st));
  }
}

// Integers are converted exactly (int64 through int64, not double).
bool is_int(ScalarType st) {
  return st == ScalarType::Long || st == ScalarType::Int ||
         st == ScalarType::Short || st == ScalarType::Char ||
         st == ScalarType::Byte || st == ScalarType::Bool;
}

int64_t load_as_int(const uint8_t* p, ScalarType st) {
  switch (st) {
    case ScalarType::Long: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case ScalarType::Int: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::Short: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::Char: return static_cast<int8_t>(*p);
    case ScalarType::Byte: return *p;
    case ScalarType::Bool: return *p ? 1 : 0;
    default: fail("unsupported dtype " + scalar_name(st));
  }
}

void store(uint8_t* p, ScalarType st, double v, int64_t iv, bool from_int) {
  switch (st) {
    case ScalarType::Float: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case ScalarType::Half: { uint16_t h = float_to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case ScalarType::Double: std::memcpy(p, &v, 8); break;
    case ScalarType::Long: { int64_t x = from_int ? iv : static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    case ScalarType::Int: { int32_t x = static_cast<int32_t>(from_int ? iv : static_cast<int64_t>(v)); std::memcpy(p, &x, 4); break; }
    case ScalarType::Short: { int16_t x = static_cast<int16_t>(from_int ? iv : static_cast<int64_t>(v)); std::memcpy(p, &x, 2); break; }
    case ScalarType::Char: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(from_int ? iv : static_cast<int64_t>(v)); break;
    case ScalarType::Byte: *p = static_cast<uint8_t>(from_int ? iv : static_cast<int64_t>(v)); break;
    case ScalarType::Bool: *p = (from_int ? iv != 0 : v != 0.0) ? 1 : 0; break;
    default: fail("unsupported dtype " + scalar_name(st));
  }
}

// ---- .npy -------------------------------------------------------------------

struct Array {
  const DType* dtype = nullptr;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(path + ": .npy header has no '" + key + "'");
  auto colon = header.find(':', k);
  if (colon == std::string::npos) fail(path + ": bad .npy header");
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') i++;
  if (i >= header.size()) fail(path + ": bad .npy header");
  if (header[i] == '\'') {
    auto e = header.find('\'', i + 1);
    if (e == std::string::npos) fail(path + ": bad .npy header");
    return header.substr(i + 1, e - i - 1);
  }
  if (header[i] == '(') {
    auto e = header.find(')', i);
    if (e == std::string::npos) fail(path + ": bad .npy header");
    return header.substr(i, e - i + 1);
  }
  auto e = header.find_first_of(",}", i);
  return header.substr(i, e - i);
}

Array read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open " + path);
  char magic[6];
  f.read(magic, 6);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path + ": not a .npy file");
  uint8_t ver[2];
  f.read(reinterpret_cast<char*>(ver), 2);
  uint32_t hlen = 0;
  if (ver[0] == 1) {
    uint8_t b[2];
    f.read(reinterpret_cast<char*>(b), 2);
    hlen = b[0] | (b[1] << 8);
  } else if (ver[0] == 2 || ver[0] == 3) {
    uint8_t b[4];
    f.read(reinterpret_cast<char*>(b), 4);
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    fail(path + ": unsupported .npy version " + std::to_string(ver[0]));
  }
  std::string header(hlen, '\0');
  f.read(&header[0], hlen);
  if (!f) fail(path + ": truncated .npy header");
  Array a;
  std::string descr = dict_value(header, "descr", path);
  a.dtype = dtype_of_npy(descr);
  if (!a.dtype)
    fail(path + ": dtype '" + descr + "' is not supported (float32, float16, float64, int64, int32, int16, int8, uint8, bool; little-endian)");
  if (dict_value(header, "fortran_order", path).find("True") != std::string::npos)
    fail(path + ": Fortran-order arrays are not supported (save a C-contiguous array)");
  std::string shp = dict_value(header, "shape", path);
  for (size_t i = 0; i < shp.size();) {
    if (std::isdigit(static_cast<unsigned char>(shp[i]))) {
      size_t j = i;
      while (j < shp.size() && std::isdigit(static_cast<unsigned char>(shp[j]))) j++;
      a.shape.push_back(std::stoll(shp.substr(i, j - i)));
      i = j;
    } else {
      i++;
    }
  }
  size_t nbytes = static_cast<size_t>(a.numel()) * a.dtype->size;
  a.data.resize(nbytes);
  f.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(nbytes));
  if (static_cast<size_t>(f.gcount()) != nbytes)
    fail(path + ": truncated data (" + std::to_string(f.gcount()) + " of " + std::to_string(nbytes) + " bytes)");
  return a;
}

void write_npy(const std::string& path, const DType& dt, const std::vector<int64_t>& shape,
               const void* data, size_t nbytes) {
  std::string shp = "(";
  for (size_t i = 0; i < shape.size(); i++) {
    shp += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) shp += ",";
    if (i + 1 < shape.size()) shp += " ";
  }
  shp += ")";
  std::string header = std::string("{'descr': '") + dt.npy + "', 'fortran_order': False, 'shape': " + shp + ", }";
  size_t total = 10 + header.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  header += std::string(pad, ' ') + "\n";
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write " + path);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  char b[2] = {static_cast<char>(hl & 0xff), static_cast<char>(hl >> 8)};
  f.write(b, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(nbytes));
  if (!f) fail("error writing " + path);
}

// ---- misc -------------------------------------------------------------------

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string fmt_ms(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); i++) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

[[noreturn]] void usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "et_webgpu_run: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: et_webgpu_run MODEL.pte [--input NAME_OR_INDEX=FILE.npy ...] [--output-dir DIR]\n"
               "                     [--runs N] [--warmup K] [--method NAME] [--json]\n");
  std::exit(2);
}

int parse_count(const std::string& flag, const char* v, int min) {
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (!*v || *end || n < min || n > 1000000) usage(flag + " wants an integer >= " + std::to_string(min));
  return static_cast<int>(n);
}

struct Args {
  std::string model, output_dir, method;
  std::vector<std::pair<std::string, std::string>> inputs;
  int runs = 10, warmup = 1;
  bool json = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    std::string s = argv[i];
    auto value = [&](const std::string& flag) -> const char* {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    if (s == "--input" || s == "-i") {
      std::string v = value(s);
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) usage("--input wants NAME_OR_INDEX=FILE.npy, got '" + v + "'");
      a.inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (s == "--output-dir" || s == "-o") {
      a.output_dir = value(s);
    } else if (s == "--runs") {
      a.runs = parse_count(s, value(s), 1);
    } else if (s == "--warmup") {
      a.warmup = parse_count(s, value(s), 0);
    } else if (s == "--method") {
      a.method = value(s);
    } else if (s == "--json") {
      a.json = true;
    } else if (s == "-h" || s == "--help") {
      usage("");
    } else if (!s.empty() && s[0] == '-') {
      usage("unknown option " + s);
    } else if (a.model.empty()) {
      a.model = s;
    } else {
      usage("one model only (got '" + a.model + "' and '" + s + "')");
    }
  }
  if (a.model.empty()) usage("no model given");
  return a;
}

// The index of input `key`: "input_3", "3".
size_t input_index(const std::string& key, size_t n) {
  std::string digits = key;
  if (key.rfind("input_", 0) == 0) digits = key.substr(6);
  bool ok = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!ok) fail("input '" + key + "': name inputs input_0 .. input_" + std::to_string(n ? n - 1 : 0) + " or by index (a .pte has no input names)");
  size_t i = std::stoul(digits);
  if (i >= n) fail("input '" + key + "': the method has " + std::to_string(n) + " input(s)");
  return i;
}

// A host tensor for input `i`, of the program's dtype and shape.
struct HostInput {
  std::vector<uint8_t> data;
  TensorPtr tensor;
};

HostInput make_input(size_t i, const MethodMeta& meta, const std::string* npy_path) {
  auto info_r = meta.input_tensor_meta(i);
  if (!info_r.ok()) fail("input " + std::to_string(i) + ": no tensor metadata: " + err_str(info_r.error()));
  const auto& info = info_r.get();
  const ScalarType want = info.scalar_type();
  const DType* wdt = dtype_of(want);
  if (!wdt) fail("input " + std::to_string(i) + ": the program's dtype " + scalar_name(want) + " is not supported here");
  std::vector<int64_t> shape(info.sizes().begin(), info.sizes().end());
  auto dim_order = info.dim_order();
  for (size_t d = 0; d < dim_order.size(); d++)
    if (dim_order[d] != d)
      fail("input " + std::to_string(i) + ": the program wants a non-contiguous dim order; not supported here");
  int64_t numel = 1;
  for (auto d : shape) numel *= d;

  HostInput h;
  h.data.resize(static_cast<size_t>(numel) * wdt->size);
  if (npy_path) {
    Array a = read_npy(*npy_path);
    // A shape other than the program's is passed on: a program exported with
    // dynamic shapes takes smaller ones (its metadata gives the upper bound),
    // and Method::set_input refuses what the program cannot take (checked by
    // the caller, which names both shapes).
    if (a.shape != shape) {
      shape = a.shape;
      numel = a.numel();
      h.data.resize(static_cast<size_t>(numel) * wdt->size);
    }
    if (a.dtype->st == want) {
      h.data = std::move(a.data);
    } else {
      std::fprintf(stderr, "et_webgpu_run: note: input %zu (%s) is %s, converted to the program's %s\n", i,
                   npy_path->c_str(), a.dtype->name, wdt->name);
      const bool from_int = is_int(a.dtype->st);
      for (int64_t k = 0; k < numel; k++) {
        const uint8_t* src = a.data.data() + k * a.dtype->size;
        double v = from_int ? 0.0 : load_as_double(src, a.dtype->st);
        int64_t iv = from_int ? load_as_int(src, a.dtype->st) : 0;
        if (from_int) v = static_cast<double>(iv);
        store(h.data.data() + k * wdt->size, want, v, iv, from_int);
      }
    }
  } else {
    for (int64_t k = 0; k < numel; k++) {
      double v = 0.0;
      int64_t iv = 0;
      bool from_int = true;
      if (want == ScalarType::Float || want == ScalarType::Half || want == ScalarType::Double) {
        v = ((k * 37) % 101) / 50.0 - 1.0;
        from_int = false;
      } else if (want == ScalarType::Bool) {
        iv = (k % 2 == 0) ? 1 : 0;
      }
      store(h.data.data() + k * wdt->size, want, v, iv, from_int);
    }
  }
  std::vector<executorch::aten::SizesType> sizes(shape.begin(), shape.end());
  h.tensor = executorch::extension::from_blob(h.data.data(), sizes, want);
  return h;
}

int run(const Args& args) {
  // The backend registers itself from a static initializer; without it the
  // program would fail later with a less direct message.
  executorch::runtime::runtime_init();
  if (executorch::runtime::get_backend_class("VulkanBackend") == nullptr)
    fail("the WebGPU backend (registered as VulkanBackend) is not linked into this executable");

  struct stat st;
  if (stat(args.model.c_str(), &st) != 0) fail("cannot open " + args.model);

  auto t_load = std::chrono::steady_clock::now();
  // The backend's process-wide WebGPU context (created here rather than at the
  // first delegate's init, so the adapter can be checked first). It asks Dawn
  // for a high-performance adapter with no backend named; where no real driver
  // offers one, Dawn answers with its Null adapter, which computes nothing and
  // leaves every output unwritten: refused here.
  std::string adapter_desc;
  {
    namespace wg = executorch::backends::webgpu;
    wg::WebGPUContext* ctx = wg::get_default_webgpu_context();
    if (ctx == nullptr || ctx->adapter == nullptr) fail("no WebGPU context (adapter or device request failed, see above)");
    WGPUAdapterInfo info = {};
    if (wgpuAdapterGetInfo(ctx->adapter, &info) != WGPUStatus_Success) fail("wgpuAdapterGetInfo failed");
    auto sv = [](WGPUStringView v) { return std::string(v.data ? v.data : "", v.data ? (v.length == WGPU_STRLEN ? std::strlen(v.data) : v.length) : 0); };
    adapter_desc = sv(info.device);
    std::string d = sv(info.description);
    if (!d.empty()) adapter_desc += " (" + d + ")";
    const bool null_backend = info.backendType == WGPUBackendType_Null;
    wgpuAdapterInfoFreeMembers(info);
    if (null_backend)
      fail("Dawn gave its Null adapter, which runs nothing: no Vulkan driver offered an adapter (on a machine "
           "without a GPU, point VK_DRIVER_FILES at a lavapipe ICD json)");
  }
  const double device_ms = ms_since(t_load);
  Module module(args.model, Module::LoadMode::File);
  Error e = module.load();
  if (e != Error::Ok) fail("loading " + args.model + " failed: " + err_str(e));
  std::string method = args.method;
  if (method.empty()) {
    auto names = module.method_names();
    if (!names.ok()) fail("reading the method names failed: " + err_str(names.error()));
    if (names->count("forward") || names->empty())
      method = "forward";
    else if (names->size() == 1)
      method = *names->begin();
    else
      fail("the program has several methods and none is 'forward': name one with --method");
  }
  e = module.load_method(method);
  if (e != Error::Ok)
    fail("loading method '" + method + "' failed: " + err_str(e) +
         " (see the runtime's log above: a missing kernel, or the WebGPU delegate refusing the graph)");
  const double load_ms = ms_since(t_load);

  auto meta_r = module.method_meta(method);
  if (!meta_r.ok()) fail("method metadata: " + err_str(meta_r.error()));
  const MethodMeta& meta = meta_r.get();
  const size_t n_in = meta.num_inputs();

  // Inputs.
  std::map<size_t, std::string> given;
  for (const auto& kv : args.inputs) {
    size_t i = input_index(kv.first, n_in);
    if (given.count(i)) fail("input " + std::to_string(i) + " given twice");
    given[i] = kv.second;
  }
  std::vector<HostInput> host(n_in);
  std::vector<EValue> inputs(n_in);
  for (size_t i = 0; i < n_in; i++) {
    auto tag = meta.input_tag(i);
    if (!tag.ok()) fail("input " + std::to_string(i) + ": " + err_str(tag.error()));
    if (tag.get() != Tag::Tensor) {
      if (tag.get() == Tag::None) continue;  // nothing to set
      fail("input " + std::to_string(i) + " is not a tensor (tag " + std::to_string(static_cast<int>(tag.get())) +
           "): not supported here");
    }
    auto it = given.find(i);
    if (it == given.end() && !args.output_dir.empty())
      fail("input_" + std::to_string(i) + " not given: with --output-dir every input must be given (--input input_" +
           std::to_string(i) + "=FILE.npy)");
    host[i] = make_input(i, meta, it == given.end() ? nullptr : &it->second);
    inputs[i] = EValue(*host[i].tensor);
    Error se = module.set_input(method, inputs[i], i);
    if (se != Error::Ok) {
      std::vector<int64_t> got(host[i].tensor->sizes().begin(), host[i].tensor->sizes().end());
      auto info = meta.input_tensor_meta(i);
      std::vector<int64_t> want;
      if (info.ok()) want.assign(info->sizes().begin(), info->sizes().end());
      fail("input " + std::to_string(i) + (it == given.end() ? "" : " (" + it->second + ")") + ": shape " +
           shape_str(got) + ", the program wants " + shape_str(want) +
           " (an upper bound where it was exported with dynamic shapes); the method refused it: " + err_str(se));
    }
  }

  // Runs.
  std::vector<double> times;
  double first_run_ms = -1;
  std::vector<EValue> outputs;
  const int total = args.warmup + args.runs;
  for (int r = 0; r < total; r++) {
    auto t0 = std::chrono::steady_clock::now();
    auto res = module.execute(method, inputs);
    const double ms = ms_since(t0);
    if (!res.ok())
      fail("execute (run " + std::to_string(r + 1) + ") failed: " + err_str(res.error()) +
           " (see the runtime's log above)");
    if (r == 0) first_run_ms = ms;
    if (r >= args.warmup) times.push_back(ms);
    if (r + 1 == total) outputs = std::move(res.get());
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);

  // Outputs.
  if (!args.output_dir.empty()) {
    mkdir(args.output_dir.c_str(), 0777);
    struct stat ds;
    if (stat(args.output_dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
      fail("cannot make the output folder " + args.output_dir);
  }
  std::string outs_json = "[";
  for (size_t k = 0; k < outputs.size(); k++) {
    const EValue& v = outputs[k];
    std::vector<int64_t> shape;
    const DType* dt = nullptr;
    const void* data = nullptr;
    size_t nbytes = 0;
    int64_t iv;
    double dv;
    bool bv;
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      dt = dtype_of(t.scalar_type());
      if (!dt) fail("output " + std::to_string(k) + " has dtype " + scalar_name(t.scalar_type()) + ", not supported here");
      for (auto d : t.sizes()) shape.push_back(d);
      auto dord = t.dim_order();
      for (size_t d = 0; d < dord.size(); d++)
        if (dord[d] != d) fail("output " + std::to_string(k) + " is not contiguous (dim order); not supported here");
      data = t.const_data_ptr();
      nbytes = t.nbytes();
    } else if (v.isInt()) {
      iv = v.toInt(); dt = dtype_of(ScalarType::Long); data = &iv; nbytes = 8;
    } else if (v.isDouble()) {
      dv = v.toDouble(); dt = dtype_of(ScalarType::Double); data = &dv; nbytes = 8;
    } else if (v.isBool()) {
      bv = v.toBool(); dt = dtype_of(ScalarType::Bool); data = &bv; nbytes = 1;
    } else {
      fail("output " + std::to_string(k) + " is not a tensor or a scalar (tag " +
           std::to_string(static_cast<int>(v.tag)) + ")");
    }
    if (!args.output_dir.empty())
      write_npy(args.output_dir + "/output_" + std::to_string(k) + ".npy", *dt, shape, data, nbytes);
    outs_json += std::string(k ? "," : "") + "{\"shape\":" + shape_str(shape) + ",\"dtype\":\"" + dt->name + "\"}";
  }
  outs_json += "]";

  if (args.json) {
    std::printf("{\"model\":%s,\"runtime\":\"executorch-webgpu\",\"method\":%s,\"runs\":%d,\"warmup\":%d,"
                "\"median_ms\":%s,\"min_ms\":%s,\"first_run_ms\":%s,\"load_ms\":%s,\"device_ms\":%s,"
                "\"adapter\":%s,\"outputs\":%s}\n",
                json_str(args.model).c_str(), json_str(method).c_str(), args.runs, args.warmup,
                fmt_ms(median).c_str(), fmt_ms(sorted.front()).c_str(), fmt_ms(first_run_ms).c_str(),
                fmt_ms(load_ms).c_str(), fmt_ms(device_ms).c_str(), json_str(adapter_desc).c_str(),
                outs_json.c_str());
  } else {
    std::printf("%s: method %s, %zu input(s), %zu output(s), adapter %s\n", args.model.c_str(), method.c_str(),
                n_in, outputs.size(), adapter_desc.c_str());
    std::printf("load %.3f ms (device %.3f ms), first run %.3f ms, %d runs: median %.3f ms, min %.3f ms\n", load_ms, device_ms, first_run_ms,
                args.runs, median, sorted.front());
    if (!args.output_dir.empty())
      std::printf("wrote %zu output(s) to %s\n", outputs.size(), args.output_dir.c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  try {
    return run(args);
  } catch (const Fail& f) {
    std::fprintf(stderr, "et_webgpu_run: error: %s\n", f.what());
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "et_webgpu_run: error: %s\n", ex.what());
  }
  return 1;
}
