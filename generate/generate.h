#pragma once
// Generation: a decoder run one token at a time, its key/value cache kept on
// the GPU from step to step, the next token chosen on the GPU.
//
//   gpu::Context ctx;
//   generate::Models m;
//   m.decoder = "decoder_with_past_model.onnx";
//   m.first = "decoder_model.onnx";            // optional: the prompt step
//   m.encoder = "encoder_model.onnx";          // optional: encoder-decoder
//   generate::Generator gen(ctx, m);
//   generate::Options o;  o.max_new_tokens = 64;  o.eos = {2};
//   generate::Result r = gen.run({{0, 31, 414}}, o, &encoder_input);
//
// The layouts are those of torch.onnx.export / Optimum exports, and of ONNX
// Runtime's generative-AI model builder (input_ids, attention_mask,
// past_key_values.N.key/value -> logits, present.N.*), found by name on the
// decoder's inputs and outputs:
//  - input_ids (or decoder_input_ids) int64 [batch, tokens]; optional
//    attention_mask (ones over past + new tokens), position_ids (past
//    length onwards), encoder_hidden_states (the encoder's first output),
//    encoder_attention_mask (ones), use_cache_branch (merged decoders: false
//    for the prompt step, true after);
//  - the cache: every input named past_key_values* (or past*) pairs with the
//    output named present* with the same rest of the name
//    (past_key_values.0.decoder.key <- present.0.decoder.key). A past input
//    whose present the decoder lacks (an encoder-decoder's cross-attention
//    keys and values) keeps the value the prompt step gave it: computed once;
//  - logits: the output named logits (else the first), [batch, tokens, vocab].
// The prompt step runs `first` when given (a decoder without past inputs),
// else `decoder` with an empty past (length 0).
//
// Every cache tensor stays on the GPU (onnx_import::Feeds / Fetches). The
// token is chosen by wgnn.sample (ops/sample.cpp) on the logits' last
// position and fed to the next step on the GPU; what comes back to the host
// is one int64 per sequence, every `sync_every` steps (all at the end when 0
// and no end token is set).
//
// The cache is kept at a capacity (Options::cache_buckets, on by default
// where the decoder allows it): the decoder runs on a past of a power-of-two
// capacity C >= 64 holding the L tokens so far, the rows from L on masked
// out by attention_mask (ones for the L tokens and the new one, zeros
// between) and the new token's position given by position_ids, as a static
// cache does in transformers. A plan serves every length up to C: a run of
// 1,024 new tokens builds one plan for the prompt and one per capacity (64,
// 128, ..., 2048), not one per length. After each step the new row of each
// present output (at index C, or at L where GroupQueryAttention writes it
// there) is copied into slot L of the cache (ops/kernels/copy_rows.wgsl);
// past C, the rows move into twice the capacity. Masked rows cost attention
// work: at most twice the keys. A decoder without attention_mask, or
// without position_ids (whose positions would then follow C), or whose
// cache has other dynamic dims than the batch and the length, gets a plan
// per past length, its present outputs fed back as the next past (their
// buffers grown by doubling). Either way plans are kept (max_plans), so a
// second run at the same lengths builds nothing.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "graph/host_tensor.h"
#include "onnx/session.h"

