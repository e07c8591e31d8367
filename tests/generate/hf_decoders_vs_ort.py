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

usage: hf_decoders_vs_ort.py WGNN ORT_MODULE_DIR [ARCH...]
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "hf_decoders")
PROMPT = "5,17,42,99,3,8,100,77,23,61,12,110,4,33,88,120"
NEW = 64


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    wgnn, ort_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    archs = sys.argv[3:] or sorted(os.listdir(DATA))
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    failed = 0
    for arch in archs:
        folder = os.path.join(DATA, arch)
        model = os.path.join(folder, "decoder_with_past_model.onnx")
        problems = []
        try:
            ref = run(["node", os.path.join(ROOT, "bench/ort_generate.js"), folder, "--prompt", PROMPT, "--new",
                       str(NEW), "--ep", "cpu"], env=env)["tokens"]
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
    print(f"{len(archs) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
