// wgnn's Node-API addon (node-addon-api): the native half of the npm
// package. node/index.js wraps it in onnxruntime-node's API
// (InferenceSession, Tensor) and docs/NODE.md describes that API.
//
// Every call that touches the GPU (a session's creation, run and release,
// background removal, the device's description) is a Napi::AsyncWorker: it
// runs on libuv's thread pool and settles a Promise on the JS thread.
//
// Devices: one gpu::Context per adapter choice, made on first use and shared
// by every session that asks for it (a device start-up is slow). A Context
// and what is made on it is used from one thread at a time (gpu/context.h):
// every worker takes its device's mutex, so runs from several promises at
// once take turns. The devices are kept until the process ends (never
// destroyed from an exit handler, where Dawn's threads may be gone).
#include <napi.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/context.h"
#include "gpu/describe.h"
#include "generate/generate.h"
#include "gpu/error.h"
#include "graph/host_tensor.h"
#include "graph/tensor.h"  // dtype_name: onnxruntime-node's type names too
#include "image/image.h"
#include "matting/remover.h"
#include "onnx/session.h"
#include "wgnn/wgnn.h"

namespace {

using namespace wgnn;

struct Device {
  std::mutex mutex;  // every use of ctx
  std::unique_ptr<gpu::Context> ctx;
};

std::mutex& devices_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

// adapter choice -> device; never freed (see above).
std::map<std::string, std::shared_ptr<Device>>& devices() {
  static auto* d = new std::map<std::string, std::shared_ptr<Device>>;
  return *d;
}

// The device for an adapter choice ("auto", "gpu", "lavapipe"; "": the
// environment's WGNN_ADAPTER, else auto). Called on a worker thread.
std::shared_ptr<Device> device_for(const std::string& adapter) {
  const std::lock_guard<std::mutex> lock(devices_mutex());
  auto& d = devices()[adapter];
  if (!d) {
    auto dev = std::make_shared<Device>();
    gpu::ContextOptions o;
    o.settings = Settings::from_variables(&std::getenv);  // as the CLI maps them (docs/SETTINGS.md)
    o.adapter = adapter;
    dev->ctx = std::make_unique<gpu::Context>(o);
    d = dev;
  }
  return d;
}

bool dtype_of(const std::string& t, DType* out) {
  static const std::pair<const char*, DType> kTypes[] = {
      {"float32", DType::F32}, {"float16", DType::F16}, {"int32", DType::I32}, {"int64", DType::I64},
      {"bool", DType::Bool},   {"uint8", DType::U8},    {"int8", DType::I8}};
  for (const auto& [name, d] : kTypes) {
    if (t == name) return *out = d, true;
  }
  return false;
}

// A session and the device it lives on. Shared by its JS object and the
// workers using it, so that a collected JS object never frees a session
// under a run.
std::atomic<int64_t> g_live_sessions{0};  // for the tests (liveSessions())

struct SessionHolder {
  std::shared_ptr<Device> dev;
  std::unique_ptr<onnx_import::Session> session;
  SessionHolder() { ++g_live_sessions; }
  ~SessionHolder() {
    --g_live_sessions;
    if (!session) return;
    const std::lock_guard<std::mutex> lock(dev->mutex);
    session.reset();
  }
};
using SessionRef = std::shared_ptr<SessionHolder>;

// What the JS thread lets go of (a collected session's handle, a finished
// job's reference) is destroyed on a worker thread, by the next job: freeing
// a session takes its device's lock, which a run may hold for seconds, and
// the event loop must not wait for it. What is left here at exit is never
// freed (the process ends).
std::mutex& graveyard_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<std::shared_ptr<void>>& graveyard() {
  static auto* g = new std::vector<std::shared_ptr<void>>;
  return *g;
}
void bury(std::shared_ptr<void> p) {
  if (!p) return;
  const std::lock_guard<std::mutex> lock(graveyard_mutex());
  graveyard().push_back(std::move(p));
}
void empty_graveyard() {  // on a worker thread, holding no device's lock
  std::vector<std::shared_ptr<void>> dead;
  {
    const std::lock_guard<std::mutex> lock(graveyard_mutex());
    dead.swap(graveyard());
  }
  dead.clear();
}

// A base for the workers: a Promise settled by OnOK / OnError; the C++
// exception's kind becomes the JS error's `code` (the C API's status names).
class Job : public Napi::AsyncWorker {
 public:
  explicit Job(Napi::Env env) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

