"""`wgnn generate` against the same greedy loop in ONNX Runtime's CPU provider
(bench/ort_generate.js, onnxruntime-node) on the decoders of
scripts/models/decoders.py at their mini size, exported with PyTorch at test
time: decoder-only models whose prompt runs with an empty cache (gpt; llama
and qwen2, Llama's and Qwen2's blocks as transformers writes them, whose
rotary cat([freqs, freqs]) and caches are aligned for wgnn's views), and
two encoder-decoders whose cross-attention keys and values are computed once
(bart, whisper); and a decoder in the layout of ONNX Runtime's generative-AI
model builder (scripts/models/genai_decoder.py, written with onnx.helper:
com.microsoft GroupQueryAttention with rotary positions, 4-bit MatMulNBits,
SkipSimplifiedLayerNormalization; seqlens_k and total_sequence_length
computed from attention_mask), its prompt run with an empty cache. For each:
  - 64 new tokens after a 16-token prompt, identical to ONNX Runtime's;
  - the tokens vary (at least 4 distinct), so a cache that is not carried
    would show;
  - later runs in the same process build no plan and give the same
    tokens, and the third creates no buffer, bind group or pipeline during
    its steps (--repeat 3: where a decoder gets a graph per cache length,
    bart and whisper here, the lengths take their buffers from the
    Session's one set, which grew with the later lengths, so the second run
    makes each earlier length's bind groups again, once);
  - two sequences at once (--batch 2) each give the same tokens;
  - bart and whisper: the pair merged into one model as Optimum merges it
    (scripts/models/merge_decoder.py: an If on use_cache_branch) gives the
    same tokens;
  - sampling (temperature, top-k, top-p) is reproducible by seed and
    differs between seeds;
  - the decoder-only models (attention_mask and position_ids, or
    GroupQueryAttention) keep their cache at a capacity: the first run
    builds 3 plans (the prompt, capacities 64 and 128: lengths 16 to 79)
    and ends at capacity 128, and a plan per length (--exact-cache, 64
    plans) gives the same tokens; bart and whisper (no attention_mask) get
    a plan per length.

usage: generate_vs_ort.py WGNN ORT_MODULE_DIR WORKDIR
       (GENERATE_VS_ORT_ONLY=llama,qwen2 runs only the models named)
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WGNN, ORT_DIR, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
PROMPT = "5,17,42,99,3,8,150,77,23,61,12,190,4,33,88,120"
NEW = 64


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return p.stdout


def wgnn_generate(folder, *extra):
    args = [WGNN, "generate", os.path.join(folder, "decoder_with_past_model.onnx"), "--prompt", PROMPT,
            "--max-new-tokens", str(NEW), "--json", *extra]
    if os.path.exists(os.path.join(folder, "decoder_model.onnx")):
        args += ["--first", os.path.join(folder, "decoder_model.onnx")]
    if os.path.exists(os.path.join(folder, "encoder_model.onnx")):
        args += ["--encoder", os.path.join(folder, "encoder_model.onnx"), "--encoder-input",
                 os.path.join(folder, "encoder_input.npy")]
    return json.loads(run(args).strip().splitlines()[-1])


def main():
    os.makedirs(WORK, exist_ok=True)
    run(["/usr/bin/python3", os.path.join(ROOT, "scripts/models/decoders.py"), "--model", "all", "--size", "mini",
         "--out", WORK])
    run(["/usr/bin/python3", os.path.join(ROOT, "scripts/models/genai_decoder.py"), "--out", WORK])
    env = dict(os.environ, NODE_PATH=os.path.join(ORT_DIR, "node_modules"))
    passed = failed = 0
    only = os.environ.get("GENERATE_VS_ORT_ONLY", "")
    for model in ("gpt", "llama", "qwen2", "bart", "whisper", "genai"):
        if only and model not in only.split(","):
            continue
        folder = os.path.join(WORK, model)
        merged_too = os.path.exists(os.path.join(folder, "decoder_model.onnx"))
        problems = []
        try:
            ref = json.loads(run(["node", os.path.join(ROOT, "bench/ort_generate.js"), folder, "--prompt", PROMPT,
                                  "--new", str(NEW), "--ep", "cpu"], env=env).strip().splitlines()[-1])["tokens"]
            got = wgnn_generate(folder, "--repeat", "3")
            toks = got["tokens"][0]
            if toks != ref:
                first = next((i for i, (a, b) in enumerate(zip(toks, ref)) if a != b), min(len(toks), len(ref)))
                problems.append(f"tokens differ from ONNX Runtime's from token {first}: wgnn {toks[first:first + 8]}, "
                                f"ORT {ref[first:first + 8]}")
            if len(set(ref)) < 4:
                problems.append(f"the reference repeats itself ({len(set(ref))} distinct tokens): a weak test")
            if got["last_run"]["plans_built"] != 0:
                problems.append(f"the third run built {got['last_run']['plans_built']} plans (expected 0)")
            made = got["last_run"]["steady_created"]
            if any(made.values()):
                problems.append(f"the third run's steps created GPU objects: {made}")
            if got["runs"] != 3 or got["last_run"]["steps"] != NEW - 1:
                problems.append(f"expected 3 runs of {NEW - 1} steps after the prompt: {got['runs']} runs, "
                                f"{got['last_run']['steps']} steps")
            first_run = got["first_run"]
            if model in ("gpt", "llama", "qwen2", "genai"):
                if first_run["cache_capacity"] != 128 or first_run["plans_built"] != 3:
                    problems.append(f"expected the cache at capacity 128 after 3 plans: capacity "
                                    f"{first_run['cache_capacity']}, {first_run['plans_built']} plans")
                exact = wgnn_generate(folder, "--exact-cache")
                if exact["tokens"][0] != ref:
                    problems.append("--exact-cache (a plan per length) gives other tokens than ONNX Runtime's")
                if exact["first_run"]["plans_built"] != NEW or exact["first_run"]["cache_capacity"] != 0:
                    problems.append(f"--exact-cache built {exact['first_run']['plans_built']} plans (expected {NEW})")
            elif first_run["cache_capacity"] != 0 or first_run["plans_built"] != NEW:
                problems.append(f"without attention_mask: expected a plan per length ({NEW}), got "
                                f"{first_run['plans_built']} plans at capacity {first_run['cache_capacity']}")
            if merged_too:
                # The pair merged as Optimum merges it (an If on use_cache_branch):
                # the prompt step and the later ones through the one file.
                run(["/usr/bin/python3", os.path.join(ROOT, "scripts/models/merge_decoder.py"), folder])
                args = [WGNN, "generate", os.path.join(folder, "decoder_model_merged.onnx"), "--prompt", PROMPT,
                        "--max-new-tokens", str(NEW), "--json"]
                if os.path.exists(os.path.join(folder, "encoder_model.onnx")):
                    args += ["--encoder", os.path.join(folder, "encoder_model.onnx"), "--encoder-input",
                             os.path.join(folder, "encoder_input.npy")]
                merged = json.loads(run(args).strip().splitlines()[-1])["tokens"][0]
                if merged != ref:
                    problems.append("the merged decoder (If on use_cache_branch) gives other tokens than ONNX "
                                    "Runtime's on the pair")
            two = wgnn_generate(folder, "--batch", "2", "--unchecked")["tokens"]
            if two != [ref, ref]:
                problems.append("--batch 2: the sequences differ from the single one's")
            sample = ["--temperature", "0.9", "--top-k", "40", "--top-p", "0.95"]
            s1 = wgnn_generate(folder, *sample, "--seed", "11")["tokens"][0]
            s1b = wgnn_generate(folder, *sample, "--seed", "11")["tokens"][0]
            s2 = wgnn_generate(folder, *sample, "--seed", "12")["tokens"][0]
            if s1 != s1b:
                problems.append("sampling with one seed gave two different sequences")
            if s1 == s2:
                problems.append("sampling with seeds 11 and 12 gave the same 64 tokens")
            if any(not (0 <= t < 211) for t in s1 + s2):
                problems.append("a sampled token is outside the vocabulary")
        except Exception as e:  # noqa: BLE001 - every failure is reported per model
            problems.append(str(e))
        if problems:
            failed += 1
            print(f"FAIL {model}: " + "; ".join(problems))
        else:
            passed += 1
            print(f"ok   {model}: {NEW} tokens as ONNX Runtime's ({len(set(ref))} distinct), second run built "
                  f"nothing, batch 2, sampling{' and the merged decoder' if merged_too else ''} checked")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
