"""`wgnn generate` on decoders as people download them: transformers' own
Llama, Qwen2, Qwen3, Mistral, Phi-3, Gemma 2, Gemma 3 and GPT-2 classes at
small configs with seeded random weights, exported by torch.onnx.export in
Optimum's decoder-with-past layout (scripts/models/hf_decoders.py; the
exports are committed in tests/data/hf_decoders/). For each, against the
same greedy loop in ONNX Runtime's CPU provider (bench/ort_generate.js):
  - 64 new tokens after a 16-token prompt, identical to ONNX Runtime's,
    and varied (at least 4 distinct);
  - the cache at a capacity: 3 plans (the prompt, capacities 64 and 128);
  - a second run in the process builds nothing and gives the same tokens;
  - two sequences at once (--batch 2) each give the same tokens.

The same for onnxruntime-genai's model builder (scripts/models/genai_builder.py,
committed in tests/data/genai_builder/): model.onnx with GroupQueryAttention,
4-bit MatMulNBits at accuracy_level 4 and genai_config.json, run by wgnn as
the builder wrote it. ONNX Runtime's reference runs a copy at accuracy_level
0: at level 4 its CPU kernel quantizes the activations to int8, while
wgnn computes every level in float32 (the level is a least accuracy, which
float32 meets). Gemma 2's export keeps its sliding-window layer's cache in a
window-sized buffer (GroupQueryAttention sliding_window_cache 1), which wgnn
refuses by name: the test checks that refusal.

usage: hf_decoders_vs_ort.py WGNN ORT_MODULE_DIR [ARCH...]   (builder folders as genai_builder/ARCH)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "hf_decoders")
BUILDER = os.path.join(ROOT, "tests", "data", "genai_builder")
# What wgnn refuses, by architecture: the error must name it.
REFUSED = {"genai_builder/gemma2": "sliding_window_cache 1"}
PROMPT = "5,17,42,99,3,8,100,77,23,61,12,110,4,33,88,120"
NEW = 64


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def reference_copy(folder, tmp):
    """The builder's folder with every MatMulNBits at accuracy_level 0 (ONNX
    Runtime's float32 products), its weights inside the one file."""
    import onnx  # Debian's python3-onnx (scripts/setup)

    m = onnx.load(os.path.join(folder, "model.onnx"))
    for n in m.graph.node:
        if n.op_type == "MatMulNBits":
            for a in n.attribute:
                if a.name == "accuracy_level":
                    a.i = 0
    onnx.save(m, os.path.join(tmp, "model.onnx"))
    shutil.copy(os.path.join(folder, "genai_config.json"), tmp)
    return tmp


def main():
    wgnn, ort_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    archs = sys.argv[3:] or (sorted(os.listdir(DATA)) + ["genai_builder/" + a for a in sorted(os.listdir(BUILDER))])
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    failed = 0
    for arch in archs:
        builder = arch.startswith("genai_builder/")
        folder = os.path.join(BUILDER, arch.split("/", 1)[1]) if builder else os.path.join(DATA, arch)
        model = os.path.join(folder, "model.onnx" if builder else "decoder_with_past_model.onnx")
        problems = []
        if arch in REFUSED:
            p = subprocess.run([wgnn, "generate", model, "--prompt", PROMPT, "--max-new-tokens", "4"],
                               capture_output=True, text=True, timeout=900)
            if p.returncode == 0 or REFUSED[arch] not in p.stderr:
                failed += 1
                print(f"FAIL {arch}: expected a refusal naming '{REFUSED[arch]}'; rc {p.returncode}, "
                      f"stderr {p.stderr.strip()[-500:]!r}")
            else:
                print(f"ok   {arch}: refused by name ({p.stderr.strip().splitlines()[-1][:200]})")
            continue
        try:
            with tempfile.TemporaryDirectory() as tmp:
                ref_folder = reference_copy(folder, tmp) if builder else folder
                ref = run(["node", os.path.join(ROOT, "bench/ort_generate.js"), ref_folder, "--prompt", PROMPT,
                           "--new", str(NEW), "--ep", "cpu"], env=env)["tokens"]
            got = run([wgnn, "generate", model, "--prompt", PROMPT, "--max-new-tokens", str(NEW), "--json",
                       "--repeat", "2"])
            toks = got["tokens"][0]
            if toks != ref:
                first = next((i for i, (a, b) in enumerate(zip(toks, ref)) if a != b), min(len(toks), len(ref)))
                problems.append(f"tokens differ from ONNX Runtime's from token {first}: wgnn {toks[first:first + 8]}, "
                                f"ORT {ref[first:first + 8]}")
            if len(set(ref)) < 4:
                problems.append(f"the reference repeats itself ({len(set(ref))} distinct tokens): a weak test")
            if got["first_run"]["plans_built"] != 3 or got["first_run"]["cache_capacity"] != 128:
                problems.append(f"expected 3 plans and the cache at capacity 128: {got['first_run']['plans_built']} "
                                f"plans, capacity {got['first_run']['cache_capacity']}")
            if got["last_run"]["plans_built"] != 0:
                problems.append(f"the second run built {got['last_run']['plans_built']} plans")
            two = run([wgnn, "generate", model, "--prompt", PROMPT, "--max-new-tokens", str(NEW), "--json",
                       "--batch", "2"])["tokens"]
            if two != [ref, ref]:
                problems.append("--batch 2: the sequences differ from the single one's")
        except Exception as e:  # noqa: BLE001 - every failure is reported per architecture
            problems.append(str(e))
        if problems:
            failed += 1
            print(f"FAIL {arch}: " + "; ".join(problems))
        else:
            print(f"ok   {arch}: {NEW} tokens as ONNX Runtime's ({len(set(ref))} distinct), 3 plans, second run "
                  f"built nothing, batch 2 checked")
    if not sys.argv[3:]:
        # The builder's model without its genai_config.json: the cache's head
        # size is unknown, and the error says where it comes from.
        with tempfile.TemporaryDirectory() as tmp:
            for f in ("model.onnx", "model.onnx.data"):
                shutil.copy(os.path.join(BUILDER, "llama", f), tmp)
            p = subprocess.run([wgnn, "generate", os.path.join(tmp, "model.onnx"), "--prompt", PROMPT],
                               capture_output=True, text=True, timeout=900)
            want = "leaves its head size symbolic ('kv_cache_dim')"
            if p.returncode == 0 or want not in p.stderr or "genai_config.json" not in p.stderr:
                failed += 1
                print(f"FAIL no genai_config.json: expected an error naming {want!r} and genai_config.json; "
                      f"rc {p.returncode}, stderr {p.stderr.strip()[-500:]!r}")
            else:
                print("ok   genai_builder/llama without genai_config.json: the head size asked for by name")
        archs = archs + ["(no genai_config.json)"]
    print(f"{len(archs) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
