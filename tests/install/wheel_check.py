"""Runs inside a fresh environment where only the wheel (and numpy) was
installed: a small model and ISNet through wgnn.InferenceSession, compared
with ONNX Runtime's outputs computed beforehand (tests/install/wheel_test.py),
and wgnn.remove_bg on a photo. Prints one JSON line; exits 1 on a mismatch.

usage: wheel_check.py DIR   (DIR holds what wheel_test.py prepared)
"""
import json
import os
import platform
import sys
import time

import numpy as np

import wgnn

d = sys.argv[1]
result = {
    "python": platform.python_version(),
    "wgnn": wgnn.__version__,
    "module": os.path.dirname(wgnn.__file__),
    "libc": " ".join(platform.libc_ver()),
}
info = wgnn.get_device_info()
result["extension"] = [f for f in os.listdir(result["module"]) if f.startswith("_wgnn")]
result["adapter"] = info.get("adapter", info.get("name"))
result["driver_source"] = info.get("driver_source")
ok = True

# A small network (Conv, Relu, pooling, Gemm, Softmax) against ONNX Runtime.
small = wgnn.InferenceSession(os.path.join(d, "small.onnx"))
x = np.load(os.path.join(d, "small_x.npy"))
(y,) = small.run(None, {small.get_inputs()[0].name: x})
ref = np.load(os.path.join(d, "small_ort.npy"))
result["small_max_abs_err"] = float(np.abs(y - ref).max())
ok &= y.shape == ref.shape and result["small_max_abs_err"] < 1e-4

# ISNet's matte at the prepared size against ONNX Runtime's (the bound of
# tests/python's ISNet test: 5e-3 + 1e-2 |ref|).
isnet = os.path.join(d, "isnet_any_size.onnx")
sess = wgnn.InferenceSession(os.path.join(d, "isnet_free.onnx"))
x = np.load(os.path.join(d, "isnet_x.npy"))
t = time.perf_counter()
(matte,) = sess.run([sess.get_outputs()[0].name], {sess.get_inputs()[0].name: x})
result["isnet_seconds"] = round(time.perf_counter() - t, 2)
ref = np.load(os.path.join(d, "isnet_ort.npy"))
excess = np.abs(matte - ref) - (5e-3 + 1e-2 * np.abs(ref))
result["isnet_max_abs_err"] = float(np.abs(matte - ref).max())
ok &= matte.shape == ref.shape and float(excess.max()) <= 0

# remove_bg: RGBA out, the photo's size, a matte that separates the object
# (at 128x128 ISNet's matte of this drawing spans about 40 to 240).
photo = np.load(os.path.join(d, "photo.npy"))
cut = wgnn.remove_bg(photo, model=isnet, size=int(x.shape[-1]))
alpha = cut[..., 3]
result["remove_bg"] = [list(cut.shape), int(alpha.min()), int(alpha.max())]
ok &= cut.shape == photo.shape[:2] + (4,) and int(alpha.max()) - int(alpha.min()) >= 128
ref_path = os.path.join(d, "remove_bg_ref.npy")
if os.path.exists(ref_path):  # the checkout's own build of the package, where there is one
    diff = np.abs(alpha.astype(int) - np.load(ref_path).astype(int))
    result["remove_bg_alpha_max_diff"] = int(diff.max())
    ok &= int(diff.max()) <= 2

# The CLI the wheel carries (wgnn/bin/wgnn, with cpp-httplib and OpenSSL
# from wgnn.libs/).
import subprocess

cli = subprocess.run([os.path.join(result["module"], "bin", "wgnn"), "--version"], capture_output=True, text=True)
result["cli"] = (cli.stdout + cli.stderr).strip().splitlines()[:1]
ok &= cli.returncode == 0

result["ok"] = bool(ok)
print(json.dumps(result))
sys.exit(0 if ok else 1)
