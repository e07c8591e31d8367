#include "generate/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "gpu/dispatch.h"
#include "gpu/error.h"
#include "gpu/recorder.h"
#include "graph/graph.h"
#include "ops/helpers.h"
#include "ops/registry.h"
#include "ops/uniforms.h"

namespace wgnn::generate {

using onnx_import::Feeds;
using onnx_import::Fetches;
using onnx_import::Session;
using onnx_import::ValueInfo;

namespace {

using clock = std::chrono::steady_clock;
double ms_since(clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); }

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

// The roles of a decoder's inputs and outputs (generate.h).
struct Generator::Layout {
  std::string input_ids, attention_mask, position_ids, encoder_hidden_states, encoder_attention_mask, use_cache;
  std::vector<const ValueInfo*> past;                 // past inputs
  std::map<std::string, std::string> present_to_past;  // output -> input
  std::string logits;

  Layout(const Session& s, const std::string& file) {
    for (const ValueInfo& in : s.inputs()) {
      const std::string& n = in.name;
      auto expect = [&](DType d) {
        if (in.dtype != d) {
          throw Error(fmt::format("{}: input '{}' is {}; generation expects {}", file, n, dtype_name(in.dtype),
                                  dtype_name(d)));
        }
      };
      if (n == "input_ids" || n == "decoder_input_ids") {
        expect(DType::I64);
        input_ids = n;
      } else if (n == "attention_mask" || n == "decoder_attention_mask") {
        expect(DType::I64);
        attention_mask = n;
      } else if (n == "position_ids") {
        expect(DType::I64);
        position_ids = n;
      } else if (n == "encoder_hidden_states") {
        encoder_hidden_states = n;
      } else if (n == "encoder_attention_mask") {
        expect(DType::I64);
        encoder_attention_mask = n;
      } else if (n == "use_cache_branch") {
        expect(DType::Bool);
        use_cache = n;
      } else if (starts_with(n, "past")) {
        past.push_back(&in);
      } else {
        throw Unsupported(fmt::format(
            "{}: input '{}' has no role in generation (known: input_ids, attention_mask, position_ids, "
            "encoder_hidden_states, encoder_attention_mask, use_cache_branch, past_key_values.*)",
            file, n));
      }
    }
    if (input_ids.empty()) throw Unsupported(fmt::format("{}: no input_ids input: not a decoder", file));
    for (const ValueInfo& o : s.outputs()) {
      if (o.name == "logits") logits = o.name;
      if (!starts_with(o.name, "present")) continue;
      std::string rest = o.name.substr(std::strlen("present"));
      if (starts_with(rest, "_key_values")) rest = rest.substr(std::strlen("_key_values"));
      std::string match;
      for (const ValueInfo* p : past) {
        if (p->name == "past_key_values" + rest || p->name == "past" + rest) match = p->name;
      }
      present_to_past[o.name] = match.empty() ? "past_key_values" + rest : match;
    }
    if (logits.empty()) logits = s.outputs().at(0).name;
  }
};

struct Generator::Sampler {
  std::unique_ptr<Graph> g;
  TensorRef logits, rng, ids;
};

// The cache at a capacity (generate.h): what the decoder allows, the present
// outputs' buffers, and the row copies (ops/kernels/copy_rows.wgsl).
struct Generator::Buckets {
  std::string refused;           // why runs cannot (empty: they can)
  bool new_row_at_past = false;  // GroupQueryAttention writes the new row at L, not at C
  std::map<std::string, size_t> len_dim;  // updated past input -> its length dim
  std::vector<std::string> names;         // the updated past inputs, in order
  std::map<std::string, DeviceTensor> present;  // by past input name
  int64_t cap = 0;
  // copy_rows' parameters, a 256-byte slot per cache tensor, and its bind
  // groups by (tensor, source, destination).
  gpu::Buffer params;
  const gpu::Pipeline* pipe = nullptr;  // copy_rows.wgsl, made at the first copy
  std::map<std::tuple<size_t, const void*, const void*>, gpu::BindGroup> groups;

