"""`wgnn remove-bg` on ISNet against an independent pipeline: the same
pre-processing written in numpy (area filter shrinking, bilinear growing,
(x - 128) / 256), ONNX Runtime's CPU provider for the network, and the same
post-processing; the two alphas must agree within 2/255 per pixel.
Runs ISNet at 320x320 (the derived any-size model) to stay quick on a CPU.

usage: remove_bg_isnet_test.py WGNN ORT_MODULE_DIR ISNET_ANY_SIZE.onnx WORKDIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from isnet_reference import alpha_of, free_size_copy, isnet_input  # noqa: E402

WGNN, ORT_DIR, MODEL, WORK = (os.path.abspath(a) for a in sys.argv[1:5])
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import closeness  # noqa: E402
SIZE = 320
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
import imageio  # noqa: E402  (Debian's python3-imageio ships the photo)

photo = os.path.join(os.path.dirname(imageio.__file__), "resources", "images", "astronaut.png")
if not os.path.exists(photo):
    print(f"skipped: {photo} is missing")
    sys.exit(77)


x, (W, H) = isnet_input(photo, SIZE)
np.save(os.path.join(WORK, "input.npy"), x)

# ONNX Runtime checks the declared 1024x1024: a copy with a free height and width.
free = os.path.join(WORK, "isnet_free.onnx")
free_size_copy(MODEL, free)
env = dict(os.environ, WGNN_ORT_MODULE=os.path.join(ORT_DIR, "node_modules", "onnxruntime-node"))
r = subprocess.run(["node", os.path.join(HERE, "ort_reference.js"), free, os.path.join(WORK, "ort"),
                    "input=" + os.path.join(WORK, "input.npy")], capture_output=True, text=True, env=env)
if r.returncode != 0:
    sys.exit(f"ONNX Runtime failed: {r.stderr[-2000:]}")
want = alpha_of(np.load(os.path.join(WORK, "ort", "output.npy")), W, H)

# Under WGNN_LIMITS=default (ctest remove_bg_isnet_default_limits_vs_onnxruntime)
# the device has no shader-f16: the run must take the float32 storage of
# float16 values, or this entry tests nothing new.
import json  # noqa: E402

info = json.loads(subprocess.run([WGNN, "info", "--json"], capture_output=True, text=True, check=True).stdout)
storage = info["float16_storage"]
if os.environ.get("WGNN_LIMITS") == "default" and storage != "float32":
    sys.exit(f"FAIL: WGNN_LIMITS=default but float16 storage is {storage!r}")
print(f"float16 values stored as {storage} (limits: {info['limits_requested']})")

mask = os.path.join(WORK, "mask.png")
r = subprocess.run([WGNN, "remove-bg", photo, "-o", os.path.join(WORK, "cut.png"), "--mask", mask,
                    "--model", MODEL, "--size", str(SIZE)], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"wgnn remove-bg failed: {r.stderr[-2000:]}")
print(r.stdout.strip())
got = np.asarray(Image.open(mask)).astype(np.float64)
# Every alpha within 2/255 of the reference's (tests/tools/closeness.py), and
# the mean difference under 0.05/255. Measured on lavapipe (2026-12-01): at
# most 1/255 (a rounding step of the 8-bit alpha), mean 0.025/255.
close = closeness.check(got, want, 2.0, 0.0)
diff = np.abs(got - want) if got.shape == want.shape else np.full(1, np.inf)
print(f"alpha vs numpy + ONNX Runtime: {close}, mean {diff.mean():.4f}, subject {np.mean(got > 128):.3f} of the photo")
ok = close.ok and diff.mean() < 0.05
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
