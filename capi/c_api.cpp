// The C API (include/wgnn/wgnn.h) over onnx_import::Session and
// gpu::Context. Every entry point catches everything: no exception crosses
// the C boundary, and every failure is a status with a message.
#include "wgnn/wgnn.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpu/context.h"
#include "gpu/describe.h"
#include "gpu/error.h"
#include "graph/host_tensor.h"
#include "onnx/session.h"
#include "wgnn/version.h"

using namespace wgnn;

struct wgnn_context {
  std::unique_ptr<gpu::Context> ctx;
};

struct wgnn_session {
  std::unique_ptr<onnx_import::Session> session;
};

struct wgnn_tensor {
  HostTensor t;
};

namespace {

thread_local std::string last_error;

wgnn_status fail(wgnn_status s, std::string message) {
  try {
    last_error = std::move(message);
  } catch (...) {
    last_error.clear();
  }
  return s;
}

// Runs f, turning every exception into a status and a message.
template <typename F>
wgnn_status guarded(const char* what, F&& f) {
  try {
    last_error.clear();
    f();
    return WGNN_OK;
  } catch (const HostOutOfMemory& e) {
    return fail(WGNN_ERROR_OUT_OF_MEMORY, fmt::format("{}: {}", what, e.what()));
  } catch (const gpu::DeviceLost& e) {
    return fail(WGNN_ERROR_DEVICE_LOST, fmt::format("{}: {}", what, e.what()));
  } catch (const gpu::GpuError& e) {
    return fail(WGNN_ERROR_GPU, fmt::format("{}: {}", what, e.what()));
  } catch (const Unsupported& e) {
    return fail(WGNN_ERROR_UNSUPPORTED, fmt::format("{}: {}", what, e.what()));
  } catch (const Error& e) {
    return fail(WGNN_ERROR_MODEL, fmt::format("{}: {}", what, e.what()));
  } catch (const std::bad_alloc&) {
    return fail(WGNN_ERROR_OUT_OF_MEMORY, fmt::format("{}: out of host memory", what));
  } catch (const std::exception& e) {
    return fail(WGNN_ERROR_INTERNAL, fmt::format("{}: {}", what, e.what()));
  } catch (...) {
    return fail(WGNN_ERROR_INTERNAL, fmt::format("{}: an unknown error", what));
  }
}

wgnn_status invalid(const char* what, const char* why) {
  return fail(WGNN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {}", what, why));
}

bool to_dtype(wgnn_dtype d, DType* out) {
  switch (d) {
    case WGNN_DTYPE_FLOAT32: *out = DType::F32; return true;
    case WGNN_DTYPE_FLOAT16: *out = DType::F16; return true;
    case WGNN_DTYPE_INT32: *out = DType::I32; return true;
    case WGNN_DTYPE_INT64: *out = DType::I64; return true;
    case WGNN_DTYPE_BOOL: *out = DType::Bool; return true;
    case WGNN_DTYPE_UINT8: *out = DType::U8; return true;
    case WGNN_DTYPE_INT8: *out = DType::I8; return true;
  }
  return false;
}

wgnn_dtype from_dtype(DType d) {
  switch (d) {
    case DType::F32: return WGNN_DTYPE_FLOAT32;
    case DType::F16: return WGNN_DTYPE_FLOAT16;
    case DType::I32: return WGNN_DTYPE_INT32;
    case DType::I64: return WGNN_DTYPE_INT64;
    case DType::Bool: return WGNN_DTYPE_BOOL;
    case DType::U8: return WGNN_DTYPE_UINT8;
    case DType::I8: return WGNN_DTYPE_INT8;
  }
  return WGNN_DTYPE_FLOAT32;
}

onnx_import::SessionOptions to_options(const wgnn_session_options* o) {
  onnx_import::SessionOptions s;
  const wgnn_session_options d = wgnn_session_options_default();
  if (!o) o = &d;
  s.fp16 = o->fp16 != 0;
  s.fusion = o->fusion != 0;
  s.checked = o->checked != 0;
  s.verbose = o->verbose != 0;
  if (o->max_plans < 1) throw Error(fmt::format("wgnn_session_options.max_plans is {}: keep at least 1 plan", o->max_plans));
  s.max_plans = o->max_plans;
  if (o->max_plan_sizes < 1) {
    throw Error(fmt::format("wgnn_session_options.max_plan_sizes is {}: keep at least 1 size", o->max_plan_sizes));
  }
  s.max_plan_sizes = o->max_plan_sizes;
  s.size_classes = o->size_classes != 0;
  s.tiered = o->tiered != 0;
  s.ir_import = o->ir_import != 0;
  if (o->output_count > 0 && !o->outputs) throw Error("wgnn_session_options.outputs is NULL with output_count > 0");
  for (size_t i = 0; i < o->output_count; ++i) {
    if (!o->outputs[i]) throw Error(fmt::format("wgnn_session_options.outputs[{}] is NULL", i));
    s.outputs.emplace_back(o->outputs[i]);
  }
  return s;
}

// A context's options as the C API makes them: the environment's
// settings, as the CLI maps them (docs/SETTINGS.md), and the adapter named.
gpu::ContextOptions context_options(const char* adapter) {
  gpu::ContextOptions o;
  o.settings = Settings::from_variables(&std::getenv);
  if (adapter) o.adapter = adapter;
  return o;
}

wgnn_status value_info(const wgnn_session* s, size_t index, wgnn_value_info* out, bool input) {
  const char* what = input ? "wgnn_session_input" : "wgnn_session_output";
  if (!s || !s->session) return invalid(what, "session is NULL");
  if (!out) return invalid(what, "out is NULL");
  const auto& list = input ? s->session->inputs() : s->session->outputs();
  if (index >= list.size()) {
    return fail(WGNN_ERROR_INVALID_ARGUMENT, fmt::format("{}: index {} is out of range (the model has {})", what,
                                                         index, list.size()));
  }
  const auto& v = list[index];
  out->name = v.name.c_str();
  out->dtype = from_dtype(v.dtype);
  out->rank = v.shape.size();
  out->shape = v.shape.data();
  return WGNN_OK;
}

}  // namespace

extern "C" {

const char* wgnn_version(void) { return WGNN_VERSION_STRING; }

const char* wgnn_last_error(void) { return last_error.c_str(); }

const char* wgnn_status_name(wgnn_status status) {
  switch (status) {
    case WGNN_OK: return "WGNN_OK";
    case WGNN_ERROR_INVALID_ARGUMENT: return "WGNN_ERROR_INVALID_ARGUMENT";
    case WGNN_ERROR_MODEL: return "WGNN_ERROR_MODEL";
    case WGNN_ERROR_UNSUPPORTED: return "WGNN_ERROR_UNSUPPORTED";
    case WGNN_ERROR_GPU: return "WGNN_ERROR_GPU";
    case WGNN_ERROR_DEVICE_LOST: return "WGNN_ERROR_DEVICE_LOST";
    case WGNN_ERROR_OUT_OF_MEMORY: return "WGNN_ERROR_OUT_OF_MEMORY";
    case WGNN_ERROR_INTERNAL: return "WGNN_ERROR_INTERNAL";
  }
  return "an unknown wgnn_status";
}

size_t wgnn_dtype_size(wgnn_dtype dtype) {
  DType d;
  return to_dtype(dtype, &d) ? dtype_size(d) : 0;
}

wgnn_status wgnn_context_create(const char* adapter, wgnn_context** out) {
  if (!out) return invalid("wgnn_context_create", "out is NULL");
  return guarded("wgnn_context_create", [&] {
    auto c = std::make_unique<wgnn_context>();
    c->ctx = std::make_unique<gpu::Context>(context_options(adapter));
    *out = c.release();
  });
}

void wgnn_context_destroy(wgnn_context* ctx) {
  try {
    delete ctx;
  } catch (...) {
  }
}

wgnn_status wgnn_context_adapter_info(const wgnn_context* ctx, wgnn_adapter_info* out) {
  if (!ctx || !ctx->ctx) return invalid("wgnn_context_adapter_info", "ctx is NULL");
  if (!out) return invalid("wgnn_context_adapter_info", "out is NULL");
  const gpu::AdapterInfo& a = ctx->ctx->adapter();
  out->name = a.name.c_str();
  out->vendor = a.vendor.c_str();
  out->architecture = a.architecture.c_str();
  out->description = a.description.c_str();
  out->backend = a.backend.c_str();
  out->adapter_type = a.adapter_type.c_str();
  out->driver_source = a.driver_source.c_str();
  out->vendor_id = a.vendor_id;
  out->device_id = a.device_id;
  out->shader_f16 = ctx->ctx->features().shader_f16 ? 1 : 0;
  out->index = a.index;
  out->uuid = a.uuid.c_str();
  out->pci_bus = a.pci_bus.c_str();
  return WGNN_OK;
}

wgnn_status wgnn_adapters_json(const char* adapter, char** out_json) {
  if (!out_json) return invalid("wgnn_adapters_json", "out_json is NULL");
  *out_json = nullptr;
  return guarded("wgnn_adapters_json", [&] {
    const std::string j = gpu::describe_adapters_json(gpu::Context::list_adapters(context_options(adapter)));
    char* s = static_cast<char*>(std::malloc(j.size() + 1));
    if (!s) throw std::bad_alloc();
    std::memcpy(s, j.c_str(), j.size() + 1);
    *out_json = s;
  });
}

void wgnn_string_free(char* s) { std::free(s); }

wgnn_session_options wgnn_session_options_default(void) {
  const onnx_import::SessionOptions d;
  wgnn_session_options o;
  o.fp16 = d.fp16 ? 1 : 0;
  o.fusion = d.fusion ? 1 : 0;
  o.checked = d.checked ? 1 : 0;
  o.verbose = d.verbose ? 1 : 0;
  o.max_plans = d.max_plans;
  o.max_plan_sizes = d.max_plan_sizes;
  o.size_classes = d.size_classes ? 1 : 0;
  o.tiered = d.tiered ? 1 : 0;
  o.ir_import = d.ir_import ? 1 : 0;
  o.outputs = nullptr;
  o.output_count = 0;
  return o;
}

wgnn_status wgnn_session_create_from_file(wgnn_context* ctx, const char* path, const wgnn_session_options* options,
                                          wgnn_session** out) {
  const char* what = "wgnn_session_create_from_file";
  if (!ctx || !ctx->ctx) return invalid(what, "ctx is NULL");
  if (!path) return invalid(what, "path is NULL");
  if (!out) return invalid(what, "out is NULL");
  return guarded(what, [&] {
    auto s = std::make_unique<wgnn_session>();
    s->session = std::make_unique<onnx_import::Session>(*ctx->ctx, std::string(path), to_options(options));
    *out = s.release();
  });
}

wgnn_status wgnn_session_create_from_bytes(wgnn_context* ctx, const void* data, size_t size,
                                           const char* external_data_dir, const wgnn_session_options* options,
                                           wgnn_session** out) {
  const char* what = "wgnn_session_create_from_bytes";
  if (!ctx || !ctx->ctx) return invalid(what, "ctx is NULL");
  if (!data && size > 0) return invalid(what, "data is NULL");
  if (!out) return invalid(what, "out is NULL");
  return guarded(what, [&] {
    std::string bytes(static_cast<const char*>(data), size);
    auto model = onnx_import::load_model_from_bytes(bytes, "<model bytes>", external_data_dir ? external_data_dir : ".");
    auto s = std::make_unique<wgnn_session>();
    s->session = std::make_unique<onnx_import::Session>(*ctx->ctx, std::move(model), to_options(options));
    *out = s.release();
  });
}

void wgnn_session_destroy(wgnn_session* session) {
  try {
    delete session;
  } catch (...) {
  }
}

size_t wgnn_session_input_count(const wgnn_session* s) { return s && s->session ? s->session->inputs().size() : 0; }
size_t wgnn_session_output_count(const wgnn_session* s) {
  return s && s->session ? s->session->outputs().size() : 0;
}
wgnn_status wgnn_session_input(const wgnn_session* s, size_t index, wgnn_value_info* out) {
  return value_info(s, index, out, true);
}
wgnn_status wgnn_session_output(const wgnn_session* s, size_t index, wgnn_value_info* out) {
  return value_info(s, index, out, false);
}

wgnn_status wgnn_session_reset_state(wgnn_session* session) {
  const char* what = "wgnn_session_reset_state";
  if (!session || !session->session) return invalid(what, "session is NULL");
  return guarded(what, [&] { session->session->reset_state(); });
}

wgnn_status wgnn_session_run(wgnn_session* session, const char* const* input_names, wgnn_tensor* const* inputs,
                             size_t input_count, wgnn_tensor** outputs) {
  const char* what = "wgnn_session_run";
  if (!session || !session->session) return invalid(what, "session is NULL");
  if (input_count > 0 && (!input_names || !inputs)) return invalid(what, "input_names or inputs is NULL");
  const size_t n_out = session->session->outputs().size();
  if (n_out > 0 && !outputs) return invalid(what, "outputs is NULL");
  for (size_t i = 0; i < input_count; ++i) {
    if (!input_names[i]) return fail(WGNN_ERROR_INVALID_ARGUMENT, fmt::format("{}: input_names[{}] is NULL", what, i));
    if (!inputs[i]) return fail(WGNN_ERROR_INVALID_ARGUMENT, fmt::format("{}: inputs[{}] is NULL", what, i));
  }
  return guarded(what, [&] {
    // The caller's tensors are read where they are (no copy).
    onnx_import::Feeds in;
    for (size_t i = 0; i < input_count; ++i) {
      if (!in.host.emplace(input_names[i], &inputs[i]->t).second) {
        throw Error(fmt::format("input '{}' is given twice", input_names[i]));
      }
    }
    onnx_import::Fetches fetched;  // empty: every output
    session->session->run(in, fetched);
    std::map<std::string, HostTensor>& result = fetched.host;
    std::vector<std::unique_ptr<wgnn_tensor>> made(n_out);
    for (size_t i = 0; i < n_out; ++i) {
      const std::string& name = session->session->outputs()[i].name;
      auto it = result.find(name);
      if (it == result.end()) throw std::runtime_error(fmt::format("the run gave no output '{}'", name));
      made[i] = std::make_unique<wgnn_tensor>();
      made[i]->t = std::move(it->second);
    }
    for (size_t i = 0; i < n_out; ++i) outputs[i] = made[i].release();
  });
}

wgnn_status wgnn_tensor_create(wgnn_dtype dtype, const int64_t* shape, size_t rank, const void* data, size_t size,
                               wgnn_tensor** out) {
  const char* what = "wgnn_tensor_create";
  if (!out) return invalid(what, "out is NULL");
  DType d;
  if (!to_dtype(dtype, &d)) {
    return fail(WGNN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {} is no wgnn_dtype", what, static_cast<int>(dtype)));
  }
  if (rank > 0 && !shape) return invalid(what, "shape is NULL with a rank above 0");
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) {
      return fail(WGNN_ERROR_INVALID_ARGUMENT, fmt::format("{}: dimension {} is {}; a tensor's dims are >= 0", what, i,
                                                           shape[i]));
    }
  }
  wgnn_status st = guarded(what, [&] {
    auto t = std::make_unique<wgnn_tensor>();
    t->t = HostTensor(d, Shape(shape, shape + rank));
    if (data) {
      if (size != t->t.nbytes()) {
        throw std::invalid_argument(fmt::format("size is {} bytes; a {} tensor of shape {} has {}", size,
                                                dtype_name(d), shape_str(t->t.shape), t->t.nbytes()));
      }
      if (size > 0) std::memcpy(t->t.data.data(), data, size);
    }
    *out = t.release();
  });
  if (st == WGNN_ERROR_INTERNAL || st == WGNN_ERROR_MODEL) st = WGNN_ERROR_INVALID_ARGUMENT;
  return st;
}

void wgnn_tensor_destroy(wgnn_tensor* tensor) { delete tensor; }
wgnn_dtype wgnn_tensor_dtype(const wgnn_tensor* t) { return t ? from_dtype(t->t.dtype) : static_cast<wgnn_dtype>(0); }
size_t wgnn_tensor_rank(const wgnn_tensor* t) { return t ? t->t.shape.size() : 0; }
const int64_t* wgnn_tensor_shape(const wgnn_tensor* t) { return t ? t->t.shape.data() : nullptr; }
int64_t wgnn_tensor_numel(const wgnn_tensor* t) { return t ? numel(t->t.shape) : 0; }
size_t wgnn_tensor_size(const wgnn_tensor* t) { return t ? t->t.nbytes() : 0; }
const void* wgnn_tensor_data(const wgnn_tensor* t) { return t ? t->t.data.data() : nullptr; }
void* wgnn_tensor_mutable_data(wgnn_tensor* t) { return t ? t->t.data.data() : nullptr; }

}  // extern "C"
