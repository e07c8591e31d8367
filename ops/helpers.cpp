#include "ops/helpers.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include <fmt/ranges.h>

#include "gpu/shaders.h"
#include "ops/uniforms.h"

namespace wgnn::ops {

const gpu::Pipeline& meta_pipeline() {
  static const gpu::Pipeline placeholder;
  return placeholder;
}

const gpu::Pipeline& kernel(Graph& g, std::string_view path, const Subs& subs, const gpu::Constants& constants,
                            std::string_view entry) {
  if (g.meta()) return meta_pipeline();
  return kernel(g.ctx(), path, subs, constants, entry);
}

const gpu::Pipeline& kernel(gpu::Context& ctx, std::string_view path, const Subs& subs,
                            const gpu::Constants& constants, std::string_view entry) {
  const auto t0 = std::chrono::steady_clock::now();
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
  // `{{PARAMS}}`: the kernel's uniform struct, declared once (ops/uniforms.h).
  if (const size_t pos = src.find("{{PARAMS}}"); pos != std::string::npos) {
    src.replace(pos, 10, uniform_for(path));
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
  ctx.add_wgsl_time(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return ctx.pipeline(name, src, constants, entry);
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

Subs depthwise_vector_subs(DType dtype, uint32_t vw) {
  const std::string t = dtype == DType::F16 ? "f16" : "f32";
  return {{"VW", std::to_string(vw)},
          {"XV", vw == 1 ? t : fmt::format("vec{}<{}>", vw, t)},
          {"WIDEN", vw == 4   ? "vec4<f32>(v)"
                    : vw == 2 ? "vec4<f32>(vec2<f32>(v), 0.0, 0.0)"
                              : "vec4<f32>(f32(v), 0.0, 0.0, 0.0)"},
          {"PACK", vw == 4 ? "r" : vw == 2 ? "r.xy" : "r.x"}};
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
                       {"FIRST", "f32(v.x)"},
                       {"ACTIVATE_V", "activate4"}});
  } else {
    s.insert(s.end(), {{"V", t}, {"F32V", "f32"}, {"VW", "1"}, {"CSUM", "v"}, {"CSQ", "d * d"}, {"FIRST", "f32(v)"},
                       {"ACTIVATE_V", "activate"}});
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

uint64_t binding_alignment(Graph& g) {
  return std::max<uint64_t>(16, g.ctx().limits().min_storage_buffer_offset_alignment);
}

uint64_t binding_limit(Graph& g) { return g.ctx().limits().max_storage_buffer_binding_size / 16 * 16; }

std::vector<Span> binding_spans(Graph& g, uint64_t total, const std::vector<uint64_t>& unit_bytes,
                                uint64_t multiple, std::string_view what, const std::vector<uint64_t>& extra_bytes) {
  const uint64_t limit = binding_limit(g), align = binding_alignment(g);
  auto extra = [&](size_t k) { return k < extra_bytes.size() ? extra_bytes[k] : 0; };
  bool fits = true;
  for (size_t k = 0; k < unit_bytes.size(); ++k) fits = fits && total * unit_bytes[k] + extra(k) <= limit;
  if (fits || total == 0) return {Span{0, total}};
  // The step: the smallest count of units that keeps every offset aligned.
  uint64_t step = std::max<uint64_t>(multiple, 1);
  for (uint64_t ub : unit_bytes) {
    if (ub) step = std::lcm(step, align / std::gcd(ub, align));
  }
  uint64_t most = UINT64_MAX;  // units per span
  for (size_t k = 0; k < unit_bytes.size(); ++k) {
    const uint64_t room = limit > extra(k) ? limit - extra(k) : 0;
    if (unit_bytes[k]) most = std::min(most, room / unit_bytes[k]);
  }
  most = most / step * step;
  if (most == 0) {
    throw Error(fmt::format("{}: cannot split it into parts within this device's maxStorageBufferBindingSize of {} "
                            "bytes: its smallest aligned part ({} units of {} bytes) is larger ({})",
                            what, limit, step, fmt::join(unit_bytes, "/"), binding_limit_advice(g.ctx())));
  }
  std::vector<Span> spans;
  for (uint64_t s = 0; s < total; s += most) spans.push_back(Span{s, std::min(most, total - s)});
  return spans;
}

Binding bind_bytes(Graph& g, TensorRef t, uint64_t offset, uint64_t bytes) {
  const uint64_t stored = (g.info(t).gpu_bytes() + 15) / 16 * 16;
  const uint64_t size = std::min((bytes + 15) / 16 * 16, stored - std::min(offset, stored));
  if (offset == 0 && size == stored) return Binding::of(t);
  if (offset % binding_alignment(g) != 0) {
    throw Error(fmt::format("internal: binding offset {} of tensor {} is not a multiple of {}", offset, t.id,
                            binding_alignment(g)));
  }
  return Binding::range(t, offset, std::max<uint64_t>(size, 16));
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
    fail(fmt::format("argument '{}' {} {} is {} bytes, over this device's maxStorageBufferBindingSize of {} bytes; "
                     "this op binds it whole ({})",
                     name, dtype_name(ti.dtype), shape_str(ti.shape), ti.gpu_bytes(), limit,
                     binding_limit_advice(g.ctx())));
  }
}

}  // namespace wgnn::ops
