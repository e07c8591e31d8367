"""Writes N distinct photo-like JPEGs of W x H (smooth light, a few shapes,
sensor-like noise) into a folder, for remove-bg's throughput runs.

usage: make_photos.py DIR N [W H]
"""
import os
import sys

import numpy as np
from PIL import Image

out, n = sys.argv[1], int(sys.argv[2])
w, h = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (1024, 768)
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
for i in range(n):
    base = rng.uniform(40, 200, 3)
    tilt = rng.uniform(-0.1, 0.1, 3)
    img = base[None, None, :] + tilt[None, None, :] * (xx[..., None] - w / 2) + 0.05 * (yy[..., None] - h / 2)
    for _ in range(4):  # ellipses: the "subjects"
        cx, cy = rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h
        rx, ry = rng.uniform(0.05, 0.25) * w, rng.uniform(0.05, 0.3) * h
        inside = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1
        img[inside] = rng.uniform(0, 255, 3) + 0.1 * (yy[inside, None] - cy)
    img += rng.normal(0, 4, img.shape)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(os.path.join(out, f"photo_{i:03d}.jpg"), quality=90)
