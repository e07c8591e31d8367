"""ISNet (remove-bg's default model) on the GPU machine with each wgnn build:
the npm Dawn (no shader-f16 on NVIDIA: float16 values stored as float32) and,
when given, the Dawn built from source (float16 storage). For each: `wgnn
remove-bg` on the photo at ISNet's 1024x1024, its alpha against numpy pre-
and post-processing around ONNX Runtime's CPU provider (Python onnxruntime),
the two builds' alphas against each other, and `wgnn bench` on the model.

usage: any_adapter_isnet.py --model ISNET.onnx --photo PHOTO --out DIR
                            --wgnn NAME=BINARY [--wgnn NAME=BINARY ...] [--runs N]
Writes DIR/any_adapter_isnet.md and .json; exits 1 when an alpha is more than
2/255 from ONNX Runtime's anywhere, or the builds differ by more than that.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
from isnet_reference import alpha_of, isnet_input  # noqa: E402

TOL = 2  # 8-bit alpha levels, as tests/tools/remove_bg_isnet_test.py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--photo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--wgnn", action="append", required=True, help="NAME=BINARY")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    import onnxruntime as ort
    x, (w, h) = isnet_input(a.photo, 1024)
    t = time.time()
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    want = alpha_of(sess.run(None, {sess.get_inputs()[0].name: x})[0], w, h)
    print(f"ONNX Runtime {ort.__version__} CPU reference: {time.time() - t:.1f} s", flush=True)

    rows, alphas, ok = [], {}, True
    for spec in a.wgnn:
        name, binary = spec.split("=", 1)
        info = json.loads(subprocess.run([binary, "info", "--json"], capture_output=True, text=True,
                                         check=True).stdout)
        mask = os.path.join(a.out, f"mask_{name}.png")
        r = subprocess.run([binary, "remove-bg", a.photo, "-o", os.path.join(a.out, f"cutout_{name}.png"),
                            "--mask", mask, "--model", a.model], capture_output=True, text=True)
        print(r.stdout + r.stderr, flush=True)
        if r.returncode != 0:
            rows.append({"build": name, "error": (r.stderr or r.stdout).strip()[-500:]})
            ok = False
            continue
        got = np.asarray(Image.open(mask)).astype(np.float64)
        alphas[name] = got
        d = np.abs(got - want)
        b = subprocess.run([binary, "bench", a.model, "--runs", str(a.runs), "--warmup", "5", "--json"],
                           capture_output=True, text=True)
        bench = json.loads(b.stdout.strip().splitlines()[-1]) if b.returncode == 0 else {"error": b.stderr[-500:]}
        row = {"build": name, "adapter": info["adapter"], "float16_storage": info["float16_storage"],
               "shader_f16": info["features"]["shader-f16"], "alpha_vs_ort_max": float(d.max()),
               "alpha_vs_ort_mean": float(d.mean()), "bench": bench}
        ok &= d.max() <= TOL
        rows.append(row)
        print(json.dumps(row), flush=True)
    pair = None
    if len(alphas) >= 2:
        (n1, a1), (n2, a2) = list(alphas.items())[:2]
        d = np.abs(a1 - a2)
        pair = {"builds": [n1, n2], "max": float(d.max()), "mean": float(d.mean())}
        ok &= d.max() <= TOL
        print(json.dumps({"between_builds": pair}), flush=True)

    with open(os.path.join(a.out, "any_adapter_isnet.json"), "w") as f:
        json.dump({"rows": rows, "between_builds": pair, "ok": bool(ok)}, f, indent=1)
    lines = ["| build | float16 storage | alpha vs ORT CPU: max / mean (of 255) | load ms | first run ms | "
             "median ms | GPU ms |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['build']} | – | error: {r['error']} | | | | |")
            continue
        bm = r["bench"]
        g = lambda k: f"{bm[k]:.1f}" if isinstance(bm.get(k), (int, float)) else "–"  # noqa: E731
        lines.append(f"| {r['build']} ({r['adapter']}) | {r['float16_storage']} | {r['alpha_vs_ort_max']:.0f} / "
                     f"{r['alpha_vs_ort_mean']:.4f} | {g('load_ms')} | {g('first_run_ms')} | {g('median_ms')} | "
                     f"{g('gpu_ms')} |")
    if pair:
        lines.append("")
        lines.append(f"Alpha, {pair['builds'][0]} against {pair['builds'][1]}: max {pair['max']:.0f}/255, "
                     f"mean {pair['mean']:.4f}.")
    with open(os.path.join(a.out, "any_adapter_isnet.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