  static int64_t capacity_for(int64_t rows) {
    int64_t c = 64;
    while (c < rows) c *= 2;
    return c;
  }
  // Drops the bind groups of a buffer that was replaced.
  void forget(const void* buffer) {
    for (auto it = groups.begin(); it != groups.end();) {
      if (std::get<1>(it->first) == buffer || std::get<2>(it->first) == buffer) it = groups.erase(it);
      else ++it;
    }
  }
  struct Copy {
    const std::string* name;  // the past input
    const DeviceTensor* src;
    DeviceTensor* dst;
    int64_t rows, src_rows, src_row, dst_rows, dst_row;
  };
  // One copy_rows dispatch per tensor, one submit; src's shape gives the
  // dims around the length (outer and inner).
  void copy(gpu::Context& ctx, const std::vector<Copy>& copies) {
    constexpr uint64_t kSlot = 256;
    if (!params.valid() || params.size() < kSlot * copies.size()) {
      params = ctx.create_buffer(kSlot * copies.size(), gpu::kUniform | gpu::kCopyDst, "cache rows");
      groups.clear();
    }
    std::vector<uint32_t> words(copies.size() * kSlot / 4, 0);
    if (!pipe) pipe = &ops::kernel(ctx, "ops/kernels/copy_rows.wgsl");
    gpu::Recorder rec(ctx);
    for (size_t t = 0; t < copies.size(); ++t) {
      const Copy& c = copies[t];
      const size_t d = len_dim.at(*c.name);
      int64_t outer = 1, inner = 1;
      for (size_t k = 0; k < d; ++k) outer *= c.src->shape[k];
      for (size_t k = d + 1; k < c.src->shape.size(); ++k) inner *= c.src->shape[k];
      const uint64_t row_bytes = uint64_t(inner) * gpu_dtype_size(c.src->stored);
      if (row_bytes % 4 != 0) {
        throw Unsupported(fmt::format("cache '{}': rows of {} bytes; keeping it at a capacity needs a multiple of 4 "
                                      "(generate with a plan per length: --exact-cache)",
                                      *c.name, row_bytes));
      }
      const uint64_t need = uint64_t(outer) * uint64_t(c.dst_rows) * row_bytes;
      if (c.dst->buffer.size() < need) {
        forget(c.dst->buffer.handle());
        ensure_capacity(ctx, *c.dst, need, *c.name);
      }
      const ops::CopyRowsParams p{uint32_t(outer),      uint32_t(c.rows),     uint32_t(row_bytes / 4),
                                  uint32_t(c.src_rows), uint32_t(c.src_row),  uint32_t(c.dst_rows),
                                  uint32_t(c.dst_row),  0};
      static_assert(sizeof(p) <= kSlot);
      std::memcpy(words.data() + t * kSlot / 4, &p, sizeof(p));
      // The group of this copy, and the one of the copy back (a growth
      // moves the rows out to the present buffer and back): both are made
      // when a buffer is, so that a later run at lengths seen makes none.
      auto group = [&](const gpu::Buffer& from, const gpu::Buffer& to) -> const gpu::BindGroup& {
        const auto key = std::make_tuple(t, static_cast<const void*>(from.handle()), static_cast<const void*>(to.handle()));
        auto g = groups.find(key);
        if (g == groups.end()) {
          g = groups.emplace(key, ctx.bind_group(*pipe, {{&params, t * kSlot, sizeof(ops::CopyRowsParams)}, {&from}, {&to}},
                                                 "cache rows")).first;
        }
        return g->second;
      };
      const gpu::BindGroup& g = group(c.src->buffer, c.dst->buffer);
      group(c.dst->buffer, c.src->buffer);
      const uint64_t threads = uint64_t(outer) * uint64_t(c.rows) * (row_bytes / 4);
      rec.dispatch(*pipe, g,
                   gpu::RowDispatchGrid((threads + 255) / 256, ctx.limits().max_compute_workgroups_per_dimension),
                   "cache rows");
    }
    ctx.write(params, words.data(), words.size() * 4);
    rec.submit();
  }
};

namespace {

// model.decoder.head_size of the genai_config.json beside a model file
// (onnxruntime-genai's model builder writes it there); 0 without one.
int64_t genai_head_size(const std::string& model_file) {
  namespace fs = std::filesystem;
  const fs::path cfg = fs::path(model_file).parent_path() / "genai_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(cfg, ec)) return 0;
  std::ifstream in(cfg, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read {}", cfg.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not valid JSON: {}", cfg.string(), e.what()));
  }
  const nlohmann::json* h = nullptr;
  if (j.is_object() && j.contains("model") && j["model"].is_object() && j["model"].contains("decoder") &&
      j["model"]["decoder"].is_object() && j["model"]["decoder"].contains("head_size"))
    h = &j["model"]["decoder"]["head_size"];
  if (!h || !h->is_number_integer() || h->get<int64_t>() <= 0)
    throw Error(fmt::format("{}: model.decoder.head_size is missing or not a positive integer", cfg.string()));
  return h->get<int64_t>();
}

