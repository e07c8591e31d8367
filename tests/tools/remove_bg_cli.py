"""`wgnn remove-bg` as a person runs it, on a tiny matting model built with
onnx.helper (mean over RGB, then a sigmoid): the files it writes, the
timing line, and the errors with their exit status.

usage: remove_bg_cli.py WGNN WORKDIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from PIL import Image

WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_matting import alpha_of, matting_model  # noqa: E402


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def run(*args, cwd=WORK):
    p = subprocess.run([WGNN, "remove-bg", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


model = os.path.join(WORK, "m.onnx")
matting_model(model, 64, 64)
photo = os.path.join(WORK, "photo.png")
Image.fromarray(np.full((80, 100, 3), (200, 100, 50), np.uint8)).save(photo)

rc, out, err = run(photo, "-o", "cut.png", "--mask", "mask.png", "--model", model)
check(rc == 0, f"cut-out runs (rc {rc}: {err.strip()[-300:]})")
if rc == 0:
    cut = np.asarray(Image.open(os.path.join(WORK, "cut.png")))
    mask = Image.open(os.path.join(WORK, "mask.png"))
    check(cut.shape == (80, 100, 4), f"the cut-out is 100x80 RGBA: {cut.shape}")
    check((cut[..., :3] == (200, 100, 50)).all(), "its colours are the photo's")
    check(abs(int(cut[..., 3].min()) - alpha_of((200, 100, 50))) <= 1 and
          abs(int(cut[..., 3].max()) - alpha_of((200, 100, 50))) <= 1, "its alpha is the matte")
    check(mask.mode == "L" and mask.size == (100, 80), f"the mask is 8-bit gray 100x80: {mask.mode} {mask.size}")
    check((np.asarray(mask) == cut[..., 3]).all(), "the mask equals the alpha")
    check("load" in out and "first run" in out and "steady" not in out, f"one timing line: {out.strip()}")
    check("loading m.onnx" in err and "isnet pre-processing" in err and "first run" in err,
          f"progress lines: {err.strip()}")

# A gray JPEG, the default output name in the current folder, two runs.
Image.fromarray(np.full((30, 40), 90, np.uint8)).save(os.path.join(WORK, "gray.jpg"), quality=95)
rc, out, err = run("gray.jpg", "--model", model, "--runs", "2", "--quiet")
check(rc == 0 and os.path.exists(os.path.join(WORK, "gray_cutout.png")), f"default output name (rc {rc}: {err})")
check("steady run" in out and err == "", f"--runs 2 reports the steady run, --quiet prints no progress: {out!r} {err!r}")
if rc == 0:
    a = np.asarray(Image.open(os.path.join(WORK, "gray_cutout.png")))
    check(a.shape == (30, 40, 4) and abs(int(a[..., 3].mean()) - alpha_of((90, 90, 90))) <= 1,
          "a gray JPEG is cut out as RGB")

# --only-mask: the matte alone, named _mask.png; --bg-color: a composite.
rc, out, err = run(photo, "--model", model, "--only-mask", "--quiet")
check(rc == 0 and os.path.exists(os.path.join(WORK, "photo_mask.png")), f"--only-mask writes photo_mask.png (rc {rc}: {err})")
if rc == 0:
    m = Image.open(os.path.join(WORK, "photo_mask.png"))
    check(m.mode == "L" and m.size == (100, 80) and abs(int(np.asarray(m).mean()) - alpha_of((200, 100, 50))) <= 1,
          f"--only-mask: 8-bit gray, the matte ({m.mode} {m.size})")
a = alpha_of((200, 100, 50)) / 255
rc, out, err = run(photo, "-o", "white.png", "--model", model, "--bg-color", "255,255,255", "--quiet")
check(rc == 0, f"--bg-color runs (rc {rc}: {err})")
if rc == 0:
    w = np.asarray(Image.open(os.path.join(WORK, "white.png")))
    want = [round(c * a + 255 * (1 - a)) for c in (200, 100, 50)]
    check(w.shape == (80, 100, 3) and (np.abs(w.astype(int) - want) <= 1).all(),
          f"--bg-color 255,255,255: RGB over white, {want} ({w.shape}, {w[0, 0]})")
rc, out, err = run(photo, "-o", "tinted.png", "--model", model, "--bg-color", "0,0,255,128", "--quiet")
if rc == 0:
    t = np.asarray(Image.open(os.path.join(WORK, "tinted.png")))
    ao = a + 128 / 255 * (1 - a)
    check(t.shape == (80, 100, 4) and abs(int(t[0, 0, 3]) - round(255 * ao)) <= 1 and
          abs(int(t[0, 0, 2]) - round((50 * a + 255 * 128 / 255 * (1 - a)) / ao)) <= 1,
          f"--bg-color with alpha: RGBA 'over' ({t.shape}, {t[0, 0]})")
else:
    check(False, f"--bg-color 0,0,255,128 runs (rc {rc}: {err})")

with open(os.path.join(WORK, "notes.png"), "w") as f:
    f.write("not a picture\n")
bad_model = os.path.join(WORK, "gray_in.onnx")
g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 8, 8])])
bad = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
bad.ir_version = 8
onnx.save(bad, bad_model)

for args, want in [
    (["absent.jpg", "--model", model], "absent.jpg': no such file"),
    (["notes.png", "--model", model], "is not an image"),
    ([photo, "-o", "cut.jpg", "--model", model], "ending in .png"),
    ([photo, "-o", "no/such/cut.png", "--model", model], "does not exist"),
    ([photo, "--model", bad_model], "has no image input"),
    ([photo, "--model", os.path.join(WORK, "absent.onnx")], "no such file"),
    ([photo, "--model", model, "--size", "33"], "multiple of 32"),
    ([photo, "--model", model, "--preprocess", "u2net"], "auto, isnet, modnet"),
    ([photo, "--model", model, "--bg-color", "255,255"], "give R,G,B or R,G,B,A"),
    ([photo, "--model", model, "-o", photo], "which is the photo"),
    ([photo, "--model", model, "--bg-color", "256,0,0"], "each 0 to 255"),
    ([photo, "--model", model, "--bg-color", "1,2,3,4,5"], "give R,G,B or R,G,B,A"),
    ([photo, "--model", model, "--bg-color", "red"], "give R,G,B or R,G,B,A"),
    ([photo, "--model", model, "--only-mask", "--bg-color", "0,0,0"], "give one of them"),
    ([photo, "--model", model, "--only-mask", "--mask", "m.png"], "--only-mask writes the matte already"),
]:
    rc, out, err = run(*args)
    check(rc == 1 and want in err, f"{' '.join(args[:3])}: exit 1 with '{want}' (rc {rc}: {err.strip()[-200:]})")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