 protected:
  virtual void work() = 0;
  virtual Napi::Value result(Napi::Env env) = 0;

 private:
  void Execute() final {
    try {
      empty_graveyard();
      work();
    } catch (const HostOutOfMemory& e) {
      fail("WGNN_ERROR_OUT_OF_MEMORY", e.what());
    } catch (const gpu::DeviceLost& e) {
      fail("WGNN_ERROR_DEVICE_LOST", e.what());
    } catch (const gpu::GpuError& e) {
      fail("WGNN_ERROR_GPU", e.what());
    } catch (const Unsupported& e) {
      fail("WGNN_ERROR_UNSUPPORTED", e.what());
    } catch (const Error& e) {
      fail("WGNN_ERROR_MODEL", e.what());
    } catch (const std::bad_alloc&) {
      fail("WGNN_ERROR_OUT_OF_MEMORY", "out of host memory");
    } catch (const std::exception& e) {
      fail("WGNN_ERROR_INTERNAL", e.what());
    } catch (...) {
      fail("WGNN_ERROR_INTERNAL", "an unknown error");
    }
  }
  void fail(const char* code, const std::string& message) {
    code_ = code;
    SetError(message);
  }
  void OnOK() final {
    Napi::Env env = Env();
    Napi::Value v;
    try {
      v = result(env);
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
      return;
    } catch (const std::exception& e) {
      deferred_.Reject(Napi::Error::New(env, e.what()).Value());
      return;
    }
    deferred_.Resolve(v);
  }
  void OnError(const Napi::Error& e) final {
    Napi::Object err = e.Value();
    err.Set("code", Napi::String::New(Env(), code_));
    deferred_.Reject(err);
  }

  Napi::Promise::Deferred deferred_;
  std::string code_ = "WGNN_ERROR_INTERNAL";
};

[[noreturn]] void throw_type(Napi::Env env, const std::string& message) {
  throw Napi::TypeError::New(env, message);
}

std::string string_arg(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsString()) throw_type(info.Env(), std::string(what) + " must be a string");
  return info[i].As<Napi::String>().Utf8Value();
}

// The bytes of a Uint8Array / Buffer / any typed array or DataView.
std::string bytes_of(const Napi::Value& v) {
  if (v.IsTypedArray()) {
    auto a = v.As<Napi::TypedArray>();
    const auto* base = static_cast<const char*>(a.ArrayBuffer().Data()) + a.ByteOffset();
    return std::string(base, a.ByteLength());
  }
  if (v.IsArrayBuffer()) {
    auto b = v.As<Napi::ArrayBuffer>();
    return std::string(static_cast<const char*>(b.Data()), b.ByteLength());
  }
  throw_type(v.Env(), "expected a Uint8Array, a Buffer or an ArrayBuffer");
}

Napi::Object describe(Napi::Env env, const onnx_import::ValueInfo& v) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("name", v.name);
  o.Set("type", dtype_name(v.dtype));
  Napi::Array shape = Napi::Array::New(env, v.shape.size());
  for (size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] >= 0) {
      shape.Set(uint32_t(i), Napi::Number::New(env, double(v.shape[i])));
    } else if (i < v.dim_names.size() && !v.dim_names[i].empty()) {
      shape.Set(uint32_t(i), Napi::String::New(env, v.dim_names[i]));
    } else {
      shape.Set(uint32_t(i), Napi::Number::New(env, -1));
    }
  }
  o.Set("shape", shape);
  return o;
}