// onnxruntime-genai's model builder leaves the cache's head size symbolic
// (past_key_values.N.key [batch_size, kv_heads, past_sequence_length,
// kv_cache_dim]): the empty cache of the prompt step needs it, and keeping
// the cache at a capacity needs the length to be its one dynamic dim
// besides the batch. Fixed from Models::cache_head_size, else from the
// genai_config.json beside the model.
void fix_cache_head_size(Session& s, const std::string& file, int64_t head) {
  bool looked = head > 0;
  std::vector<std::pair<std::string, Shape>> fixes;
  for (const ValueInfo& in : s.inputs()) {
    if (in.name.rfind("past", 0) != 0 || in.shape.size() != 4 || in.shape[3] >= 0) continue;
    int dynamic = 0;
    for (size_t d = 1; d < 4; ++d) dynamic += in.shape[d] < 0;
    if (dynamic < 2) continue;
    if (!looked) head = genai_head_size(file), looked = true;
    if (head <= 0) {
      throw Unsupported(fmt::format(
          "{}: cache input '{}' {} leaves its head size symbolic{}; give it (generate::Models::cache_head_size), or "
          "put the genai_config.json that onnxruntime-genai's model builder writes (model.decoder.head_size) beside "
          "the model",
          file, in.name, shape_str(in.shape),
          in.dim_names.size() == 4 && !in.dim_names[3].empty() ? fmt::format(" ('{}')", in.dim_names[3]) : ""));
    }
    Shape shape = in.shape;
    shape[3] = head;
    fixes.emplace_back(in.name, shape);
  }
  for (const auto& [name, shape] : fixes) s.set_input_shape(name, shape);
}

}  // namespace

