"""The published uint8 ISNet through the wgnn CLI against ONNX Runtime's CPU
provider (Python) on the 21 inputs of tests/python/test_isnet_quint8.py, at
any size: the same criterion (every output within 1e-3 of the range of ONNX
Runtime's, a range of at least 0.01) where the Python package is not built (the GPU machine).

    python3 bench/isnet_quint8_check.py WGNN ISNET_QUINT8.onnx WORKDIR [--size 320]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import test_isnet_quint8 as cases  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wgnn")
    ap.add_argument("model")
    ap.add_argument("work")
    ap.add_argument("--size", type=int, default=320)
    a = ap.parse_args()
    cases.SIZE = a.size
    os.makedirs(a.work, exist_ok=True)
    free = cases.free_quint8_model(a.model, a.work)
    ref = ort.InferenceSession(free, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    bad, worst = 0, 0.0
    for case, rgb in cases.inputs().items():
        x = cases.as_input(rgb)
        inp = os.path.join(a.work, "input.npy")
        np.save(inp, x)
        out = os.path.join(a.work, "out")
        subprocess.run([a.wgnn, "run", free, "--input", "input=" + inp, "--output-dir", out], check=True,
                       capture_output=True)
        errs = []
        for name, r in zip(names, ref.run(names, {"input": x})):
            g = np.load(os.path.join(out, name.replace("/", "_") + ".npy"))
            errs.append(float(np.abs(g.astype(np.float64) - r).max()) / max(float(r.max() - r.min()), 1e-2))
        worst = max(worst, max(errs))
        ok = max(errs) <= 1e-3
        bad += not ok
        print(json.dumps({"input": case, "size": a.size, "worst_of_range": max(errs), "ok": ok}), flush=True)
    print(f"isnet_quint8_check: {bad} of {len(cases.inputs())} inputs over 1e-3 of an output's range; "
          f"worst {worst:.2e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
