"""Cuts out a photo's subject with wgnn.remove_bg (ISNet; the CLI's pre- and
post-processing): writes OUT.png (RGBA) and OUT_mask.png (the matte) with the
pixels of the files `wgnn remove-bg PHOTO -o OUT.png --mask OUT_mask.png` writes.

usage: remove_bg.py PHOTO OUT.png [--model ISNET.onnx] [--size N]
"""
import argparse

from PIL import Image

import wgnn

ap = argparse.ArgumentParser()
ap.add_argument("photo")
ap.add_argument("out")
ap.add_argument("--model", help="default: isnet_any_size.onnx from wgnn.model_folders()")
ap.add_argument("--size", type=int, default=0, help="the model's input size (0: its own)")
a = ap.parse_args()
cutout = wgnn.remove_bg(Image.open(a.photo), model=a.model, size=a.size)
cutout.save(a.out)
cutout.getchannel("A").save(a.out[: -len(".png")] + "_mask.png")