Generator::Generator(gpu::Context& ctx, const Models& models, onnx_import::SessionOptions options) : ctx_(ctx) {
  if (models.decoder.empty()) throw Error("generation needs a decoder model");
  // A plan per past length: keep those of a long generation.
  options.max_plans = std::max(options.max_plans, 600);
  options.outputs.clear();
  // A generation's tokens must not depend on when the tensor-core kernels
  // finish compiling (a tiered plan switches kernels between steps).
  options.tiered = false;
  decoder_ = std::make_unique<Session>(ctx, models.decoder, options);
  fix_cache_head_size(*decoder_, models.decoder, models.cache_head_size);
  dec_layout_ = std::make_unique<Layout>(*decoder_, models.decoder);
  if (dec_layout_->past.empty()) {
    throw Unsupported(fmt::format("{}: no past_key_values inputs: a decoder without a cache (each step would run the "
                                  "whole sequence)",
                                  models.decoder));
  }
  for (const auto& [present, past] : dec_layout_->present_to_past) {
    if (std::none_of(dec_layout_->past.begin(), dec_layout_->past.end(),
                     [&](const ValueInfo* p) { return p->name == past; })) {
      throw Error(fmt::format("{}: output '{}' has no past input '{}' to feed", models.decoder, present, past));
    }
  }
  if (!models.first.empty()) {
    first_ = std::make_unique<Session>(ctx, models.first, options);
    first_layout_ = std::make_unique<Layout>(*first_, models.first);
    // Every past input of the decoder must come from the prompt step.
    for (const ValueInfo* p : dec_layout_->past) {
      bool given = false;
      for (const auto& [present, past] : first_layout_->present_to_past) given = given || past == p->name;
      if (!given) {
        throw Error(fmt::format("{}: no output gives the decoder's input '{}' (expected present{})", models.first,
                                p->name, p->name.substr(std::strlen("past_key_values"))));
      }
    }
  }
  buckets_ = std::make_unique<Buckets>();
  Buckets& bk = *buckets_;
  const Layout& L = *dec_layout_;
  bk.new_row_at_past = decoder_->uses_op("com.microsoft.GroupQueryAttention");
  if (L.attention_mask.empty() || !decoder_->reads_input(L.attention_mask)) {
    bk.refused = "the decoder takes no attention_mask";
  } else if (!bk.new_row_at_past && (L.position_ids.empty() || !decoder_->reads_input(L.position_ids))) {
    bk.refused = "the decoder takes no position_ids (its positions would follow the capacity)";
  }
  for (const auto& [present, past] : L.present_to_past) {
    if (!bk.refused.empty()) break;
    const ValueInfo* p = *std::find_if(L.past.begin(), L.past.end(), [&](const ValueInfo* v) { return v->name == past; });
    size_t dim = 0;
    int dynamic = 0;
    for (size_t d = 1; d < p->shape.size(); ++d) {
      if (p->shape[d] < 0) dim = d, ++dynamic;
    }
    if (dynamic != 1) {
      bk.refused = fmt::format("cache input '{}' {} has {} dynamic dims besides the batch (expected the length only)",
                               past, shape_str(p->shape), dynamic);
    }
    bk.len_dim[past] = dim;
    bk.names.push_back(past);
  }
  if (!models.encoder.empty()) {
    onnx_import::SessionOptions eo = options;
    eo.max_plans = 8;
    encoder_ = std::make_unique<Session>(ctx, models.encoder, eo);
    if (encoder_->inputs().size() != 1) {
      throw Unsupported(fmt::format("{}: an encoder with {} inputs; generation feeds one", models.encoder,
                                    encoder_->inputs().size()));
    }
    if (dec_layout_->encoder_hidden_states.empty() &&
        (!first_layout_ || first_layout_->encoder_hidden_states.empty())) {
      throw Error(fmt::format("an encoder is given but no decoder takes encoder_hidden_states"));
    }
  }
}

Generator::~Generator() = default;

bool Generator::buckets_possible() const { return buckets_->refused.empty(); }
const std::string& Generator::buckets_refused() const { return buckets_->refused; }

std::string Generator::describe() const {
  const Layout& L = *dec_layout_;
  std::string s = fmt::format("decoder: tokens '{}', logits '{}', {} cache inputs ({} updated each step)", L.input_ids,
                              L.logits, L.past.size(), L.present_to_past.size());
  if (!L.attention_mask.empty()) s += fmt::format(", mask '{}'", L.attention_mask);
  if (!L.position_ids.empty()) s += fmt::format(", positions '{}'", L.position_ids);
  if (!L.encoder_hidden_states.empty()) s += fmt::format(", encoder states '{}'", L.encoder_hidden_states);
  if (!L.use_cache.empty()) s += fmt::format(", merged ('{}')", L.use_cache);
  s += first_ ? "; prompt step: its own model" : "; prompt step: the decoder with an empty cache";
  if (encoder_) s += fmt::format("; encoder input '{}'", encoder_->inputs()[0].name);
  s += buckets_->refused.empty()
           ? std::string("; cache: at a capacity (a plan per capacity)")
           : fmt::format("; cache: a plan per length ({})", buckets_->refused);
  return s;
}

Generator::Sampler& Generator::sampler_for(const Shape& logits, DType dtype, const Options& o) {
  const std::string key = fmt::format("{}{}|{}|{}|{}", shape_str(logits), dtype_name(dtype), o.temperature, o.top_k,
                                      o.top_p);
  auto& slot = samplers_[key];
  if (slot) return *slot;
  auto s = std::make_unique<Sampler>();
  s->g = std::make_unique<Graph>(ctx_);
  Graph& g = *s->g;
  g.set_checked(false);
  s->logits = g.add_tensor(logits, dtype, TensorKind::Input, "logits");
  s->rng = g.add_tensor({4}, DType::I32, TensorKind::Input, "rng");
  const bool greedy = o.temperature <= 0;
  s->ids = ops::call(g, "wgnn.sample.default",
                     {s->logits, greedy ? Value() : Value(s->rng), o.temperature, o.top_k, o.top_p})
               .tensor();
  g.mark_output(s->ids);
  g.prepare();
  slot = std::move(s);
  return *slot;
}

