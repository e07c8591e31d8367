"""Silero VAD, the published voice-activity detector (scripts/setup fetches
it from the npm package in scripts/deps.lock, SILERO_NPM), run by `wgnn
run` and by ONNX Runtime's CPU provider (tests/tools/ort_reference.js) on
the same chunks of a synthetic signal (noise over a tone), each call fed
the state the same runtime returned from the call before, as a streaming
user does. Every output of every call is compared (tests/tools/closeness.py).

- silero_vad_legacy.onnx (v4): the graph is one If on `sr == 16000`, with
  If nested inside each branch and two LSTMs (hidden 64) in the innermost
  ones; h and c are inputs and outputs. Run at 16000 Hz (512-sample
  chunks) and 8000 Hz (256): the summary must say the conditions were
  known at plan time.
- silero_vad_v5.onnx: 25 Ifs nested up to 4 deep (on `sr`, on shapes), 4
  LSTMs (hidden 128) among them, one `state` [2, 1, 128] input and output.

usage: silero_vad_vs_ort.py WGNN ORT_MODULE_DIR MODEL_DIR WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

WGNN, ORT_DIR, MODELS, WORK = (os.path.abspath(a) for a in sys.argv[1:5])
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import closeness  # noqa: E402

CALLS = 3
# Measured on lavapipe (2026-12-01): max error 9.1e-6 (legacy at 8 kHz),
# 8.7e-7 (legacy at 16 kHz), 7.7e-7 (v5). The spectrogram front-end takes log(1 + 2^20 |STFT|): a bin
# whose magnitude is near 0 (a pure tone) amplifies the summation order's
# rounding, so the signal has noise in every bin.
TOL = (2e-5, 1e-4)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def chunk(sr, k):
    n = 512 if sr == 16000 else 256
    rng = np.random.default_rng(sr + k)
    t = np.arange(k * n, (k + 1) * n) / sr
    return (0.3 * np.sin(2 * np.pi * 440 * t) + rng.normal(0, 0.05, n)).astype(np.float32).reshape(1, n)


CASES = [("silero_vad_legacy.onnx", 16000, {"h": (2, 1, 64), "c": (2, 1, 64)}, {"hn": "h", "cn": "c"}),
         ("silero_vad_legacy.onnx", 8000, {"h": (2, 1, 64), "c": (2, 1, 64)}, {"hn": "h", "cn": "c"}),
         ("silero_vad_v5.onnx", 16000, {"state": (2, 1, 128)}, {"stateN": "state"})]

passed = failed = 0
os.environ["WGNN_ORT_MODULE"] = os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")
for model, sr, state_shapes, carried in CASES:
    path = os.path.join(MODELS, model)
    label = f"{model} sr={sr}"
    try:
        states = {who: {k: np.zeros(s, np.float32) for k, s in state_shapes.items()} for who in ("ort", "wgnn")}
        worst = 0.0
        for k in range(CALLS):
            d = os.path.join(WORK, f"{model}_{sr}_{k}")
            os.makedirs(d, exist_ok=True)
            outs = {}
            for who in ("ort", "wgnn"):
                feeds = {"input": chunk(sr, k), "sr": np.array(sr, np.int64), **states[who]}
                specs = []
                for name, v in feeds.items():
                    f = os.path.join(d, f"{who}_{name}.npy")
                    np.save(f, v)
                    specs.append(f"{name}={f}")
                out_dir = os.path.join(d, who)
                if who == "ort":
                    run(["node", os.path.join(HERE, "..", "tools", "ort_reference.js"), path, out_dir] + specs)
                else:
                    log = run([WGNN, "run", path, "--verbose", "--output-dir", out_dir] +
                              sum([["--input", s] for s in specs], []))
                    if "known at plan time, 0 decided by reading a GPU value back" not in log:
                        raise RuntimeError(f"the summary does not say the conditions were known at plan time:\n{log}")
                outs[who] = {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}
                for out_name, in_name in carried.items():
                    states[who][in_name] = outs[who][out_name]
            for name, want in outs["ort"].items():
                r = closeness.check(outs["wgnn"][name], want, *TOL)
                if not r.ok:
                    raise RuntimeError(f"call {k}, {name}: {r}")
                worst = max(worst, r.max_abs)
        print(f"PASS {label} ({CALLS} calls, state carried; max error {worst:.1e})")
        passed += 1
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"FAIL {label}: {e}")
        failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