// ---- createSession(source, options) -> Promise<{handle, inputs, outputs}>
// source: a path (string) or the model's bytes; options: {adapter, fp16,
// externalDataDir}.
class CreateSession : public Job {
 public:
  CreateSession(Napi::Env env, std::string path, std::string bytes, bool from_bytes, std::string dir,
                std::string adapter, bool fp16)
      : Job(env),
        path_(std::move(path)),
        bytes_(std::move(bytes)),
        from_bytes_(from_bytes),
        dir_(std::move(dir)),
        adapter_(std::move(adapter)),
        fp16_(fp16) {}

 protected:
  void work() override {
    auto h = std::make_shared<SessionHolder>();
    h->dev = device_for(adapter_);
    onnx_import::SessionOptions o;
    o.fp16 = fp16_;
    const std::lock_guard<std::mutex> lock(h->dev->mutex);
    if (from_bytes_) {
      h->session = std::make_unique<onnx_import::Session>(
          *h->dev->ctx, onnx_import::load_model_from_bytes(bytes_, "<model bytes>", dir_), o);
      bytes_.clear();
      bytes_.shrink_to_fit();
    } else {
      h->session = std::make_unique<onnx_import::Session>(*h->dev->ctx, path_, o);
    }
    holder_ = std::move(h);
  }
  Napi::Value result(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    auto* ref = new SessionRef(holder_);
    o.Set("handle", Napi::External<SessionRef>::New(env, ref, [](Napi::Env, SessionRef* r) {
      bury(std::move(*r));
      delete r;
    }));
    Napi::Array in = Napi::Array::New(env), out = Napi::Array::New(env);
    for (const auto& v : holder_->session->inputs()) in.Set(in.Length(), describe(env, v));
    for (const auto& v : holder_->session->outputs()) out.Set(out.Length(), describe(env, v));
    o.Set("inputs", in);
    o.Set("outputs", out);
    holder_.reset();
    return o;
  }

 private:
  std::string path_, bytes_;
  bool from_bytes_;
  std::string dir_, adapter_;
  bool fp16_;
  SessionRef holder_;
};

Napi::Value CreateSessionFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[1].IsObject()) throw_type(env, "createSession(source, options)");
  Napi::Object opts = info[1].As<Napi::Object>();
  auto str_opt = [&](const char* key) {
    Napi::Value v = opts.Get(key);
    if (v.IsUndefined() || v.IsNull()) return std::string();
    if (!v.IsString()) throw_type(env, std::string("options.") + key + " must be a string");
    return v.As<Napi::String>().Utf8Value();
  };
  const std::string adapter = str_opt("adapter"), dir = str_opt("externalDataDir");
  const bool fp16 = opts.Get("fp16").ToBoolean().Value();
  Job* job;
  if (info[0].IsString()) {
    job = new CreateSession(env, info[0].As<Napi::String>().Utf8Value(), {}, false, dir, adapter, fp16);
  } else {
    job = new CreateSession(env, {}, bytes_of(info[0]), true, dir, adapter, fp16);
  }
  Napi::Promise p = job->promise();
  job->Queue();
  return p;
}

SessionRef session_of(const Napi::Value& v) {
  if (!v.IsExternal()) throw_type(v.Env(), "not a session handle");
  SessionRef s = *v.As<Napi::External<SessionRef>>().Data();
  if (!s) throw Napi::Error::New(v.Env(), "the session was released");
  return s;
}

// ---- run(handle, feeds, fetches) -> Promise<[{name, type, dims, data}]>
// feeds: [{name, type, dims, data}] (data: a typed array of the type's
// element size); fetches: output names ([]: all, in the model's order).
class Run : public Job {
 public:
  Run(Napi::Env env, SessionRef s) : Job(env), s_(std::move(s)) {}
  ~Run() override { bury(std::move(s_)); }  // deleted on the JS thread
  std::map<std::string, HostTensor> inputs;
  std::vector<std::string> names;

