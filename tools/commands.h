#pragma once
// Subcommands of the wgnn CLI that are more than a few lines.
#include <cstdint>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "gpu/context.h"
#include "image/image.h"

namespace wgnn::tools {

struct BenchCopyOptions {
  uint64_t mib = 256;
  int iters = 20;
  int reps = 5;
  bool json = false;
};
int bench_copy(gpu::Context& ctx, const BenchCopyOptions& o);

// `wgnn generate`: token ids in, token ids out (generate/generate.h).
struct GenerateOptions {
  std::string decoder, first, encoder, encoder_input;
  std::string prompt;  // comma-separated ids
  std::string eos;     // comma-separated ids
  int max_new_tokens = 64;
  int batch = 1;
  double temperature = 0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  int sync_every = 0;
  int repeat = 1;
  bool json = false, verbose = false, fp16 = false, unchecked = false;
  bool exact_cache = false;  // a plan per cache length (generate::Options::cache_buckets off)
  // Text in, text out (tools/text_commands.cpp): `decoder` is a model folder
  // (text/model_folder.h).
  std::string text;
  bool text_given = false;            // --text (may be empty)
  bool max_new_tokens_given = false;  // else the folder's generation_config.json
  bool stream = false;                // print the text as it comes (sync every token)
  std::vector<std::string> stops;     // --stop: end the text where one appears
};
void check_generate_options(const GenerateOptions& o);
int generate_tokens(gpu::Context& ctx, const GenerateOptions& o);
// The parts of generate_tokens the text commands share.
generate::Models generate_models(const GenerateOptions& o);
onnx_import::SessionOptions generate_session_options(const GenerateOptions& o);
generate::Options generate_run_options(const GenerateOptions& o);
std::string generation_json(const std::vector<generate::Result>& runs);  // one JSON object

// `wgnn generate DIR --text TEXT`: the folder's tokenizer and end tokens.
void check_text_options(const GenerateOptions& o);
int generate_text(gpu::Context& ctx, const GenerateOptions& o);

// `wgnn chat DIR`: user lines from stdin, the chat template over the
// conversation so far, the answer streamed; ends at EOF.
struct ChatOptions {
  GenerateOptions gen;  // gen.decoder: the model folder
  std::string system;   // a system message first, when set
};
void check_chat_options(const ChatOptions& o);
int chat(gpu::Context& ctx, const ChatOptions& o);

struct RunOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> shapes;  // NAME=DIMS of random inputs with dynamic dims
  std::string output_dir = ".";
  uint32_t seed = 0;
  std::string int_range = "0:4";    // LO:HI of random integer inputs, [LO, HI)
  int repeat = 1;
  bool verbose = false;
  bool fp16 = false;  // SessionOptions::fp16
  bool unchecked = false;  // SessionOptions::checked off
};
int run_model(gpu::Context& ctx, const RunOptions& o);

// Model-level timing: `wgnn bench` (host-to-host and one-pass GPU time) and
// `wgnn profile` (per-dispatch GPU time by op and kernel, Chrome trace).
struct ModelInputArgs {
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> shapes;  // NAME=DIMS
  uint32_t seed = 0;
  std::string int_range = "0:4";    // LO:HI of random integer inputs, [LO, HI)
};
struct BenchOptions {
  std::string model;
  ModelInputArgs in;
  int runs = 20;
  int warmup = 3;
  bool json = false;
  bool fp16 = false;  // SessionOptions::fp16
  bool unchecked = false;  // SessionOptions::checked off
  std::vector<std::string> outputs;  // SessionOptions::outputs (empty: all)
};
int bench_model(gpu::Context& ctx, const BenchOptions& o);
// Checks what needs no GPU (arguments) before a Context is made.
void check_bench_options(const BenchOptions& o);

