"""Background removal the way a Python user writes it with ONNX Runtime's
WebGPU execution provider: a loop over a folder's photos, each decoded,
turned upright (EXIF), resized to the model's input, normalized as
remove-bg does for ISNet ((x - 128) / 256), run (the matte alone is
fetched), the matte clamped and resized back to the photo, its alpha
multiplied by the photo's own, and the cut-out written as an RGBA PNG.
Pillow and numpy on one thread: the peer of `wgnn remove-bg DIR`.

usage: ort_remove_bg_loop.py MODEL PHOTO_DIR OUT_DIR [--size 1024]
                             [--provider webgpu|cpu] [--json FILE]

Prints the rate after the first photo (which pays for the session's
first-run work) and the per-photo median of each stage in ms; --json
writes the same as one object.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from PIL import Image, ImageOps

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("photos")
ap.add_argument("out")
ap.add_argument("--size", type=int, default=1024, help="the model's input side (ISNet: 1024)")
ap.add_argument("--provider", choices=["webgpu", "cpu"], default="webgpu")
ap.add_argument("--json", help="write the summary as JSON here")
args = ap.parse_args()

import onnxruntime as ort  # noqa: E402  (after argparse: --help works without it)

want = {"webgpu": "WebGpuExecutionProvider", "cpu": "CPUExecutionProvider"}[args.provider]
if want not in ort.get_available_providers():
    sys.exit(f"ort_remove_bg_loop: onnxruntime {ort.__version__} has no {want} "
             f"(it has {ort.get_available_providers()}); install onnxruntime-webgpu")
t = time.perf_counter()
sess = ort.InferenceSession(args.model, providers=[want])
load_s = time.perf_counter() - t
if sess.get_providers()[0] != want:
    sys.exit(f"ort_remove_bg_loop: the session runs on {sess.get_providers()}, not {want}")
inp = sess.get_inputs()[0].name
matte_name = sess.get_outputs()[0].name  # the matte, as remove-bg reads it

names = sorted(n for n in os.listdir(args.photos)
               if n.lower().endswith((".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff")))
if not names:
    sys.exit(f"ort_remove_bg_loop: no photos in {args.photos}")
os.makedirs(args.out, exist_ok=True)
S = args.size
stages = {k: [] for k in ("decode", "pre", "run", "post", "encode")}
t_start = time.perf_counter()
t_after_first = None
for k, name in enumerate(names):
    t0 = time.perf_counter()
    im = ImageOps.exif_transpose(Image.open(os.path.join(args.photos, name)))
    has_alpha = im.mode in ("RGBA", "LA") or (im.mode == "P" and "transparency" in im.info)
    im = im.convert("RGBA" if has_alpha else "RGB")
    im.load()
    t1 = time.perf_counter()
    rgb = im.convert("RGB") if has_alpha else im
    x = np.asarray(rgb.resize((S, S), Image.BILINEAR), dtype=np.float32)
    x = np.ascontiguousarray(((x - 128.0) / 256.0).transpose(2, 0, 1)[None])
    t2 = time.perf_counter()
    m = sess.run([matte_name], {inp: x})[0]
    t3 = time.perf_counter()
    m = np.nan_to_num(np.clip(m.reshape(m.shape[-2], m.shape[-1]).astype(np.float32), 0.0, 1.0))
    m = np.asarray(Image.fromarray(m, mode="F").resize(im.size, Image.BILINEAR))
    alpha = np.clip(np.rint(255.0 * m), 0, 255).astype(np.uint8)
    if has_alpha:
        own = np.asarray(im)[..., 3].astype(np.uint32)
        alpha = ((alpha.astype(np.uint32) * own + 127) // 255).astype(np.uint8)
    cut = np.dstack([np.asarray(rgb), alpha])
    t4 = time.perf_counter()
    out = os.path.join(args.out, os.path.splitext(name)[0] + "_cutout.png")
    tmp = out + ".tmp"
    Image.fromarray(cut, "RGBA").save(tmp, format="PNG")
    os.replace(tmp, out)
    t5 = time.perf_counter()
    if k == 0:
        t_after_first = t5
        first_s = t5 - t0
        continue  # the first photo pays for the session's first run
    for key, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
        stages[key].append(dt)
t_end = time.perf_counter()
n = len(names)
rate = (n - 1) / (t_end - t_after_first) if n > 1 else float("nan")
med = {k: 1e3 * float(np.median(v)) if v else None for k, v in stages.items()}
summary = {"tool": "ort-webgpu-python" if args.provider == "webgpu" else "ort-cpu-python",
           "onnxruntime": ort.__version__, "provider": sess.get_providers()[0], "photos": n, "size": S,
           "load_s": load_s, "first_photo_s": first_s, "seconds": t_end - t_start,
           "photos_per_s_after_first": rate, "median_ms": med}
print(f"ort loop ({ort.__version__}, {sess.get_providers()[0]}): {n} photos in {t_end - t_start:.2f} s "
      f"(load {load_s:.2f} s, first photo {first_s:.2f} s), {rate:.2f} photos/s after the first")
print("ort loop: per photo, median ms: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items() if v is not None))
if args.json:
    with open(args.json, "w") as f:
        json.dump(summary, f)
