"""Photos to cut-out PNGs for wgnn.ray, through the CLI's own code: the
Python module's _Remover.cutout_png decodes a photo file's bytes as
`wgnn remove-bg` does (image::decode_photo: the format told by its
signature, EXIF orientation, the pixel bound), cuts it out (the Remover:
the same pre- and post-processing, rembg's post_process_mask on request),
makes the output the CLI writes (matting::cutout_image: the cut-out, the
matte alone, or the cut-out over a colour) and encodes it with the CLI's
PNG encoder: the bytes are the CLI's by construction. Only the model run
holds the device; the rest runs without it and without the GIL, so a few
threads per actor keep the GPU busy.
"""
import os

import numpy as np

import wgnn

DEFAULT_MAX_PIXELS = 8192 * 8192  # image::kDefaultMaxPixels
PHOTO_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff")


def parse_color(s, flag="bg_color"):
    """'R,G,B[,A]' or (R, G, B[, A]) checked as the CLI checks --bg-color
    (matting::parse_color): the string form, or a wgnn.Error naming `flag`."""
    if isinstance(s, (tuple, list)):
        s = ",".join(str(int(v)) for v in s)
    wgnn._wgnn.parse_color(str(s), flag)
    return str(s)


class Cutter:
    """One model on one device: photo files' bytes to the CLI's output PNGs.

    model: an ONNX file, or None for the CLI's default (the isnet preset:
        isnet_any_size.onnx from wgnn.model_folders(), ISNet pre-processing).
    size: the model's input size (0: its own; a multiple of 32, as --size).
    preprocess: "auto", "isnet" or "modnet" (--preprocess).
    adapter: SessionOptions.adapter ("auto", "gpu", "lavapipe", or what
        docs/ADAPTERS.md's selectors accept); None: the environment's
        choice (WGNN_ADAPTER, CUDA_VISIBLE_DEVICES).
    """

    def __init__(self, model=None, size=0, preprocess="auto", adapter=None):
        size = int(size)
        if size != 0 and (size < 32 or size % 32 != 0):
            raise wgnn.Error(f"size {size}: give a multiple of 32 (ISNet: 1024 by default; 512 or 320 are faster)")
        if model is None:
            path = wgnn._default_model()
            if preprocess == "auto":
                preprocess = "isnet"  # the preset's, as the CLI's default model
        else:
            path = os.path.abspath(os.fspath(model))
            if not os.path.isfile(path):
                raise wgnn.Error(f"model '{model}': no such file" if not os.path.exists(path)
                                 else f"model '{model}' is not a file")
        self.model, self.size, self.preprocess = path, size, preprocess
        self._remover = wgnn._wgnn._Remover(path, size, preprocess, adapter or "")

    def cut(self, photo):
        """An HxWx3 / HxWx4 uint8 array to (HxWx4 RGBA cut-out, HxW matte),
        as wgnn.remove_bg gives them."""
        return self._remover.run(np.ascontiguousarray(photo))

    def cut_bytes(self, data, name="the photo", only_mask=False, bg_color=None, post_process=False,
                  max_pixels=DEFAULT_MAX_PIXELS):
        """A photo file's bytes to its output PNG's bytes: `wgnn remove-bg`'s
        path for one photo (--only-mask, --bg-color, --post-process), the
        GIL released. Errors are wgnn.Error naming `name`."""
        if only_mask and bg_color:
            raise wgnn.Error("only_mask gives the matte, bg_color a composite: give one of them")
        bg = parse_color(bg_color) if bg_color is not None else ""
        return self._remover.cutout_png(bytes(data), name, bool(only_mask), bg, bool(post_process), int(max_pixels))