 protected:
  void work() override {
    onnx_import::Feeds feeds;
    for (auto& [name, t] : inputs) feeds.host.emplace(name, onnx_import::HostInput(&t));
    for (const auto& n : names) fetches_.host[n];  // no names: every output
    const std::lock_guard<std::mutex> lock(s_->dev->mutex);
    s_->session->run(feeds, fetches_);
  }
  Napi::Value result(Napi::Env env) override {
    std::vector<std::string> order = names;
    if (order.empty()) {
      for (const auto& v : s_->session->outputs()) order.push_back(v.name);
    }
    Napi::Array out = Napi::Array::New(env);
    std::map<std::string, Napi::Object> given;  // a name listed twice gets one tensor
    for (const auto& n : order) {
      if (given.count(n)) continue;
      HostTensor& t = fetches_.host.at(n);
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", n);
      o.Set("type", dtype_name(t.dtype));
      Napi::Array dims = Napi::Array::New(env, t.shape.size());
      for (size_t i = 0; i < t.shape.size(); ++i) dims.Set(uint32_t(i), Napi::Number::New(env, double(t.shape[i])));
      o.Set("dims", dims);
      Napi::ArrayBuffer buf = Napi::ArrayBuffer::New(env, t.nbytes());
      if (t.nbytes()) std::memcpy(buf.Data(), t.data.data(), t.nbytes());
      t = HostTensor();
      o.Set("data", buf);
      given.emplace(n, o);
      out.Set(out.Length(), o);
    }
    return out;
  }

 private:
  SessionRef s_;
  onnx_import::Fetches fetches_;
};

Napi::Value RunFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[1].IsArray() || !info[2].IsArray()) throw_type(env, "run(handle, feeds, fetches)");
  auto* job = new Run(env, session_of(info[0]));
  std::unique_ptr<Run> guard(job);
  Napi::Array feeds = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < feeds.Length(); ++i) {
    Napi::Object f = feeds.Get(i).As<Napi::Object>();
    const std::string name = f.Get("name").As<Napi::String>().Utf8Value();
    const std::string type = f.Get("type").As<Napi::String>().Utf8Value();
    DType d;
    if (!dtype_of(type, &d)) {
      throw Napi::TypeError::New(env, "input '" + name + "': wgnn takes float32, float16, int32, int64, uint8, int8 " +
                                          "and bool tensors, not " + type);
    }
    Napi::Array dims = f.Get("dims").As<Napi::Array>();
    Shape shape;
    for (uint32_t k = 0; k < dims.Length(); ++k) {
      const double v = dims.Get(k).As<Napi::Number>().DoubleValue();
      if (!(v >= 0) || v != double(int64_t(v))) {
        throw Napi::RangeError::New(env, "input '" + name + "': dims must be integers >= 0");
      }
      shape.push_back(int64_t(v));
    }
    const std::string bytes = bytes_of(f.Get("data"));
    size_t numel = 1;
    for (int64_t v : shape) numel *= size_t(v);
    if (numel * dtype_size(d) != bytes.size()) {
      throw Napi::RangeError::New(env, "input '" + name + "': its data has " + std::to_string(bytes.size()) +
                                           " bytes; dims need " + std::to_string(numel * dtype_size(d)));
    }
    try {
      if (!job->inputs.emplace(name, HostTensor(d, shape, bytes.data())).second) {
        throw Napi::Error::New(env, "input '" + name + "' is given twice");
      }
    } catch (const Error& e) {
      throw Napi::Error::New(env, "input '" + name + "': " + e.what());
    }
  }
  Napi::Array fetches = info[2].As<Napi::Array>();
  for (uint32_t i = 0; i < fetches.Length(); ++i) job->names.push_back(fetches.Get(i).As<Napi::String>().Utf8Value());
  // Only the outputs asked for are read back; an unknown name is refused here.
  SessionRef s = session_of(info[0]);
  for (const auto& n : job->names) {
    bool known = false;
    std::string list;
    for (const auto& v : s->session->outputs()) {
      known = known || v.name == n;
      list += (list.empty() ? "'" : ", '") + v.name + "'";
    }
    if (!known) throw Napi::Error::New(env, "no output named '" + n + "': the model's outputs are " + list);
  }
  Napi::Promise p = job->promise();
  guard.release()->Queue();
  return p;
}

