"""Every output of a list of models with wgnn's views on (the default) and
off (WGNN_NO_VIEWS=1: slices, splits and concatenations copy), same seeded
inputs: a view only changes where a value is stored, never how it is
computed, so the outputs must be equal bit for bit. Prints one line per model
and a table row; exits non-zero on any difference or failure.

    python3 bench/views_on_off.py WGNN MODEL[::NAME=DIMS,...] ...
    python3 bench/views_on_off.py WGNN --zoo DIR --decoders DIR --published DIR

--zoo DIR exports the zoo's mini models (scripts/models/export.py) into DIR;
--decoders DIR exports the decoders (scripts/models/decoders.py, mini) and
runs each with a past of 6 and one new token, as a decoding step does;
--published DIR takes isnet_any_size.onnx (at 320x320) and isnet_quint8.onnx
from DIR (scripts/setup's .deps/models).
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(wgnn, model, shapes, out, views):
    env = dict(os.environ)
    if not views:
        env["WGNN_NO_VIEWS"] = "1"
    cmd = [wgnn, "run", model, "--output-dir", out, "--seed", "3", "--int-range", "0:100"]
    for s in shapes:
        cmd += ["--shape", s]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-600:])
    return {f[:-4]: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out))}


def models_from(a):
    ms = []
    for spec in a.models:
        path, _, shapes = spec.partition("::")
        ms.append((path, [s for s in shapes.split(",") if s]))
    py = "/usr/bin/python3"
    if a.zoo:
        # Models whose export needs what this Python lacks (transformers) are
        # left out; those over 100 MB too (minutes each on a CPU driver).
        subprocess.run([py, os.path.join(ROOT, "scripts/models/export.py"), "--model", "all", "--mini", "--opset", "17",
                        "--out", a.zoo], capture_output=True)
        ms += [(p, []) for p in sorted(glob.glob(os.path.join(a.zoo, "*_mini_opset17.onnx")))
               if os.path.getsize(p) < 100 << 20]
    if a.decoders:
        subprocess.run([py, os.path.join(ROOT, "scripts/models/decoders.py"), "--model", "all", "--size", "mini",
                        "--out", a.decoders], check=True, capture_output=True)
        step = ["input_ids=1x1", "attention_mask=1x7", "position_ids=1x1"]
        for m in ("gpt", "llama", "qwen2"):
            ms.append((os.path.join(a.decoders, m, "decoder_with_past_model.onnx"),
                       step + [f"past_key_values.{i}.{kv}=1x{2 if m != 'gpt' else 4}x6x{32 if m != 'gpt' else 12}"
                               for i in range(2) for kv in ("key", "value")]))
        for m in ("bart", "whisper"):
            ms.append((os.path.join(a.decoders, m, "decoder_with_past_model.onnx"),
                       ["input_ids=1x1"] + [f"past_key_values.{i}.{w}.{kv}=1x4x{6 if w == 'decoder' else 12}x12"
                                            for i in range(2) for w in ("decoder", "encoder") for kv in ("key", "value")]))
    if a.published:
        ms.append((os.path.join(a.published, "isnet_any_size.onnx"), ["input=1x3x320x320"]))
        ms.append((os.path.join(a.published, "isnet_quint8.onnx"), []))
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wgnn")
    ap.add_argument("models", nargs="*")
    ap.add_argument("--zoo")
    ap.add_argument("--decoders")
    ap.add_argument("--published")
    a = ap.parse_args()
    bad = 0
    print("| model | outputs | views on vs off |")
    print("|---|---:|---|")
    for model, shapes in models_from(a):
        name = os.path.relpath(model, os.path.dirname(os.path.dirname(model)))
        try:
            with tempfile.TemporaryDirectory() as d:
                on = run(a.wgnn, model, shapes, os.path.join(d, "on"), True)
                off = run(a.wgnn, model, shapes, os.path.join(d, "off"), False)
            diff = [k for k in on if on[k].shape != off[k].shape or on[k].tobytes() != off[k].tobytes()]
            verdict = "equal bit for bit" if not diff else f"DIFFER in {', '.join(diff[:4])}"
            bad += bool(diff)
            print(f"| {name} | {len(on)} | {verdict} |", flush=True)
        except Exception as e:  # noqa: BLE001 - each model is reported
            bad += 1
            print(f"| {name} | - | FAILED: {str(e).splitlines()[-1] if str(e) else e} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
