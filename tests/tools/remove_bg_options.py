"""`wgnn remove-bg` options as rembg users know them, on the tiny matting
model (mean over RGB, then a sigmoid): --post-process against OpenCV doing
what rembg's post_process_mask does (an opening with the 3x3 elliptic
kernel, a 5x5 Gaussian blur with sigma 2, a threshold at 127), and the
model presets by name (isnet, modnet) found in $WGNN_HOME/models, with the
options checked against the model.

usage: remove_bg_options.py WGNN WORKDIR
"""
import os
import shutil
import subprocess
import sys

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper
from PIL import Image

WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_matting import matting_model  # noqa: E402


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def run(*args, env=None):
    p = subprocess.run([WGNN, "remove-bg", *args], cwd=WORK, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr


def free_size_model(path):
    """The tiny model with free height and width: MODNet's kind."""
    dims = [1, 3, "h", "w"]
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["input"], ["mean"], axes=[1], keepdims=1),
         helper.make_node("Sigmoid", ["mean"], ["output"])],
        "matting", [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, "h", "w"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


model = os.path.join(WORK, "m.onnx")
matting_model(model, 96, 96)  # the photo's size: the matte is not resized

# A photo whose matte crosses 127 everywhere it changes: dark ground (alpha
# 96), a bright subject (158), specks of one pixel (removed by the opening),
# a thin line, ragged edges and a gradient (the blur decides).
rng = np.random.default_rng(7)
photo = np.zeros((96, 96, 3), np.uint8)
photo[20:70, 15:60] = 250
photo[30:40, 60:80] = 250
photo[75, 10:90] = 250                      # a line one pixel thin
ys, xs = rng.integers(0, 96, 60), rng.integers(0, 96, 60)
photo[ys, xs] = 250                         # specks
photo[20:70, 15:60][rng.random((50, 45)) < 0.05] = 0  # holes in the subject
photo[80:96, :, :] = np.linspace(60, 200, 96, dtype=np.uint8)[None, :, None]  # a gradient
Image.fromarray(photo).save(os.path.join(WORK, "photo.png"))

rc, _, err = run("photo.png", "-o", "raw.png", "--only-mask", "--model", model, "--quiet")
check(rc == 0, f"--only-mask runs ({err.strip()[-200:]})")
rc, _, err = run("photo.png", "-o", "post.png", "--only-mask", "--post-process", "--model", model, "--quiet")
check(rc == 0, f"--only-mask --post-process runs ({err.strip()[-200:]})")
raw = np.asarray(Image.open(os.path.join(WORK, "raw.png")))
post = np.asarray(Image.open(os.path.join(WORK, "post.png")))

# The reference: OpenCV on the raw matte, as rembg calls it.
kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
opened = cv2.morphologyEx(raw, cv2.MORPH_OPEN, kernel)
blurred = cv2.GaussianBlur(opened, (5, 5), sigmaX=2, sigmaY=2, borderType=cv2.BORDER_DEFAULT)
want = np.where(blurred < 127, 0, 255).astype(np.uint8)
check(set(np.unique(post)) <= {0, 255}, f"--post-process gives a hard matte: values {np.unique(post)[:8]}")
check(len(np.unique(raw)) > 2 and (raw != post).any(), "the raw matte is soft and the post-processed one differs")
# OpenCV blurs 8-bit images in fixed point; a blurred value at 126 or 127
# may round to the other side of the threshold in double precision.
diff = post != want
borderline = (blurred == 126) | (blurred == 127)
check(not (diff & ~borderline).any(),
      f"--post-process equals OpenCV's opening, blur and threshold ({int(diff.sum())} pixels differ, "
      f"{int((diff & ~borderline).sum())} of them not at the threshold)")
check(int(diff.sum()) <= 10, f"at most a few borderline pixels differ ({int(diff.sum())})")
check(post[ys[0], xs[0]] == 0 or photo[max(ys[0] - 1, 0):ys[0] + 2, max(xs[0] - 1, 0):xs[0] + 2].mean() > 100,
      "a lone speck is removed")
check((post[25:65, 20:55] == 255).mean() > 0.99, "the subject stays opaque, its holes filled by the blur")

# The cut-out with --post-process: its alpha is the post-processed matte.
rc, _, err = run("photo.png", "-o", "cut.png", "--post-process", "--model", model, "--quiet")
cut = np.asarray(Image.open(os.path.join(WORK, "cut.png")))
check(rc == 0 and cut.shape == (96, 96, 4) and (cut[..., 3] == post).all(), "the cut-out's alpha is that matte")

# Presets by name, from $WGNN_HOME/models.
home = os.path.join(WORK, "home")
os.makedirs(os.path.join(home, "models"))
env = {"WGNN_HOME": home, "XDG_CACHE_HOME": os.path.join(WORK, "cache")}
rc, _, err = run("photo.png", "-o", "mod.png", "--model", "modnet", env=env)
check(rc == 1 and "no modnet model found" in err and os.path.join(home, "models") in err and "modnet.onnx" in err,
      f"--model modnet without its file: a clear error naming where it looked ({err.strip()[-300:]})")
check("loading" not in err, "... before anything is loaded")
free_size_model(os.path.join(home, "models", "modnet.onnx"))
rc, _, err = run("photo.png", "-o", "mod.png", "--model", "modnet", "--size", "64", env=env)
check(rc == 0 and "loading modnet.onnx" in err and "modnet pre-processing" in err,
      f"--model modnet finds $WGNN_HOME/models/modnet.onnx, MODNet pre-processing ({err.strip()[-300:]})")
rc, _, err = run("photo.png", "-o", "mod.png", "--model", "modnet", "--preprocess", "isnet", env=env)
check(rc == 1 and "--preprocess isnet with --model modnet" in err and "loading" not in err,
      f"--preprocess isnet with the modnet preset is refused up front ({err.strip()[-200:]})")
matting_model(os.path.join(home, "models", "modnet.onnx"), 64, 64)  # a fixed size: not MODNet's kind
rc, _, err = run("photo.png", "-o", "mod.png", "--model", "modnet", env=env)
check(rc == 1 and "has a fixed size" in err, f"a fixed-size model as modnet.onnx is refused ({err.strip()[-200:]})")
matting_model(os.path.join(home, "models", "isnet.onnx"), 32, 32)
rc, _, err = run("photo.png", "-o", "is.png", "--model", "isnet", env=env)
check(rc == 0 and "loading isnet.onnx" in err and "isnet pre-processing: input 'input' 32x32" in err,
      f"--model isnet finds $WGNN_HOME/models/isnet.onnx ({err.strip()[-300:]})")
rc, _, err = run("photo.png", "-o", "is.png", "--model", "isnet", "--preprocess", "modnet", env=env)
check(rc == 1 and "--preprocess modnet with --model isnet" in err, f"--preprocess modnet with isnet refused")
rc, _, err = run("photo.png", "-o", "is.png", "--model", "nonesuch", env=env)
check(rc == 1 and "no such file" in err and "isnet, modnet" in err, f"an unknown name lists the presets ({err.strip()})")
shutil.copy(model, os.path.join(WORK, "isnet"))
rc, _, err = run("photo.png", "-o", "is.png", "--model", "./isnet", env=env)
check(rc == 0 and "isnet pre-processing: input 'input' 96x96" in err, "a file named like a preset, given as ./isnet")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