// ---- release(handle) -> Promise<void>: frees the session's GPU memory now.
class Release : public Job {
 public:
  Release(Napi::Env env, SessionRef s) : Job(env), s_(std::move(s)) {}

 protected:
  void work() override { s_.reset(); }  // the last reference destroys it under the device's lock
  Napi::Value result(Napi::Env env) override { return env.Undefined(); }

 private:
  SessionRef s_;
};

Napi::Value ReleaseFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throw_type(env, "release(handle)");
  SessionRef* ref = info[0].As<Napi::External<SessionRef>>().Data();
  auto* job = new Release(env, std::move(*ref));  // the handle is empty from here on
  ref->reset();
  Napi::Promise p = job->promise();
  job->Queue();
  return p;
}

// ---- removeBackground(image, {model, size, adapter, postProcess}) ->
// Promise<Buffer> (an RGBA PNG, alpha = the matte), as `wgnn remove-bg`.
struct RemoverHolder {
  std::shared_ptr<Device> dev;
  std::unique_ptr<matting::Remover> remover;
};

std::mutex& removers_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
// (model, size, adapter) -> its Remover: a model loads once per process.
std::map<std::tuple<std::string, int, std::string>, std::shared_ptr<RemoverHolder>>& removers() {
  static auto* r = new std::map<std::tuple<std::string, int, std::string>, std::shared_ptr<RemoverHolder>>;
  return *r;
}

class RemoveBackground : public Job {
 public:
  RemoveBackground(Napi::Env env, std::string path, std::string bytes, std::string model, int size,
                   std::string adapter, bool post_process)
      : Job(env),
        path_(std::move(path)),
        bytes_(std::move(bytes)),
        model_(std::move(model)),
        size_(size),
        adapter_(std::move(adapter)),
        post_process_(post_process) {}

 protected:
  void work() override {
    const image::Image photo = path_.empty() ? image::decode_photo(bytes_, "<image bytes>") : image::read_photo(path_);
    bytes_.clear();
    std::shared_ptr<RemoverHolder> r;
    {
      const std::lock_guard<std::mutex> lock(removers_mutex());
      auto& slot = removers()[{model_, size_, adapter_}];
      if (!slot) {
        auto h = std::make_shared<RemoverHolder>();
        h->dev = device_for(adapter_);
        slot = h;
      }
      r = slot;
    }
    const std::lock_guard<std::mutex> lock(r->dev->mutex);
    if (!r->remover) {
      matting::RemoverOptions o;
      o.size = size_;
      r->remover = std::make_unique<matting::Remover>(*r->dev->ctx, model_, o);
    }
    matting::Prepared p = r->remover->prepare(photo);
    p.post_process = post_process_;
    matting::Matte m = r->remover->infer(p);
    png_ = image::encode_png(r->remover->finish(std::move(p), std::move(m)).rgba);
  }
  Napi::Value result(Napi::Env env) override { return Napi::Buffer<char>::Copy(env, png_.data(), png_.size()); }

 private:
  std::string path_, bytes_, model_;
  int size_;
  std::string adapter_;
  bool post_process_;
  std::string png_;
};

