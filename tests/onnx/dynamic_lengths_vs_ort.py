"""One Session, every sequence length from 1 to 64: the zoo's BART decoder
stand-in (scripts/models, --mini, opset 17) exported with input_ids' length
as the symbolic dim 'seq', run by `wgnn bench-shapes --dim seq=1:64` in one
process with at most 4 plans kept, each keeping one length (the lengths of
one structure are one plan's sizes: --max-plan-sizes 1 keeps the memory
flat), and every length's output compared with
ONNX Runtime's CPU provider (node) on the same inputs, elementwise with the
bart_standin tolerance of tests/onnx/zoo_vs_ort.py.

Also checked, from bench-shapes' JSON:
  - 64 lengths were built and each evicted or kept; never more than 4
    plans kept, nor 4 lengths;
  - the constants on the GPU stay flat: under 1.5x the first plan's (the
    weights are held once; what depends on the length, such as the causal
    mask, goes with its plan, and 4 copies of the weights would be 4x);
  - the later builds are reported, and the total build time.

usage: dynamic_lengths_vs_ort.py WGNN ORT_MODULE_DIR WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

WGNN, ORT_DIR, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "models"))
import compare  # noqa: E402

LENGTHS = range(1, 65)
MAX_PLANS = 4
TOL = (7e-7, 1e-5)  # bart_standin's pair in tests/onnx/zoo_vs_ort.py
problems = []

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "models", "export.py"), "--model", "bart_standin",
                "--mini", "--opset", "17", "--out", WORK, "--dynamic", "input_ids:1:seq"], check=True,
               stdout=subprocess.DEVNULL)
model = os.path.join(WORK, "bart_standin_mini_opset17_dynamic.onnx")
outdir = os.path.join(WORK, "wgnn")
r = subprocess.run([WGNN, "bench-shapes", model, "--dim", f"seq={LENGTHS[0]}:{LENGTHS[-1]}", "--max-plans",
                    str(MAX_PLANS), "--max-plan-sizes", "1", "--runs", "1", "--int-range", "0:1000", "--json", "--output-dir", outdir],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"FAIL wgnn bench-shapes exited {r.returncode}:\n{r.stdout}{r.stderr}")
j = json.loads(r.stdout)
rows = j["shapes"]
if len(rows) != len(LENGTHS):
    problems.append(f"{len(rows)} shapes ran, expected {len(LENGTHS)}")
if max(row["plans"] for row in rows) > MAX_PLANS:
    problems.append(f"more than {MAX_PLANS} plans were kept")
if max(row["plan_sizes"] for row in rows) > MAX_PLANS:
    problems.append(f"more than {MAX_PLANS} lengths were kept")
if rows[-1]["evictions"] != len(LENGTHS) - rows[-1]["plan_sizes"]:
    problems.append(f"{rows[-1]['evictions']} lengths evicted and {rows[-1]['plan_sizes']} kept, "
                    f"expected {len(LENGTHS)} in all")
# The weights are held once: with a copy per plan, 4 plans would hold 4x the
# first plan's constants. What grows is what depends on the length (the
# causal mask, positions), kept with the plans and freed with them.
consts = [row["constants_bytes"] for row in rows]
if max(consts) > 1.5 * min(consts):
    problems.append(f"the constants on the GPU grew from {min(consts)} to {max(consts)} bytes")
if any(row["build_ms"] <= 0 for row in rows):
    problems.append("a length was not built (build_ms 0): the plans are not per length")

worst = 0.0
for k, n in enumerate(LENGTHS):
    case = os.path.join(outdir, str(k))
    ids = np.load(os.path.join(case, "inputs", "input_ids.npy"))
    if ids.shape != (1, n):
        problems.append(f"set {k}: input_ids has shape {ids.shape}, expected (1, {n})")
        continue
    ref = os.path.join(WORK, "ort", str(k))
    specs = [f"{name}={os.path.join(case, 'inputs', name + '.npy')}" for name in ("input_ids", "encoder_hidden_states")]
    compare.run_ort_node(model, specs, ref, ORT_DIR)
    ok, used, max_abs, parts = compare.compare_outputs(["last_hidden_state"], ref, case, TOL)
    worst = max(worst, used)
    if not ok:
        problems.append(f"length {n}: {'; '.join(parts)}")

print(f"{len(rows)} lengths in one session, {j['total_build_ms']:.1f} ms of builds in all (first "
      f"{j['first_build_ms']:.1f} ms, the slowest later one {100 * j['later_build_max_over_first']:.0f}% of it); "
      f"constants {min(consts)}..{max(consts)} bytes; every output within {TOL} of ORT, at most "
      f"{worst:.2f} of the tolerance used")
if problems:
    print("FAIL\n  " + "\n  ".join(problems))
    sys.exit(1)
print("PASS")
