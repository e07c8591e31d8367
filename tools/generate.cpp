// `wgnn generate`: a decoder run token by token (generate/generate.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "generate/generate.h"
#include "graph/npy.h"
#include "tools/commands.h"

namespace wgnn::tools {
namespace {

std::vector<int64_t> parse_ids(const std::string& s, const char* what) {
  std::vector<int64_t> ids;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size()) throw Error(fmt::format("{} '{}': '{}' is not an integer", what, s, item));
    ids.push_back(v);
  }
  if (ids.empty()) throw Error(fmt::format("{} is empty", what));
  return ids;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void check_generate_options(const GenerateOptions& o) {
  if (o.text_given) return check_text_options(o);
  parse_ids(o.prompt, "--prompt");
  if (!o.eos.empty()) parse_ids(o.eos, "--eos");
  if (o.max_new_tokens < 1) throw Error("--max-new-tokens must be at least 1");
  if (o.repeat < 1) throw Error("--repeat must be at least 1");
  if (o.batch < 1) throw Error("--batch must be at least 1");
  if (!o.encoder.empty() && o.encoder_input.empty()) throw Error("--encoder needs --encoder-input FILE.npy");
}

std::string generation_json(const std::vector<generate::Result>& runs) {
  const auto& r = runs.back();
  const auto& first = runs.front();
  std::string toks = "[";
  for (size_t b = 0; b < r.tokens.size(); ++b) {
    toks += b ? ",[" : "[";
    for (size_t i = 0; i < r.tokens[b].size(); ++i) toks += fmt::format("{}{}", i ? "," : "", r.tokens[b][i]);
    toks += "]";
  }
  toks += "]";
  return fmt::format(
      "{{\"tokens\":{},\"runs\":{},\"first_run\":{{\"total_ms\":{:.3f},\"prompt_ms\":{:.3f},\"encoder_ms\":{:.3f},"
      "\"plans_built\":{},\"cache_capacity\":{}}},\"last_run\":{{\"total_ms\":{:.3f},\"prompt_ms\":{:.3f},\"encoder_ms\":{:.3f},"
      "\"plans_built\":{},\"waits\":{},\"steps\":{},\"ms_per_token\":{:.4f},\"median_step_ms\":{:.4f},"
      "\"median_step_host_us\":{:.2f},\"step_host\":{{\"session_us\":{:.2f},\"upload_us\":{:.2f},"
      "\"encode_us\":{:.2f},\"submit_us\":{:.2f},\"dispatches\":{}}},"
      "\"steady_created\":{{\"buffers\":{},\"bind_groups\":{},\"pipelines\":{}}}}}}}",
      toks, runs.size(), first.total_ms, first.prompt_ms, first.encoder_ms, first.plans_built,
      first.cache_capacity, r.total_ms,
      r.prompt_ms, r.encoder_ms, r.plans_built, r.waits, r.step_ms.size(),
      r.step_ms.empty() ? 0.0 : r.decode_ms / double(r.step_ms.size()), median(r.step_ms), median(r.step_host_us),
      median(r.step_session_us), median(r.step_upload_us), median(r.step_encode_us), median(r.step_submit_us),
      r.step_dispatches, r.steady_buffers, r.steady_bind_groups, r.steady_pipelines);
}

generate::Models generate_models(const GenerateOptions& o) {
  generate::Models m;
  m.decoder = o.decoder;
  m.first = o.first;
  m.encoder = o.encoder;
  return m;
}

onnx_import::SessionOptions generate_session_options(const GenerateOptions& o) {
  onnx_import::SessionOptions so;
  so.fp16 = o.fp16;
  so.checked = !o.unchecked;
  so.verbose = o.verbose;
  return so;
}

generate::Options generate_run_options(const GenerateOptions& o) {
  generate::Options go;
  go.max_new_tokens = o.max_new_tokens;
  if (!o.eos.empty()) go.eos = parse_ids(o.eos, "--eos");
  go.temperature = o.temperature;
  go.top_k = o.top_k;
  go.top_p = o.top_p;
  go.seed = o.seed;
  go.sync_every = o.sync_every;
  go.cache_buckets = !o.exact_cache;
  return go;
}

int generate_tokens(gpu::Context& ctx, const GenerateOptions& o) {
  generate::Generator gen(ctx, generate_models(o), generate_session_options(o));
  if (o.verbose) fmt::print(stderr, "{}\n", gen.describe());
  const generate::Options go = generate_run_options(o);
  const std::vector<int64_t> row = parse_ids(o.prompt, "--prompt");
  const std::vector<std::vector<int64_t>> prompt(size_t(o.batch), row);
  HostTensor enc_in;
  if (!o.encoder_input.empty()) enc_in = read_npy(o.encoder_input);
  generate::Result r;
  std::vector<generate::Result> runs;
  for (int k = 0; k < o.repeat; ++k) {
    runs.push_back(gen.run(prompt, go, o.encoder_input.empty() ? nullptr : &enc_in));
  }
  r = runs.back();
  // The last run's tokens; with --repeat every run must give the same.
  for (const auto& x : runs) {
    if (x.tokens != r.tokens) throw Error("--repeat: two runs generated different tokens");
  }
  const auto& first = runs.front();
  if (o.json) {
    fmt::print("{}\n", generation_json(runs));
    return 0;
  }
  for (const auto& t : r.tokens) {
    std::string line;
    for (size_t i = 0; i < t.size(); ++i) line += fmt::format("{}{}", i ? " " : "", t[i]);
    fmt::print("{}\n", line);
  }
  std::fflush(stdout);
  if (o.verbose) {
    fmt::print(stderr,
               "first run {:.1f} ms ({} plans built); last run {:.1f} ms: prompt {:.2f} ms, {} steps, {:.3f} ms per "
               "token (median step {:.3f} ms, {:.1f} us host to encode and submit), {} waits\n"
               "per step (medians): decoder Session::run {:.1f} us; upload {:.1f} us, encode {:.1f} us (submits "
               "{:.1f} us) of {} dispatches\n",
               first.total_ms, first.plans_built, r.total_ms, r.prompt_ms, r.step_ms.size(),
               r.step_ms.empty() ? 0.0 : r.decode_ms / double(r.step_ms.size()), median(r.step_ms),
               median(r.step_host_us), r.waits, median(r.step_session_us), median(r.step_upload_us),
               median(r.step_encode_us), median(r.step_submit_us), r.step_dispatches);
  }
  return 0;
}

}  // namespace wgnn::tools