Napi::Value RemoveBackgroundFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5) throw_type(env, "removeBackground(image, model, size, adapter, postProcess)");
  const std::string model = string_arg(info, 1, "model"), adapter = string_arg(info, 3, "adapter");
  if (!info[2].IsNumber()) throw_type(env, "size must be a number");
  const double size = info[2].As<Napi::Number>().DoubleValue();
  if (!(size >= 0 && size <= 16384) || size != double(int(size))) {
    throw Napi::RangeError::New(env, "size must be an integer from 0 (the model's own) to 16384");
  }
  const bool post = info[4].ToBoolean().Value();
  Job* job;
  if (info[0].IsString()) {
    job = new RemoveBackground(env, info[0].As<Napi::String>().Utf8Value(), {}, model, int(size), adapter, post);
  } else {
    job = new RemoveBackground(env, {}, bytes_of(info[0]), model, int(size), adapter, post);
  }
  Napi::Promise p = job->promise();
  job->Queue();
  return p;
}

// ---- deviceInfo(adapter) -> Promise<string>: `wgnn info --json`.
class DeviceInfo : public Job {
 public:
  DeviceInfo(Napi::Env env, std::string adapter) : Job(env), adapter_(std::move(adapter)) {}

 protected:
  void work() override {
    auto dev = device_for(adapter_);
    const std::lock_guard<std::mutex> lock(dev->mutex);
    json_ = gpu::describe_json(*dev->ctx);
  }
  Napi::Value result(Napi::Env env) override { return Napi::String::New(env, json_); }

 private:
  std::string adapter_, json_;
};

Napi::Value DeviceInfoFn(const Napi::CallbackInfo& info) {
  auto* job = new DeviceInfo(info.Env(), string_arg(info, 0, "adapter"));
  Napi::Promise p = job->promise();
  job->Queue();
  return p;
}

// modelFolders(programDir) -> [folder]; findModel([folder]) -> path or "".
Napi::Value ModelFoldersFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto folders = matting::model_folders(string_arg(info, 0, "programDir"), Settings::from_variables(&std::getenv));
  Napi::Array a = Napi::Array::New(env, folders.size());
  for (size_t i = 0; i < folders.size(); ++i) a.Set(uint32_t(i), folders[i]);
  return a;
}

Napi::Value FindModelFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray()) throw_type(env, "findModel(folders)");
  Napi::Array a = info[0].As<Napi::Array>();
  std::vector<std::string> folders;
  for (uint32_t i = 0; i < a.Length(); ++i) folders.push_back(a.Get(i).As<Napi::String>().Utf8Value());
  return Napi::String::New(env, matting::find_model(folders));
}

// ---- createGenerator({decoder, first, encoder}, {adapter, fp16}) ->
// Promise<handle>; generate(handle, prompt, options, encoderInput) ->
// Promise<{tokens, ...times}> (generate/generate.h).
struct GeneratorHolder {
  std::shared_ptr<Device> dev;
  std::unique_ptr<generate::Generator> gen;
  ~GeneratorHolder() {
    if (!gen) return;
    const std::lock_guard<std::mutex> lock(dev->mutex);
    gen.reset();
  }
};
using GeneratorRef = std::shared_ptr<GeneratorHolder>;

class CreateGenerator : public Job {
 public:
  CreateGenerator(Napi::Env env, generate::Models models, std::string adapter, bool fp16)
      : Job(env), models_(std::move(models)), adapter_(std::move(adapter)), fp16_(fp16) {}

 protected:
  void work() override {
    auto h = std::make_shared<GeneratorHolder>();
    h->dev = device_for(adapter_);
    onnx_import::SessionOptions o;
    o.fp16 = fp16_;
    const std::lock_guard<std::mutex> lock(h->dev->mutex);
    h->gen = std::make_unique<generate::Generator>(*h->dev->ctx, models_, o);
    holder_ = std::move(h);
  }
  Napi::Value result(Napi::Env env) override {
    auto* ref = new GeneratorRef(std::move(holder_));
    return Napi::External<GeneratorRef>::New(env, ref, [](Napi::Env, GeneratorRef* r) {
      bury(std::move(*r));
      delete r;
    });
  }