namespace wgnn::generate {

struct Models {
  std::string decoder;  // run every step after the prompt (with past inputs)
  std::string first;    // optional: the prompt step (no past inputs)
  std::string encoder;  // optional: run once, its first output is encoder_hidden_states
  // The cache's head size where the decoder leaves it symbolic (the last
  // dim of past_key_values.N.*: onnxruntime-genai's model builder writes
  // kv_cache_dim). 0: from model.decoder.head_size of the genai_config.json
  // beside the decoder (the builder writes one), needed only then.
  int64_t cache_head_size = 0;
};

struct Options {
  int max_new_tokens = 64;
  // Generation of a sequence ends after it produces one of these (kept in
  // its tokens); the run ends when every sequence has ended.
  std::vector<int64_t> eos;
  // <= 0: greedy. Otherwise softmax at this temperature, after top_k (0:
  // off) and top_p (1: off) filtering, sampled with `seed`.
  double temperature = 0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  // Tokens are read back every this many steps (0: at the end, or every 8
  // steps when eos is set). 1 reads each token as it comes.
  int sync_every = 0;
  // Plans per cache capacity rather than per past length, where the
  // decoder allows it (above); false: a plan per past length.
  bool cache_buckets = true;
  // Called on the host after each readback (every sync_every steps) with
  // the tokens read, per sequence (empty for one that had ended, or where
  // max_new_tokens was reached); not called for a readback with no new
  // token. Returning false ends the run there: every step submitted so far
  // has been read back by then, no further step is submitted, and
  // Result::tokens ends with the tokens of this call (Result::stopped is
  // set; the timings cover the steps run). An exception it throws leaves
  // run(). sync_every = 1 hands over each token as it comes.
  std::function<bool(const std::vector<std::vector<int64_t>>& new_tokens)> on_tokens;
};

struct Result {
  // Per sequence: the new tokens (not the prompt), up to and including an
  // end token.
  std::vector<std::vector<int64_t>> tokens;
  double encoder_ms = 0;  // the encoder run (0 without one)
  double prompt_ms = 0;   // the prompt step (the first token), host to host
  // Per step after the prompt: wall time of the step (host to host where it
  // waited, else until its work was submitted), and host time spent
  // encoding and submitting it.
  std::vector<double> step_ms, step_host_us;
  // Per step after the prompt, the parts of step_host_us (Graph::RunStats
  // of the decoder's and the sampler's runs): writing the inputs, encoding
  // the dispatches (submitting included), and of that the submits alone;
  // step_session_us is the decoder's whole Session::run (plan lookup,
  // checks and bindings included).
  std::vector<double> step_upload_us, step_encode_us, step_submit_us, step_session_us;
  size_t step_dispatches = 0;  // dispatches of the last step (decoder, sampler, cache row copies)
  // From the prompt step's end to the last token on the host: steps whose
  // work was submitted without a wait are counted when the GPU finished
  // them. decode_ms / step_ms.size() is the time per token.
  double decode_ms = 0;
  double total_ms = 0;
  int plans_built = 0;  // plans the sessions built during this run
  // The cache's capacity at the end (0: a plan per past length was used).
  int64_t cache_capacity = 0;
  // Created on the GPU during the steps after the first one after the
  // prompt (which sizes the cache for the run): none once every plan of the
  // run's lengths exists.
  uint64_t steady_buffers = 0, steady_bind_groups = 0, steady_pipelines = 0;
  int waits = 0;        // host waits for the GPU (token readbacks)
  bool stopped = false;  // on_tokens returned false
};

class Generator {
 public:
  Generator(gpu::Context& ctx, const Models& models, onnx_import::SessionOptions options = {});
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // prompt: one row of token ids per sequence, all the same length (>= 1).
  // encoder_input: the encoder's input (required with an encoder).
  Result run(const std::vector<std::vector<int64_t>>& prompt, const Options& options,
             const HostTensor* encoder_input = nullptr);

  // The layout found (for --verbose): one line per role.
  std::string describe() const;
  // Whether runs keep the cache at a capacity (Options::cache_buckets), and
  // why not where they cannot.
  bool buckets_possible() const;
  const std::string& buckets_refused() const;
  onnx_import::Session& decoder() { return *decoder_; }

 private:
  struct Layout;
  struct Sampler;
  struct Buckets;
  gpu::Context& ctx_;
  std::unique_ptr<onnx_import::Session> decoder_, first_, encoder_;
  std::unique_ptr<Layout> dec_layout_, first_layout_;
  std::map<std::string, std::unique_ptr<Sampler>> samplers_;
  // The cache by past input name, the last logits, the token, the tokens
  // not read back yet: kept from run to run, so that a run at lengths seen
  // before creates nothing on the GPU.
  std::map<std::string, DeviceTensor> cache_;
  std::unique_ptr<Buckets> buckets_;
  DeviceTensor logits_, token_, history_;
  gpu::Buffer history_staging_;
  Sampler& sampler_for(const Shape& logits, DType dtype, const Options& o);
};

}  // namespace wgnn::generate