// `wgnn bench-shapes`: one Session at many input shapes (build time per new
// shape, steady time, constants held once, plans kept).
struct BenchShapesOptions {
  std::string model;
  std::vector<std::string> sets;    // each "NAME=DIMS[;NAME=DIMS...]": one set of input shapes
  std::string dim;                  // "NAME=LO:HI[:STEP]" or "NAME=V1,V2,...": a symbolic dim's values
  std::vector<std::string> shapes;  // NAME=DIMS for the inputs --dim does not name
  uint32_t seed = 0;
  std::string int_range = "0:4";    // LO:HI of random integer inputs, [LO, HI)
  int runs = 3;                     // steady runs per shape (the median is reported)
  int max_plans = 8;                // SessionOptions::max_plans
  int max_plan_sizes = 64;          // SessionOptions::max_plan_sizes
  bool no_size_classes = false;     // SessionOptions::size_classes off
  bool build_only = false;          // Session::build each set, no runs
  std::string output_dir;           // each set's inputs and outputs (.npy) in DIR/<k>/
  bool json = false;
  bool fp16 = false;
  bool unchecked = false;
};
int bench_shapes(gpu::Context& ctx, const BenchShapesOptions& o);
void check_bench_shapes_options(const BenchShapesOptions& o);

struct ProfileOptions {
  std::string model;
  ModelInputArgs in;
  int runs = 5;
  int top = 15;  // rows per table; 0: all
  std::string trace;
  bool json = false;
  bool fp16 = false;  // SessionOptions::fp16
  bool unchecked = false;  // SessionOptions::checked off
};
int profile_model(gpu::Context& ctx, const ProfileOptions& o);
void check_profile_options(const ProfileOptions& o);

struct ConformanceOptions {
  std::vector<std::string> dirs;
  std::string filter;
  double rtol = 1e-3, atol = 1e-5;
  bool verbose = false;
  bool quiet_unsupported = false;
  bool fp16 = false;  // SessionOptions::fp16 (give a float16 --rtol / --atol)
  // The pinned results: every case must end as its line says (pass, skip or
  // fail), no case may be missing from the file, no listed case may be absent.
  std::string expected;
  std::string write_expected;  // write this run's results in that format
  int min_cases = 0;           // fewer cases run is a failure
};
int conformance(gpu::Context& ctx, const ConformanceOptions& o);

struct RemoveBgOptions {
  std::vector<std::string> inputs;  // photos, folders, or "-" (stdin)
  // One photo: the output PNG (default: <its stem>_cutout.png in the current
  // folder; "-": stdout). Several or a folder: the output folder (default:
  // the current folder).
  std::string output;
  bool recursive = false;  // folders: their subfolders too
  bool overwrite = false;  // redo outputs that exist (else they are skipped)
  bool only_mask = false;  // write the matte (gray) instead of the cut-out
  std::string bg_color;    // "R,G,B[,A]": the cut-out over this colour instead
  std::string mask;    // the matte alone as 8-bit gray PNG (optional)
  std::string model;   // a file, or a preset: isnet (the default), modnet (cutout_settings.h)
  bool post_process = false;  // the matte cleaned as rembg's post_process_mask does
  int threads = 0;            // several photos: host threads decoding and writing (0: automatic)
  int size = 0;        // 0: the model's own
  std::string preprocess = "auto";
  int runs = 1;
  bool quiet = false;
  uint64_t max_pixels = image::kDefaultMaxPixels;  // the largest photo read (width x height)
};
// Reads the first photo before it creates the Context (a wrong path fails at
// once). Several photos: one model, a progress line each, a summary; exit 1
// if any failed.
int remove_bg(const gpu::ContextOptions& context_options, const RemoveBgOptions& o);

// `wgnn serve`: background removal over HTTP (tools/serve.cpp).
struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (printed)
  std::string model;  // as remove-bg's --model
  std::string llm;    // a language-model folder served under /v1/ (tools/serve_llm.h)
  int size = 0;
  std::string preprocess = "auto";
  int queue = 8;     // requests served at once (decoding, on the GPU or encoding); more get 503
  int threads = 0;   // HTTP threads (0: queue + 4)
  uint64_t max_bytes = uint64_t(32) << 20;         // the largest request body
  uint64_t max_pixels = uint64_t(4096) * 4096;     // the largest photo (width x height)
  double timeout_s = 60;                           // a request's most time, from admitted to answered
  double drain_timeout_s = 30;                     // on SIGTERM / SIGINT, the most time to finish admitted work
  std::string token;                               // POST /remove-bg needs "Authorization: Bearer <token>"
  std::string origins;                             // more origins allowed to POST (comma-separated; "*": any)
  bool quiet = false;
};
int serve(const gpu::ContextOptions& context_options, const ServeOptions& o);
int selfcheck(gpu::Context& ctx);

}  // namespace wgnn::tools