 private:
  generate::Models models_;
  std::string adapter_;
  bool fp16_;
  GeneratorRef holder_;
};

Napi::Value CreateGeneratorFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsObject()) throw_type(env, "createGenerator(models, options)");
  Napi::Object m = info[0].As<Napi::Object>(), o = info[1].As<Napi::Object>();
  auto str = [&](Napi::Object obj, const char* key) {
    Napi::Value v = obj.Get(key);
    if (v.IsUndefined() || v.IsNull()) return std::string();
    if (!v.IsString()) throw_type(env, std::string(key) + " must be a string");
    return v.As<Napi::String>().Utf8Value();
  };
  generate::Models models;
  models.decoder = str(m, "decoder");
  models.first = str(m, "first");
  models.encoder = str(m, "encoder");
  if (models.decoder.empty()) throw_type(env, "Generator.create: models.decoder (a path) is required");
  auto* job = new CreateGenerator(env, models, str(o, "adapter"), o.Get("fp16").ToBoolean().Value());
  Napi::Promise p = job->promise();
  job->Queue();
  return p;
}

GeneratorRef generator_of(const Napi::Value& v) {
  if (!v.IsExternal()) throw_type(v.Env(), "not a generator handle");
  GeneratorRef g = *v.As<Napi::External<GeneratorRef>>().Data();
  if (!g) throw Napi::Error::New(v.Env(), "the generator was released");
  return g;
}

class Generate : public Job {
 public:
  Generate(Napi::Env env, GeneratorRef g) : Job(env), g_(std::move(g)) {}
  ~Generate() override { bury(std::move(g_)); }  // deleted on the JS thread
  std::vector<std::vector<int64_t>> prompt;
  generate::Options options;
  std::unique_ptr<HostTensor> encoder_input;

 protected:
  void work() override {
    const std::lock_guard<std::mutex> lock(g_->dev->mutex);
    r_ = g_->gen->run(prompt, options, encoder_input.get());
  }
  Napi::Value result(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    Napi::Array seqs = Napi::Array::New(env, r_.tokens.size());
    for (size_t i = 0; i < r_.tokens.size(); ++i) {
      Napi::Array t = Napi::Array::New(env, r_.tokens[i].size());
      for (size_t k = 0; k < r_.tokens[i].size(); ++k) t.Set(uint32_t(k), Napi::Number::New(env, double(r_.tokens[i][k])));
      seqs.Set(uint32_t(i), t);
    }
    o.Set("tokens", seqs);
    o.Set("encoderMs", r_.encoder_ms);
    o.Set("promptMs", r_.prompt_ms);
    o.Set("decodeMs", r_.decode_ms);
    o.Set("totalMs", r_.total_ms);
    Napi::Array steps = Napi::Array::New(env, r_.step_ms.size());
    for (size_t i = 0; i < r_.step_ms.size(); ++i) steps.Set(uint32_t(i), Napi::Number::New(env, r_.step_ms[i]));
    o.Set("stepMs", steps);
    return o;
  }

 private:
  GeneratorRef g_;
  generate::Result r_;
};

