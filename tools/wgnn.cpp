// wgnn: the command-line tool.
//   wgnn info [--json]                 the adapter, its features and limits
//   wgnn bench-copy [--mib N]          memory bandwidth of a vec4 copy kernel
//   wgnn selfcheck                     a few kernels against the CPU
//   wgnn run MODEL                     run an ONNX model, write its outputs
//   wgnn bench MODEL [--json]          load, first-run, steady host-to-host and GPU time
//   wgnn bench-shapes MODEL --set ...  one session at many input shapes (build cost, weights once)
//   wgnn profile MODEL [--trace F]     per-dispatch GPU time by op and kernel
//   wgnn generate DECODER --prompt IDS   token by token, the cache on the GPU
//   wgnn generate DIR --text TEXT        a model folder: text in, text out
//   wgnn chat DIR [--system TEXT]        a conversation, user lines from stdin
//   wgnn remove-bg PHOTO... | DIR [-o OUT]   cut out the photos' subjects (matting model)
//   wgnn serve [--port N] [--model M]          the same over HTTP, with a web page
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "gpu/context.h"
#include "gpu/describe.h"
#include "gpu/recorder.h"
#include "ops/registry.h"
#include "pte/program.h"
#include "tools/commands.h"
#include "wgnn/wgnn.h"

using namespace wgnn;

