#include "ops/helpers.h"

#include <fmt/format.h>

#include "gpu/shaders.h"

namespace wgnn::ops {

const gpu::Pipeline& kernel(Graph& g, std::string_view path, const Subs& subs, const gpu::Constants& constants,
                            std::string_view entry) {
  std::string src(gpu::shader_source(path));
  // `{{include lib/NAME.wgsl}}`: the text of ops/kernels/lib/NAME.wgsl,
  // code that several kernels share (one level: a library file includes
  // nothing).
  const std::string inc = "{{include ";
  for (size_t pos = src.find(inc); pos != std::string::npos; pos = src.find(inc, pos)) {
    const size_t end = src.find("}}", pos);
    if (end == std::string::npos) throw Error(fmt::format("kernel '{}': unterminated {{{{include", path));
    const std::string lib = "ops/kernels/" + src.substr(pos + inc.size(), end - pos - inc.size());
    const std::string_view text = gpu::shader_source(lib);
    if (text.find(inc) != std::string_view::npos) throw Error(fmt::format("'{}' may not include others", lib));
    src.replace(pos, end + 2 - pos, text);
    pos += text.size();
  }
  for (const auto& [key, value] : subs) {
    const std::string token = "{{" + key + "}}";
    for (size_t pos = src.find(token); pos != std::string::npos; pos = src.find(token, pos + value.size())) {
      src.replace(pos, token.size(), value);
    }
  }
  if (auto pos = src.find("{{"); pos != std::string::npos) {
    throw Error(fmt::format("kernel '{}': unfilled placeholder {}", path, src.substr(pos, src.find("}}", pos) - pos + 2)));
  }
  std::string name(path);
  for (const auto& [key, value] : subs) {
    if (key != "ENABLE" && value.size() < 24) name += fmt::format(" {}={}", key, value);
  }
  return g.ctx().pipeline(name, src, constants, entry);
}

Subs float_subs(Graph& g, DType dtype, std::string_view op) {
  if (dtype == DType::F32) return {{"T", "f32"}, {"ENABLE", ""}};
  if (dtype == DType::F16) {
    if (!g.ctx().features().shader_f16) {
      throw Error(fmt::format("{}: float16 tensors need the shader-f16 feature, which this adapter ({}) lacks", op,
                              g.ctx().adapter().name));
    }
    return {{"T", "f16"}, {"ENABLE", "enable f16;"}};
  }
  throw Error(fmt::format("{}: dtype {} is not a float type (accepted: float32, float16)", op, dtype_name(dtype)));
}

Subs vector_subs(Graph& g, DType dtype, bool vec4, std::string_view op) {
  Subs s = float_subs(g, dtype, op);
  const std::string t = dtype == DType::F16 ? "f16" : "f32";
  if (vec4) {
    s.insert(s.end(), {{"V", "vec4<" + t + ">"},
                       {"F32V", "vec4<f32>"},
                       {"VW", "4"},
                       {"CSUM", "dot(v, vec4<f32>(1.0))"},
                       {"CSQ", "dot(d, d)"},
                       {"FIRST", "f32(v.x)"}});
  } else {
    s.insert(s.end(), {{"V", t}, {"F32V", "f32"}, {"VW", "1"}, {"CSUM", "v"}, {"CSQ", "d * d"}, {"FIRST", "f32(v)"}});
  }
  return s;
}

Subs check_subs(bool checked, uint32_t binding) {
  if (!checked) return {{"CHECKED", "off"}, {"CHECK_DECL", "fn report(slot: u32, value: i32) {}"}};
  return {{"CHECKED", "on"},
          {"CHECK_DECL", fmt::format("@group(0) @binding({}) var<storage, read_write> check_flags: array<atomic<u32>>;\n"
                                     "fn report(slot: u32, value: i32) {{\n"
                                     "  atomicStore(&check_flags[2u * slot], 1u);\n"
                                     "  atomicStore(&check_flags[2u * slot + 1u], bitcast<u32>(value));\n"
                                     "}}",
                                     binding)}};
}

Binding optional_input(Graph& g, const Value& v) {
  if (v.is_none()) return Binding::of(g.ctx().dummy_buffer());
  return Binding::of(v.tensor());
}

gpu::Grid grid_for(Graph& g, uint64_t workgroups) {
  return gpu::RowDispatchGrid(workgroups, g.ctx().limits().max_compute_workgroups_per_dimension);
}

void Args::fail(std::string_view msg) const { throw Error(fmt::format("{}: {}", op, msg)); }

const Value& Args::at(size_t i, std::string_view name) const {
  if (i >= args.size()) fail(fmt::format("missing argument {} '{}' (got {} arguments)", i, name, args.size()));
  return args[i];
}

TensorRef Args::tensor(size_t i, std::string_view name) const {
  const Value& v = at(i, name);
  if (!v.is_tensor()) fail(fmt::format("argument '{}' must be a Tensor, got {}", name, v.describe()));
  return v.tensor();
}

TensorRef Args::optional_tensor(size_t i, std::string_view name) const {
  if (i >= args.size() || args[i].is_none()) return TensorRef{-1};
  if (!args[i].is_tensor()) fail(fmt::format("argument '{}' must be a Tensor or None, got {}", name, args[i].describe()));
  return args[i].tensor();
}

double Args::scalar(size_t i, std::string_view name, double def) const {
  if (i >= args.size() || args[i].is_none()) return def;
  const Value& v = args[i];
  if (v.is_double()) return std::get<double>(v.v);
  if (v.is_int()) return double(std::get<int64_t>(v.v));
  fail(fmt::format("argument '{}' must be a Double or Int (or None), got {}", name, v.describe()));
}

int64_t Args::integer(size_t i, std::string_view name, int64_t def) const {
  if (i >= args.size() || args[i].is_none()) return def;
  const Value& v = args[i];
  if (v.is_int()) return std::get<int64_t>(v.v);
  if (v.is_bool()) return std::get<bool>(v.v) ? 1 : 0;
  fail(fmt::format("argument '{}' must be an Int (or None), got {}", name, v.describe()));
}

bool Args::boolean(size_t i, std::string_view name, bool def) const {
  if (i >= args.size() || args[i].is_none()) return def;
  const Value& v = args[i];
  if (v.is_bool()) return std::get<bool>(v.v);
  if (v.is_int()) return std::get<int64_t>(v.v) != 0;
  fail(fmt::format("argument '{}' must be a Bool (or None), got {}", name, v.describe()));
}

IntList Args::int_list(size_t i, std::string_view name) const {
  const Value& v = at(i, name);
  if (v.is_int_list()) return std::get<IntList>(v.v);
  if (v.is_int()) return IntList{std::get<int64_t>(v.v)};
  fail(fmt::format("argument '{}' must be an IntList, got {}", name, v.describe()));
}

std::string Args::string(size_t i, std::string_view name, std::string def) const {
  if (i >= args.size() || args[i].is_none()) return def;
  if (auto* s = std::get_if<std::string>(&args[i].v)) return *s;
  fail(fmt::format("argument '{}' must be a String (or None), got {}", name, args[i].describe()));
}

void Args::require_float(TensorRef t, std::string_view name) const {
  const DType d = g.info(t).dtype;
  if (d != DType::F32 && d != DType::F16) {
    fail(fmt::format("argument '{}' has dtype {}; accepted: float32, float16", name, dtype_name(d)));
  }
}

void Args::require_fits_binding(TensorRef t, std::string_view name) const {
  const TensorInfo& ti = g.info(t);
  const uint64_t limit = g.ctx().limits().max_storage_buffer_binding_size;
  if (ti.gpu_bytes() > limit) {
    fail(fmt::format("argument '{}' {} {} is {} bytes, over this device's maxStorageBufferBindingSize of {} bytes",
                     name, dtype_name(ti.dtype), shape_str(ti.shape), ti.gpu_bytes(), limit));
  }
}

}  // namespace wgnn::ops