// generate(handle, prompt: number[][], {maxNewTokens, eos, temperature,
// topK, topP, seed}, encoderInput: {type, dims, data} | null)
Napi::Value GenerateFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[1].IsArray() || !info[2].IsObject()) {
    throw_type(env, "generate(handle, prompt, options, encoderInput)");
  }
  auto job = std::make_unique<Generate>(env, generator_of(info[0]));
  Napi::Array rows = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < rows.Length(); ++i) {
    Napi::Array row = rows.Get(i).As<Napi::Array>();
    std::vector<int64_t> ids;
    for (uint32_t k = 0; k < row.Length(); ++k) ids.push_back(row.Get(k).As<Napi::Number>().Int64Value());
    job->prompt.push_back(std::move(ids));
  }
  Napi::Object o = info[2].As<Napi::Object>();
  auto num = [&](const char* key, double dflt) {
    Napi::Value v = o.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : dflt;
  };
  job->options.max_new_tokens = int(num("maxNewTokens", 64));
  job->options.temperature = num("temperature", 0);
  job->options.top_k = int64_t(num("topK", 0));
  job->options.top_p = num("topP", 1.0);
  job->options.seed = uint64_t(num("seed", 0));
  job->options.sync_every = int(num("syncEvery", 0));
  if (o.Get("eos").IsArray()) {
    Napi::Array eos = o.Get("eos").As<Napi::Array>();
    for (uint32_t k = 0; k < eos.Length(); ++k) job->options.eos.push_back(eos.Get(k).As<Napi::Number>().Int64Value());
  }
  if (info[3].IsObject()) {
    Napi::Object t = info[3].As<Napi::Object>();
    DType d;
    const std::string type = t.Get("type").As<Napi::String>().Utf8Value();
    if (!dtype_of(type, &d)) throw Napi::TypeError::New(env, "encoderInput: a tensor of type " + type + " is not supported");
    Napi::Array dims = t.Get("dims").As<Napi::Array>();
    Shape shape;
    for (uint32_t k = 0; k < dims.Length(); ++k) shape.push_back(dims.Get(k).As<Napi::Number>().Int64Value());
    const std::string bytes = bytes_of(t.Get("data"));
    size_t numel = 1;
    for (int64_t v : shape) numel *= size_t(v);
    if (numel * dtype_size(d) != bytes.size()) throw Napi::RangeError::New(env, "encoderInput: data and dims differ in size");
    job->encoder_input = std::make_unique<HostTensor>(d, shape, bytes.data());
  }
  Napi::Promise p = job->promise();
  job.release()->Queue();
  return p;
}

class ReleaseGenerator : public Job {
 public:
  ReleaseGenerator(Napi::Env env, GeneratorRef g) : Job(env), g_(std::move(g)) {}

 protected:
  void work() override { g_.reset(); }
  Napi::Value result(Napi::Env env) override { return env.Undefined(); }

 private:
  GeneratorRef g_;
};

Napi::Value ReleaseGeneratorFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throw_type(env, "releaseGenerator(handle)");
  GeneratorRef* ref = info[0].As<Napi::External<GeneratorRef>>().Data();
  auto* job = new ReleaseGenerator(env, std::move(*ref));
  ref->reset();
  Napi::Promise p = job->promise();
  job->Queue();
  return p;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("createSession", Napi::Function::New(env, CreateSessionFn, "createSession"));
  exports.Set("run", Napi::Function::New(env, RunFn, "run"));
  exports.Set("release", Napi::Function::New(env, ReleaseFn, "release"));
  exports.Set("removeBackground", Napi::Function::New(env, RemoveBackgroundFn, "removeBackground"));
  exports.Set("createGenerator", Napi::Function::New(env, CreateGeneratorFn, "createGenerator"));
  exports.Set("generate", Napi::Function::New(env, GenerateFn, "generate"));
  exports.Set("releaseGenerator", Napi::Function::New(env, ReleaseGeneratorFn, "releaseGenerator"));
  exports.Set("deviceInfo", Napi::Function::New(env, DeviceInfoFn, "deviceInfo"));
  exports.Set("modelFolders", Napi::Function::New(env, ModelFoldersFn, "modelFolders"));
  exports.Set("findModel", Napi::Function::New(env, FindModelFn, "findModel"));
  exports.Set("liveSessions", Napi::Function::New(
                                 env, [](const Napi::CallbackInfo& info) {
                                   return Napi::Number::New(info.Env(), double(g_live_sessions.load()));
                                 },
                                 "liveSessions"));
  exports.Set("defaultModel", Napi::String::New(env, matting::kDefaultModel));
  exports.Set("version", Napi::String::New(env, wgnn_version()));
  return exports;
}

}  // namespace

NODE_API_MODULE(wgnn, Init)