Result Generator::run(const std::vector<std::vector<int64_t>>& prompt, const Options& o,
                      const HostTensor* encoder_input) {
  const auto t_start = clock::now();
  if (prompt.empty() || prompt[0].empty()) throw Error("generation needs a prompt of at least one token");
  const int64_t B = int64_t(prompt.size()), S0 = int64_t(prompt[0].size());
  for (const auto& row : prompt) {
    if (int64_t(row.size()) != S0) throw Error("every prompt row must have the same length");
  }
  if (o.max_new_tokens < 1) throw Error(fmt::format("max_new_tokens is {}; at least 1", o.max_new_tokens));
  if (o.temperature > 0 && (o.top_p <= 0 || o.top_p > 1)) throw Error("top_p must be in (0, 1]");
  if (o.top_k < 0) throw Error("top_k must be 0 (off) or more");
  if (encoder_ && !encoder_input) throw Error("this model has an encoder: give its input");
  if (!encoder_ && encoder_input) throw Error("an encoder input is given but there is no encoder model");
  const int builds_before = decoder_->builds() + (first_ ? first_->builds() : 0);
  Result r;
  r.tokens.assign(size_t(B), {});

  // The encoder, once: its first output stays on the GPU.
  DeviceTensor enc_states;
  int64_t enc_len = 0;
  if (encoder_) {
    const auto t0 = clock::now();
    Feeds f;
    f.host[encoder_->inputs()[0].name] = encoder_input;
    Fetches out;
    const std::string enc_out = encoder_->outputs()[0].name;
    out.device[enc_out];
    encoder_->run(f, out);
    enc_states = std::move(out.device[enc_out]);
    if (enc_states.shape.size() < 2) throw Error(fmt::format("encoder output '{}' has rank < 2", enc_out));
    enc_len = enc_states.shape[1];
    r.encoder_ms = ms_since(t0);
  }

  std::map<std::string, DeviceTensor>& cache = cache_;
  DeviceTensor& logits = logits_;
  DeviceTensor& token = token_;
  // Tokens sampled since the last readback, on the GPU: step k's at k*B.
  const int sync = o.sync_every > 0 ? o.sync_every : (o.eos.empty() ? o.max_new_tokens : 8);
  DeviceTensor& history = history_;
  history.dtype = DType::I64;
  history.stored = DType::I64;
  history.shape = {int64_t(sync) * B};
  ensure_capacity(ctx_, history, history.gpu_bytes(), "generated tokens");
  const int64_t final_len = S0 + o.max_new_tokens;
  int pending = 0;  // steps in `history` not read yet
  std::vector<bool> ended(size_t(B), false);
  const std::set<int64_t> eos(o.eos.begin(), o.eos.end());
  auto read_pending = [&]() -> bool {  // true when every sequence has ended
    if (pending == 0) return false;
    // Through a readback buffer kept from run to run (int64 ids are int32
    // on the GPU).
    std::vector<int32_t> ids(size_t(pending * B));
    const uint64_t bytes = ids.size() * sizeof(int32_t);
    if (!history_staging_.valid() || history_staging_.size() < history.buffer.size()) {
      history_staging_ = ctx_.create_buffer(history.buffer.size(), gpu::kMapRead | gpu::kCopyDst, "tokens readback");
    }
    gpu::Recorder rec(ctx_);
    rec.copy(history.buffer, 0, history_staging_, 0, bytes);
    rec.submit();
    ctx_.map_for_read({&history_staging_});
    rec.finish_completed();
    std::memcpy(ids.data(), ctx_.mapped(history_staging_, bytes), bytes);
    ctx_.unmap(history_staging_);
    ++r.waits;
    std::vector<std::vector<int64_t>> fresh(static_cast<size_t>(B));
    for (int k = 0; k < pending; ++k) {
      for (int64_t b = 0; b < B; ++b) {
        if (ended[size_t(b)] || int(r.tokens[size_t(b)].size()) >= o.max_new_tokens) continue;
        const int64_t id = ids[size_t(k * B + b)];
        r.tokens[size_t(b)].push_back(id);
        fresh[size_t(b)].push_back(id);
        if (eos.count(id)) ended[size_t(b)] = true;
      }
    }
    pending = 0;
    // The steps' run-time checks (token ids in range, ...), read with the
    // tokens instead of a wait per step.
    decoder_->check_deferred();
    if (first_) first_->check_deferred();
    for (auto& [key, sm] : samplers_) sm->g->check_deferred();
    // The caller's callback, after the checks (tokens it sees are valid).
    if (o.on_tokens && !r.stopped) {
      bool any = false;
      for (const auto& f : fresh) any = any || !f.empty();
      if (any && !o.on_tokens(fresh)) r.stopped = true;
    }
    return r.stopped || std::all_of(ended.begin(), ended.end(), [](bool e) { return e; });
  };

  int64_t past_len = 0;
  // The cache at a capacity (generate.h), where the decoder allows it.
  Buckets& bk = *buckets_;
  const bool bucketed = o.cache_buckets && bk.refused.empty();
  bk.cap = 0;
  // Past the capacity: the rows so far into the next one, through the
  // present outputs' buffers (free between steps; they hold cap + 1 rows).
  auto grow = [&](int64_t rows_needed) {
    const int64_t cap = Buckets::capacity_for(rows_needed);
    std::vector<Buckets::Copy> out, back;
    for (const std::string& past : bk.names) {
      DeviceTensor& c = cache.at(past);
      DeviceTensor& pr = bk.present.at(past);
      const size_t d = bk.len_dim.at(past);
      pr.dtype = c.dtype;
      pr.stored = c.stored;
      pr.shape = c.shape;
      pr.shape[d] = past_len;
      out.push_back({&past, &c, &pr, past_len, bk.cap, 0, past_len, 0});
    }
    bk.copy(ctx_, out);
    for (size_t t = 0; t < bk.names.size(); ++t) {
      DeviceTensor& c = cache.at(bk.names[t]);
      c.shape[bk.len_dim.at(bk.names[t])] = cap;
      back.push_back({&bk.names[t], out[t].dst, &c, past_len, past_len, 0, cap, 0});
    }
    bk.copy(ctx_, back);
    bk.cap = cap;
  };
  // One step: the decoder (or the prompt model) on `new_len` tokens, then
  // the sampler on its logits; the token is copied into `history`.
  auto step = [&](Session& s, const Layout& L, const HostTensor* ids_host, int64_t new_len, bool prompt_step,
                  int index) {
    const bool at_capacity = bucketed && !prompt_step;
    if (at_capacity && past_len + 1 > bk.cap) grow(past_len + 1);
    Feeds f;
    HostTensor mask, positions, use_cache, enc_mask;
    std::vector<HostTensor> empty_past;
    empty_past.reserve(L.past.size());
    if (ids_host) {
      f.host[L.input_ids] = ids_host;
    } else {
      token.shape = {B, 1};
      f.device[L.input_ids] = &token;
    }
    if (!L.attention_mask.empty() && at_capacity) {
      // The L tokens so far, the empty rows up to the capacity, the new one.
      mask = HostTensor(DType::I64, {B, bk.cap + 1});
      int64_t* m = mask.as<int64_t>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j <= bk.cap; ++j) m[b * (bk.cap + 1) + j] = (j < past_len || j == bk.cap) ? 1 : 0;
      f.host[L.attention_mask] = &mask;
    } else if (!L.attention_mask.empty()) {
      mask = HostTensor(DType::I64, {B, past_len + new_len});
      std::fill(mask.as<int64_t>(), mask.as<int64_t>() + mask.numel(), int64_t(1));
      f.host[L.attention_mask] = &mask;
    }
    if (!L.position_ids.empty()) {
      positions = HostTensor(DType::I64, {B, new_len});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < new_len; ++j) positions.as<int64_t>()[b * new_len + j] = past_len + j;
      f.host[L.position_ids] = &positions;
    }
    if (!L.use_cache.empty()) {
      use_cache = HostTensor(DType::Bool, {1});
      use_cache.data[0] = prompt_step ? 0 : 1;
      f.host[L.use_cache] = &use_cache;
    }
    if (!L.encoder_hidden_states.empty()) {
      if (!enc_states.valid()) throw Error("the decoder takes encoder_hidden_states but no encoder was given");
      f.device[L.encoder_hidden_states] = &enc_states;
    }
    if (!L.encoder_attention_mask.empty()) {
      if (!enc_states.valid()) throw Error("the decoder takes encoder_attention_mask but no encoder was given");
      enc_mask = HostTensor(DType::I64, {B, enc_len});
      std::fill(enc_mask.as<int64_t>(), enc_mask.as<int64_t>() + enc_mask.numel(), int64_t(1));
      f.host[L.encoder_attention_mask] = &enc_mask;
    }
    for (const ValueInfo* p : L.past) {
      auto c = cache.find(p->name);
      if (c != cache.end() && c->second.valid() && !prompt_step) {
        f.device[p->name] = &c->second;
        continue;
      }
      // The prompt step of a decoder with past inputs: an empty cache,
      // the declared shape with the batch and the length (the one other
      // dynamic dim) set.
      Shape shape = p->shape;
      int dynamic = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (d == 0) shape[d] = B;
        else if (shape[d] < 0) shape[d] = 0, ++dynamic;
      }
      if (dynamic != 1) {
        throw Unsupported(fmt::format("input '{}' {}: cannot make an empty cache (expected [batch, ..., length, ...] "
                                      "with one dynamic dim besides the batch); give the prompt model (first)",
                                      p->name, shape_str(p->shape)));
      }
      empty_past.emplace_back(p->dtype, shape);
      f.host[p->name] = &empty_past.back();
    }
    Fetches out;
    out.wait = false;
    out.device[L.logits] = std::move(logits);
    std::map<std::string, const void*> scratch_before;
    for (const auto& [present, past] : L.present_to_past) {
      DeviceTensor& d = out.device[present];
      if (bucketed && bk.len_dim.count(past)) {  // into the present buffers kept for the row copies
        DeviceTensor& pr = bk.present[past];
        scratch_before[past] = pr.valid() ? pr.buffer.handle() : nullptr;
        d = std::move(pr);
        continue;
      }
      auto c = cache.find(past);
      if (c == cache.end()) continue;
      d.buffer = c->second.buffer;  // written in place
      // The first step after the prompt sizes the buffer for the whole run
      // (the length grows by one a step): no buffer is made after it.
      if (!prompt_step && past_len > 0 && c->second.gpu_bytes() % uint64_t(past_len) == 0) {
        const uint64_t final_bytes = c->second.gpu_bytes() / uint64_t(past_len) * uint64_t(final_len);
        if (d.buffer.size() < final_bytes) d.buffer = ctx_.create_buffer((final_bytes + 15) / 16 * 16, gpu::kStorageUsage, present);
      }
    }
    const auto t_run = clock::now();
    s.run(f, out);
    const double session_us = ms_since(t_run) * 1000;
    const Graph::RunStats dec = s.graph().last_run();
    size_t row_copies = 0;  // the cache's row copies after this step (dispatches)
    for (const auto& [present, past] : L.present_to_past) {
      if (!bucketed || !bk.len_dim.count(past)) cache[past] = std::move(out.device[present]);
    }
    if (bucketed) {
      // The prompt's rows into a cache of the capacity after it; a step's
      // new row into slot L.
      if (prompt_step) bk.cap = Buckets::capacity_for(new_len + 1);
      std::vector<Buckets::Copy> copies;
      for (const auto& [present, past_name] : L.present_to_past) {
        auto known = bk.len_dim.find(past_name);
        if (known == bk.len_dim.end()) continue;
        const std::string& past = known->first;
        DeviceTensor& pr = bk.present[past];
        pr = std::move(out.device[present]);
        const void* before = scratch_before[past];
        if (before && before != pr.buffer.handle()) bk.forget(before);
        const size_t d = bk.len_dim.at(past);
        const int64_t rows = d < pr.shape.size() ? pr.shape[d] : -1;
        const int64_t expect = prompt_step ? new_len : bk.cap + 1;
        if (rows != expect) {
          throw Error(fmt::format("present output '{}' is {}: with {} past rows{} the cache's length (dim {}) "
                                  "should be {}; generate with a plan per length (--exact-cache)",
                                  present, shape_str(pr.shape), prompt_step ? 0 : bk.cap,
                                  prompt_step ? "" : " (a capacity)", d, expect));
        }
        DeviceTensor& c = cache[past];
        if (prompt_step) {
          c.dtype = pr.dtype;
          c.stored = pr.stored;
          c.shape = pr.shape;
          c.shape[d] = bk.cap;
          copies.push_back({&past, &pr, &c, new_len, new_len, 0, bk.cap, 0});
        } else {
          copies.push_back({&past, &pr, &c, 1, rows, bk.new_row_at_past ? past_len : bk.cap, bk.cap, past_len});
        }
      }
      bk.copy(ctx_, copies);
      row_copies = copies.size();
    }
    logits = std::move(out.device[L.logits]);
    if (logits.shape.size() != 3 || logits.shape[0] != B || logits.shape[1] != new_len) {
      throw Error(fmt::format("logits '{}' are {}; expected [{}, {}, vocab]", L.logits, shape_str(logits.shape), B,
                              new_len));
    }
    Sampler& sm = sampler_for(logits.shape, logits.stored, o);
    std::vector<int32_t> rng{int32_t(uint32_t(o.seed)), int32_t(uint32_t(o.seed >> 32)), index, 0};
    const Graph::HostIn rin{sm.rng, rng.data(), rng.size() * sizeof(int32_t)};
    const Graph::DeviceIn lin{sm.logits, &logits};
    // The token to the next step and to the history, in the sampler's one
    // submit.
    const Graph::DeviceOut touts[2] = {{sm.ids, &token, false, 0},
                                       {sm.ids, &history, true, uint64_t(pending) * uint64_t(B) * 4}};
    token.dtype = DType::I64;
    sm.g->run(std::span(&rin, 1), {}, std::span(&lin, 1), std::span(touts, 2), false);
    if (!prompt_step) {
      const Graph::RunStats& smp = sm.g->last_run();
      r.step_upload_us.push_back(dec.upload_us + smp.upload_us);
      r.step_encode_us.push_back(dec.encode_us + smp.encode_us);
      r.step_submit_us.push_back(dec.submit_us + smp.submit_us);
      r.step_session_us.push_back(session_us);
      r.step_dispatches = dec.dispatches + smp.dispatches + row_copies;
    }
    ++pending;
    past_len += new_len;
  };

  // The prompt step.
  {
    const auto t0 = clock::now();
    HostTensor ids(DType::I64, {B, S0});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < S0; ++j) ids.as<int64_t>()[b * S0 + j] = prompt[size_t(b)][size_t(j)];
    if (first_) step(*first_, *first_layout_, &ids, S0, true, 0);
    else step(*decoder_, *dec_layout_, &ids, S0, true, 0);
    bool done = read_pending();
    r.prompt_ms = ms_since(t0);
    const auto t_decode = clock::now();
    gpu::CreationStats steady_from = ctx_.creation_stats();
    for (int i = 1; i < o.max_new_tokens && !done; ++i) {
      const auto ts = clock::now();
      step(*decoder_, *dec_layout_, nullptr, 1, false, i);
      if (i == 1) steady_from = ctx_.creation_stats();
      const double host_us = ms_since(ts) * 1000;
      if (pending >= sync || i + 1 == o.max_new_tokens) done = read_pending();
      r.step_host_us.push_back(host_us);
      r.step_ms.push_back(ms_since(ts));
    }
    read_pending();
    r.decode_ms = ms_since(t_decode);
    const gpu::CreationStats made = ctx_.creation_stats() - steady_from;
    r.steady_buffers = made.buffers;
    r.steady_bind_groups = made.bind_groups;
    r.steady_pipelines = made.pipelines_created;
  }
  r.plans_built = decoder_->builds() + (first_ ? first_->builds() : 0) - builds_before;
  r.cache_capacity = bucketed ? bk.cap : 0;
  r.total_ms = ms_since(t_start);
  return r;
}

}  // namespace wgnn::generate