namespace {

int cmd_info(gpu::Context& ctx, bool as_json) {
  const auto& a = ctx.adapter();
  const auto& f = ctx.features();
  const gpu::DiskCacheStats pc = ctx.disk_cache_stats();
  if (as_json) {
    std::cout << gpu::describe_json(ctx) << "\n";
    return 0;
  }
  const auto& l = ctx.limits();
  fmt::print("adapter        {}\n", a.name);
  fmt::print("vendor         {} (0x{:04x}), {}\n", a.vendor, a.vendor_id, a.architecture);
  fmt::print("backend        {}, {}\n", a.backend, a.adapter_type);
  fmt::print("driver         {}\n", a.description);
  fmt::print("chosen         {}\n", a.driver_source);
  fmt::print("selected       adapter {} by {}{}{}\n", a.index, a.selected_by, a.uuid.empty() ? "" : ", uuid GPU-" + a.uuid,
             a.pci_bus.empty() ? "" : ", pci " + a.pci_bus);
  fmt::print("subgroups      {}..{}\n", a.subgroup_min_size, a.subgroup_max_size);
  fmt::print("features       shader-f16 {}, subgroups {}, timestamp-query {}\n", f.shader_f16 ? "yes" : "no",
             f.subgroups ? "yes" : "no", f.timestamp_query ? "yes" : "no");
  fmt::print("               subgroup-matrix {}\n",
             f.subgroup_matrix ? "yes"
             : f.unsafe_apis   ? "no"
                               : "no (needs --allow-unsafe-apis, and on Vulkan a Dawn with subgroup matrices: WGNN_DAWN=dawn-node or source)");
  for (const auto& c : f.subgroup_matrix_configs) {
    fmt::print("                 {}x{} -> {}, M{} N{} K{}\n", c.component, c.component, c.result, c.m, c.n, c.k);
  }
  fmt::print("WGSL           packed_4x8_integer_dot_product {}\n", f.packed_4x8_dot ? "yes" : "no");
  fmt::print("adapter offers {}\n", fmt::join(f.adapter_features, ", "));
  fmt::print("float16        {}\n", f.shader_f16 ? "stored as float16 (shader-f16)"
                                                : "stored as float32 (no shader-f16: float16 values are widened on "
                                                  "upload, Casts to float16 round; --fp16 mode cannot run)");
  fmt::print("limits         {} ({})\n", ctx.limits_mode(),
             ctx.limits_mode() == "default" ? "WebGPU's defaults, WGNN_LIMITS=default" : "the adapter's own");
  fmt::print("               maxStorageBufferBindingSize {} MiB, maxBufferSize {} MiB\n",
             l.max_storage_buffer_binding_size >> 20, l.max_buffer_size >> 20);
  fmt::print("               workgroup storage {} KiB, {} invocations, {} workgroups per dimension, "
             "{} storage buffers per stage\n",
             l.max_compute_workgroup_storage_size >> 10, l.max_compute_invocations_per_workgroup,
             l.max_compute_workgroups_per_dimension, l.max_storage_buffers_per_shader_stage);
  if (pc.enabled) {
    fmt::print("pipelines      cached on disk in {} (at most {} MiB)\n", pc.folder, pc.max_bytes >> 20);
  } else {
    fmt::print("pipelines      not cached on disk: {}\n", pc.why_off);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wgnn: neural-network inference on the GPU through WebGPU"};
  app.set_version_flag("--version", std::string("wgnn ") + wgnn_version());
  app.require_subcommand(1);
  std::string adapter;
  app.add_option("--adapter", adapter,
                 "auto (default), gpu or lavapipe; or one adapter: an index (wgnn info --adapters), a UUID, "
                 "vendor:device in hex, pci:ADDRESS or a part of its name; WGNN_ADAPTER sets the default");
  bool allow_unsafe = false;
  app.add_flag("--allow-unsafe-apis", allow_unsafe,
               "Dawn's allow_unsafe_apis toggle: experimental features such as subgroup matrices; on by "
               "default where Dawn has them (WGNN_ALLOW_UNSAFE_APIS=1 or 0 sets the default)");

  auto* info = app.add_subcommand("info", "Show the WebGPU adapter, its features and limits");
  bool info_json = false;
  info->add_flag("--json", info_json, "Print a JSON object");
  bool info_settings = false;
  info->add_flag("--settings", info_settings,
                 "List every setting the runtime takes (docs/SETTINGS.md), with its value from the environment");
  bool info_adapters = false;
  info->add_flag("--adapters", info_adapters,
                 "List every adapter (index, name, ids, UUID, PCI address) without starting a device");

  auto* bench = app.add_subcommand("bench-copy", "Memory bandwidth of a vec4 copy kernel (the yardstick)");
  tools::BenchCopyOptions bc;
  bench->add_option("--mib", bc.mib, "Buffer size in MiB (each of source and destination)");
  bench->add_option("--iters", bc.iters, "Copies per measurement");
  bench->add_option("--reps", bc.reps, "Measurements (the median is reported)");
  bench->add_flag("--json", bc.json, "Print one JSON object");

  auto* self = app.add_subcommand("selfcheck", "Run a few kernels and compare with the CPU");

  auto* run = app.add_subcommand("run", "Run a model (ONNX, or an ExecuTorch .pte); write each output to DIR/<name>.npy");
  tools::RunOptions ro;
  run->add_option("model", ro.model, "ONNX model, or ExecuTorch program (.pte)")->required();
  run->add_option("--input", ro.inputs, "NAME=FILE.npy (inputs not given get seeded random data)");
  run->add_option("--output-dir", ro.output_dir, "Where to write the outputs");
  run->add_option("--shape", ro.shapes, "NAME=DIMS (e.g. 1x3x224x224): the shape of a random input with dynamic dims");
  run->add_option("--seed", ro.seed, "Seed of the random inputs");
  run->add_option("--int-range", ro.int_range,
                  "LO:HI: random integer inputs (token ids, indices) are uniform in [LO, HI) (default 0:4)");
  run->add_option("--repeat", ro.repeat, "Run N times (the same inputs) and report host overhead per run");
  run->add_flag("--verbose", ro.verbose, "Timing, dispatch and memory summary");
  run->add_flag("--unchecked", ro.unchecked,
                "Skip the run-time checks (Gather, GatherND and scatter indices in range, integer division by nonzero): such values are then clamped, dropped or computed silently");
  run->add_flag("--fp16", ro.fp16, "float16 mode: float32 weights and activations stored as float16 on the GPU, f32 accumulation; float32 inputs and outputs stay float32");

  auto add_input_options = [](CLI::App* c, tools::ModelInputArgs& in) {
    c->add_option("--input", in.inputs, "NAME=FILE.npy (inputs not given get seeded random data)");
    c->add_option("--shape", in.shapes, "NAME=DIMS (e.g. 1x3x224x224): the shape of a random input with dynamic dims");
    c->add_option("--seed", in.seed, "Seed of the random inputs");
    c->add_option("--int-range", in.int_range,
                  "LO:HI: random integer inputs (token ids, indices) are uniform in [LO, HI) (default 0:4)");
  };
  auto* bm = app.add_subcommand(
      "bench", "Time a model: load, first run, steady host-to-host median/min (upload + run + readback), GPU time");
  tools::BenchOptions bmo;
  bm->add_option("model", bmo.model, "ONNX model, or ExecuTorch program (.pte)")->required();
  add_input_options(bm, bmo.in);
  bm->add_option("--runs", bmo.runs, "Timed runs (default 20)");
  bm->add_option("--warmup", bmo.warmup, "Untimed runs after the first (default 3)");
  bm->add_flag("--json", bmo.json, "Print one JSON object");
  bm->add_flag("--unchecked", bmo.unchecked,
                "Skip the run-time checks (Gather, GatherND and scatter indices in range, integer division by nonzero): such values are then clamped, dropped or computed silently");
  bm->add_flag("--fp16", bmo.fp16, "float16 mode: float32 weights and activations stored as float16 on the GPU, f32 accumulation; float32 inputs and outputs stay float32");
  bm->add_option("--outputs", bmo.outputs,
                 "NAME[,NAME...]: run and read back only these outputs (the work only the others need is left out), "
                 "as remove-bg reads ISNet's matte alone")
      ->delimiter(',');

  auto* bs = app.add_subcommand(
      "bench-shapes", "One session at many input shapes: build time of each new shape, steady time, constants held once");
  tools::BenchShapesOptions bso;
  bs->add_option("model", bso.model, "ONNX model, or ExecuTorch program (.pte)")->required();
  bs->add_option("--set", bso.sets, "NAME=DIMS[;NAME=DIMS...]: one set of input shapes (repeat for each set)");
  bs->add_option("--dim", bso.dim, "NAME=LO:HI[:STEP] or NAME=V1,V2,...: the values of a symbolic input dim");
  bs->add_option("--shape", bso.shapes, "NAME=DIMS: the shape of an input --dim does not name");
  bs->add_option("--seed", bso.seed, "Seed of the random inputs");
  bs->add_option("--int-range", bso.int_range, "LO:HI: random integer inputs are uniform in [LO, HI) (default 0:4)");
  bs->add_option("--runs", bso.runs, "Steady runs per shape, the median reported (default 3)");
  bs->add_option("--max-plans", bso.max_plans, "Plans the session keeps (least recently used evicted; default 8)");
  bs->add_option("--max-plan-sizes", bso.max_plan_sizes,
                 "Sets of input shapes one plan keeps (least recently used evicted; default 64)");
  bs->add_flag("--build-only", bso.build_only,
               "Build each set's plan without running it (Session::build): build times, plans and buffers only");
  bs->add_flag("--no-size-classes", bso.no_size_classes,
               "Every set of input shapes makes its own structural choices (SessionOptions::size_classes off)");
  bs->add_option("--output-dir", bso.output_dir,
                 "Write each set's inputs and outputs: DIR/<k>/inputs/<name>.npy and DIR/<k>/<name>.npy");
  bs->add_flag("--json", bso.json, "Print one JSON object");
  bs->add_flag("--unchecked", bso.unchecked, "Skip the run-time checks");
  bs->add_flag("--fp16", bso.fp16, "float16 mode");

  auto* pf = app.add_subcommand("profile",
                                "Per-dispatch GPU time of a model by op and by kernel, with GB/s and TFLOP/s");
  tools::ProfileOptions pfo;
  pf->add_option("model", pfo.model, "ONNX model, or ExecuTorch program (.pte)")->required();
  add_input_options(pf, pfo.in);
  pf->add_option("--runs", pfo.runs, "Profiled runs; each dispatch's median is reported (default 5)");
  pf->add_option("--top", pfo.top, "Rows per table (default 15; 0: all)");
  pf->add_option("--trace", pfo.trace, "Write a Chrome trace (chrome://tracing, Perfetto): one event per dispatch");
  pf->add_flag("--json", pfo.json, "Print one JSON object (every op and kernel)");
  pf->add_flag("--unchecked", pfo.unchecked,
                "Skip the run-time checks (Gather, GatherND and scatter indices in range, integer division by nonzero): such values are then clamped, dropped or computed silently");
  pf->add_flag("--fp16", pfo.fp16, "float16 mode: float32 weights and activations stored as float16 on the GPU, f32 accumulation; float32 inputs and outputs stay float32");

  auto* conf = app.add_subcommand("conformance", "Run ONNX backend test cases and compare with their outputs");
  tools::ConformanceOptions co;
  conf->add_option("dirs", co.dirs, "Case folders, or folders of case folders")->required();
  conf->add_option("--filter", co.filter, "Only cases whose name contains this");
  conf->add_option("--rtol", co.rtol, "Relative tolerance");
  conf->add_option("--atol", co.atol, "Absolute tolerance");
  conf->add_flag("--verbose", co.verbose, "Print every case");
  conf->add_flag("--quiet-unsupported", co.quiet_unsupported, "Do not list unsupported cases");
  conf->add_flag("--fp16", co.fp16,
                 "Run the cases in float16 mode (with a float16 tolerance, e.g. --rtol 1e-2 --atol 1e-3)");
  conf->add_option("--expected", co.expected,
                   "File of the pinned results (lines 'pass NAME', 'skip NAME: reason', 'fail NAME: reason'): "
                   "any case that ends otherwise, is not listed, or is listed and absent fails the run");
  conf->add_option("--write-expected", co.write_expected,
                   "Write this run's results to FILE in --expected's format (keeps the reasons of 'fail' lines "
                   "FILE already has)");
  conf->add_option("--min-cases", co.min_cases, "Fail when fewer cases than this ran");

  auto* gen = app.add_subcommand("generate",
                                 "Run a decoder token by token (greedy or sampled), its key/value cache kept on the "
                                 "GPU; prints the new token ids (--prompt IDS), or the text (a model folder and "
                                 "--text)");
  tools::GenerateOptions gno;
  gen->add_option("decoder", gno.decoder,
                  "The decoder with past_key_values inputs and present outputs, or with --text a model folder "
                  "(its ONNX decoder, tokenizer.json, tokenizer_config.json, generation_config.json)")
      ->required();
  gen->add_option("--first", gno.first,
                  "The decoder without past inputs, for the prompt (default: the decoder with an empty cache)");
  gen->add_option("--encoder", gno.encoder, "An encoder run once; its first output is encoder_hidden_states");
  gen->add_option("--encoder-input", gno.encoder_input, "The encoder's input (.npy)");
  gen->add_option("--prompt", gno.prompt, "Prompt token ids, comma-separated");
  auto* gen_text = gen->add_option("--text", gno.text,
                                   "Prompt text (with a model folder): encoded by its tokenizer, the answer decoded");
  gen->add_flag("--stream", gno.stream, "With --text: print the text as tokens come (reads every token back)");
  gen->add_option("--stop", gno.stops,
                  "With --text: end the text where this string appears, cutting it off (repeatable)");
  auto* gen_max_new = gen->add_option("--max-new-tokens", gno.max_new_tokens,
                                      "Tokens to generate (default 64; with a model folder, its "
                                      "generation_config.json's max_new_tokens when set)");
  gen->add_option("--eos", gno.eos, "End token ids, comma-separated: a sequence ends after one");
  gen->add_option("--batch", gno.batch, "Sequences, each with the prompt (default 1)");
  gen->add_option("--temperature", gno.temperature, "0 (default): greedy; else sample at this temperature");
  gen->add_option("--top-k", gno.top_k, "Sample among the k most likely tokens (0: all)");
  gen->add_option("--top-p", gno.top_p, "Sample among the fewest most likely tokens reaching this probability (1: off)");
  gen->add_option("--seed", gno.seed, "Sampling seed (default 0)");
  gen->add_option("--sync-every", gno.sync_every,
                  "Read the tokens back every N steps (default: at the end, or every 8 with --eos)");
  gen->add_option("--repeat", gno.repeat, "Generate this many times (the later runs reuse every plan)");
  gen->add_flag("--json", gno.json, "Print one JSON object: tokens and timings");
  gen->add_flag("--verbose", gno.verbose, "Print the layout found and timings on stderr");
  gen->add_flag("--fp16", gno.fp16, "float16 mode");
  gen->add_flag("--unchecked", gno.unchecked, "Skip the run-time checks (a step then needs no host wait)");
  gen->add_flag("--exact-cache", gno.exact_cache,
                "A plan per cache length, the cache fed back as the decoder gives it (default: the cache kept at "
                "a power-of-two capacity, a plan per capacity, where the decoder allows it)");

  auto* chat_cmd = app.add_subcommand(
      "chat", "Talk to a model folder's decoder: each stdin line is a user message; the chat template over the "
              "conversation so far is the prompt, the answer is streamed (ends at EOF)");
  tools::ChatOptions cho;
  chat_cmd->add_option("folder", cho.gen.decoder,
                       "The model folder (ONNX decoder, tokenizer.json, tokenizer_config.json with chat_template)")
      ->required();
  chat_cmd->add_option("--system", cho.system, "A system message before the conversation");
  auto* chat_max_new = chat_cmd->add_option("--max-new-tokens", cho.gen.max_new_tokens,
                                            "Tokens per answer at most (default: generation_config.json's, else 64)");
  chat_cmd->add_option("--eos", cho.gen.eos, "End token ids, comma-separated (default: the folder's)");
  chat_cmd->add_option("--stop", cho.gen.stops, "End an answer where this string appears (repeatable)");
  chat_cmd->add_option("--temperature", cho.gen.temperature, "0 (default): greedy; else sample at this temperature");
  chat_cmd->add_option("--top-k", cho.gen.top_k, "Sample among the k most likely tokens (0: all)");
  chat_cmd->add_option("--top-p", cho.gen.top_p, "Sample among the fewest most likely tokens reaching this probability");
  chat_cmd->add_option("--seed", cho.gen.seed, "Sampling seed (default 0)");
  chat_cmd->add_flag("--json", cho.gen.json, "One JSON line per turn (prompt_tokens, tokens, text), nothing streamed");
  chat_cmd->add_flag("--verbose", cho.gen.verbose, "Print the layout and each turn's prompt text on stderr");
  chat_cmd->add_flag("--fp16", cho.gen.fp16, "float16 mode");

  auto* ops_cmd = app.add_subcommand("ops", "List the supported operators");
  bool ops_pte = false;
  ops_cmd->add_flag("--pte", ops_pte,
                    "The ops of ExecuTorch programs the .pte front end maps (functional ATen names; a portable "
                    "kernel's out variant maps through its functional op)");

  auto* rb = app.add_subcommand("remove-bg",
                               "Cut out photos' subjects: RGBA PNGs whose alpha is the matte (one photo, several, "
                               "or folders)");
  tools::RemoveBgOptions rbo;
  rb->add_option("input", rbo.inputs,
                 "Photos (PNG, JPEG, WebP, TIFF), folders of them, or - for one photo from stdin")
      ->required();
  rb->add_option("-o,--output", rbo.output,
                 "One photo: the cut-out PNG (default: <photo's name>_cutout.png here; - for stdout). Several or a "
                 "folder: the output folder (default: here), keeping a folder's subfolders");
  rb->add_flag("--recursive", rbo.recursive, "Read the subfolders of a folder too");
  rb->add_flag("--overwrite", rbo.overwrite,
               "Several photos or a folder: redo cut-outs that exist (else they are skipped; one photo's is always "
               "written)");
  rb->add_flag("--only-mask", rbo.only_mask,
               "Write the matte alone (8-bit gray) instead of the cut-out (default name <photo's name>_mask.png)");
  rb->add_option("--bg-color", rbo.bg_color,
                 "R,G,B[,A] (0 to 255): the cut-out over this colour instead of transparency (RGB when A is 255 "
                 "or left out)");
  rb->add_option("--mask", rbo.mask, "Also write the matte alone as an 8-bit gray PNG");
  rb->add_option("--model", rbo.model,
                 "Matting model: a file, or a preset by name: isnet (the default: isnet_any_size.onnx or isnet.onnx) "
                 "or modnet (modnet.onnx), found in $WGNN_HOME/models, ~/.cache/wgnn/models, models/ beside wgnn or "
                 "../share/wgnn/models");
  rb->add_flag("--post-process", rbo.post_process,
               "Clean the matte as rembg's --post-process-mask does: an opening (3x3 cross), a 5x5 Gaussian blur "
               "(sigma 2), then a threshold at 127 (alpha 0 or 255)");
  rb->add_option("--size", rbo.size,
                 "Model input size, a multiple of 32: ISNet N x N (default: its declared 1024; 768 is about as good "
                 "and 1.8x faster), MODNet the short side (default 512)");
  rb->add_option("--preprocess", rbo.preprocess,
                 "auto (from the model's input: fixed size -> isnet, free size -> modnet), isnet or modnet");
  rb->add_option("--runs", rbo.runs, "Run the model N times and report the steady run time (default 1)");
  rb->add_option("--threads", rbo.threads,
                 "Several photos: host threads that decode, pre-process and write while the GPU runs the model "
                 "(default: the cores less two, 1 to 16)");
  rb->add_flag("--quiet", rbo.quiet, "No progress lines (failures are still reported)");
  rb->add_option("--max-pixels", rbo.max_pixels,
                 fmt::format("The largest photo accepted, width x height in pixels (default {}, 8192x8192; "
                             "checked from the header before decoding)",
                             image::kDefaultMaxPixels));

  auto* sv = app.add_subcommand("serve",
                               "Serve background removal over HTTP with the model loaded: POST /remove-bg (a photo in, "
                               "the cut-out PNG out), GET /health, and a page at / to drop photos on; with --llm, a language "
                               "model with OpenAI's API under /v1/");
  tools::ServeOptions svo;
  sv->add_option("--host", svo.host, "Address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)");
  sv->add_option("--port", svo.port, "Port (default 8080; 0: any free one, printed)");
  sv->add_option("--model", svo.model, "As remove-bg's --model: a file, or a preset (isnet, the default; modnet)");
  sv->add_option("--llm", svo.llm,
                 "A language-model folder (as `generate DIR --text` takes) served with OpenAI's API: GET /v1/models, "
                 "POST /v1/completions and /v1/chat/completions (streaming too); alone, or beside remove-bg when "
                 "--model is given");
  sv->add_option("--size", svo.size, "As remove-bg's --size: the model input size, a multiple of 32");
  sv->add_option("--preprocess", svo.preprocess, "As remove-bg's --preprocess: auto, isnet or modnet");
  sv->add_option("--queue", svo.queue,
                 "Requests served at once (decoding, waiting for or on the GPU, encoding); more get 503 at once "
                 "(default 8)");
  sv->add_option("--threads", svo.threads, "Worker threads that decode, wait for the GPU and encode (default: --queue, at most 64)");
  sv->add_option("--max-bytes", svo.max_bytes, "The largest request body, in bytes (default 32 MiB); larger get 413");
  sv->add_option("--max-pixels", svo.max_pixels,
                 "The largest photo, width x height (default 4096x4096, checked from the header); larger get 413");
  sv->add_option("--timeout", svo.timeout_s,
                 "A request's most seconds from admitted to answered (default 60); later ones get 503");
  sv->add_option("--drain-timeout", svo.drain_timeout_s,
                 "On SIGTERM or SIGINT, the most seconds to finish the admitted requests (default 30); the rest get "
                 "503, then exit 0");
  sv->add_option("--token", svo.token,
                 "POST /remove-bg then needs 'Authorization: Bearer TOKEN' (or set WGNN_SERVE_TOKEN, which other "
                 "users' ps does not show)");
  sv->add_option("--origins", svo.origins,
                 "More origins whose pages may POST, comma-separated (\"*\": any); default: the server's own only");
  sv->add_flag("--quiet", svo.quiet, "No line per request");

  CLI11_PARSE(app, argc, argv);
  if (ops_cmd->parsed()) {
    for (const auto& n : ops_pte ? pte::supported_ops() : ops::OpRegistry::global().names()) fmt::print("{}\n", n);
    return 0;
  }
  try {
    gpu::ContextOptions opts;
    // The documented variables (docs/SETTINGS.md), mapped here: the library
    // reads no environment.
    opts.settings = Settings::from_variables(&std::getenv);
    opts.adapter = adapter;
    if (allow_unsafe) opts.allow_unsafe_apis = true;
    if (info->parsed() && info_settings) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& k : Settings::known()) {
        const char* v = opts.settings.get(k.name);
        if (info_json) {
          j.push_back({{"name", k.name}, {"what", k.what}, {"value", v ? nlohmann::json(v) : nlohmann::json()}});
        } else {
          fmt::print("{:34} {}{}\n", k.name, k.what, v ? fmt::format(" [set: '{}']", v) : "");
        }
      }
      if (info_json) std::cout << j.dump(2) << "\n";
      return 0;
    }
    if (info->parsed() && info_adapters) {
      const auto list = gpu::Context::list_adapters(opts);
      if (info_json) {
        std::cout << gpu::describe_adapters_json(list) << "\n";
      } else {
        fmt::print("{}", gpu::describe_adapters(list));
      }
      return 0;
    }
    if (rb->parsed()) return tools::remove_bg(opts, rbo);
    if (sv->parsed()) return tools::serve(opts, svo);
    // Argument errors before the GPU starts.
    if (bm->parsed()) tools::check_bench_options(bmo);
    if (pf->parsed()) tools::check_profile_options(pfo);
    if (bs->parsed()) tools::check_bench_shapes_options(bso);
    if (gen->parsed()) {
      gno.text_given = gen_text->count() > 0;
      gno.max_new_tokens_given = gen_max_new->count() > 0;
      if (!gno.text_given && gno.prompt.empty())
        throw Error("generate: give --prompt IDS (with a decoder file) or --text TEXT (with a model folder)");
      if (!gno.text_given && (gno.stream || !gno.stops.empty()))
        throw Error("generate: --stream and --stop need --text (a model folder)");
      tools::check_generate_options(gno);
    }
    if (chat_cmd->parsed()) {
      cho.gen.max_new_tokens_given = chat_max_new->count() > 0;
      cho.gen.stream = !cho.gen.json;
      tools::check_chat_options(cho);
    }
    gpu::Context ctx(opts);
    if (info->parsed()) return cmd_info(ctx, info_json);
    if (bench->parsed()) return tools::bench_copy(ctx, bc);
    if (self->parsed()) return tools::selfcheck(ctx);
    if (run->parsed()) return tools::run_model(ctx, ro);
    if (bm->parsed()) return tools::bench_model(ctx, bmo);
    if (pf->parsed()) return tools::profile_model(ctx, pfo);
    if (bs->parsed()) return tools::bench_shapes(ctx, bso);
    if (conf->parsed()) return tools::conformance(ctx, co);
    if (gen->parsed()) return gno.text_given ? tools::generate_text(ctx, gno) : tools::generate_tokens(ctx, gno);
    if (chat_cmd->parsed()) return tools::chat(ctx, cho);
  } catch (const std::bad_alloc&) {
    // Where a command knows what it was doing, it says so (HostOutOfMemory).
    fmt::print(stderr, "wgnn: error: out of host memory while running 'wgnn {}'\n",
               app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgnn: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
