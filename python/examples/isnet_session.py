"""ISNet's matte of a photo through onnxruntime.InferenceSession's API: the
same script runs on wgnn (default) or ONNX Runtime (--runtime onnxruntime),
only the imported module changes. Writes the model's first output as .npy.

usage: isnet_session.py MODEL.onnx PHOTO OUT.npy [--size N] [--runtime wgnn|onnxruntime]
"""
import argparse
import importlib

import numpy as np
from PIL import Image

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("photo")
ap.add_argument("out")
ap.add_argument("--size", type=int, default=1024)
ap.add_argument("--runtime", default="wgnn", choices=["wgnn", "onnxruntime"])
a = ap.parse_args()
rt = importlib.import_module(a.runtime)
photo = Image.open(a.photo).convert("RGB").resize((a.size, a.size), Image.BILINEAR)
x = ((np.asarray(photo, np.float32) - 128) / 256).transpose(2, 0, 1)[None].copy()
session = rt.InferenceSession(a.model, providers=["CPUExecutionProvider"])
# The matte only (ISNet's first output): the six side outputs are not read back.
(matte,) = session.run([session.get_outputs()[0].name], {session.get_inputs()[0].name: x})
np.save(a.out, matte)
print(f"{a.runtime}: {session.get_outputs()[0].name} {matte.shape} {matte.dtype}, mean {matte.mean():.4f}")
