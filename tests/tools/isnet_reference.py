"""remove-bg's ISNet pipeline written independently in numpy: area filter
shrinking, bilinear growing (half-pixel centres, edges clamped), (x - 128) /
256 normalization, and the matte -> alpha post-processing. The reference of
tests/tools/remove_bg_isnet_test.py and bench/any_adapter_isnet.py, which run
the network itself with ONNX Runtime.
"""
import numpy as np
from PIL import Image


def weights(n_src, n_dst):
    """Rows: output pixels; columns: source pixels (area shrinking, bilinear growing)."""
    w = np.zeros((n_dst, n_src))
    s = n_src / n_dst
    for i in range(n_dst):
        if n_dst < n_src:
            lo, hi = i * s, (i + 1) * s
            for j in range(int(np.floor(lo)), min(n_src, int(np.ceil(hi)))):
                w[i, j] = (min(j + 1, hi) - max(j, lo)) / s
        elif n_dst > n_src:
            x = min(max((i + 0.5) * s - 0.5, 0), n_src - 1)
            j = int(np.floor(x))
            w[i, j] += 1 - (x - j)
            w[i, min(j + 1, n_src - 1)] += x - j
        else:
            w[i, i] = 1
    return w


def resize(img, w, h):  # img: H x W x C
    rows = np.einsum("yh,hwc->ywc", weights(img.shape[0], h), img)
    return np.einsum("xw,ywc->yxc", weights(img.shape[1], w), rows)


def isnet_input(photo, size):
    """The photo as ISNet's 1x3xSIZExSIZE float32 input, and its (W, H)."""
    rgb = np.asarray(Image.open(photo).convert("RGB")).astype(np.float64)
    h, w = rgb.shape[:2]
    x = ((resize(rgb, size, size) - 128) / 256).transpose(2, 0, 1)[None].astype(np.float32)
    return x, (w, h)


def alpha_of(matte, w, h):
    """ISNet's first output [1, 1, S, S] as the photo's 8-bit alpha (H x W)."""
    m = np.clip(np.asarray(matte)[0, 0].astype(np.float64), 0, 1)
    return np.round(255 * resize(m[..., None], w, h)[..., 0])


def free_size_copy(src, dst):
    """Writes a copy of the ISNet model src whose input height and width are
    free ("hw") and whose outputs' are unset: ONNX Runtime checks the
    declared 1024x1024 otherwise. Returns the loaded copy."""
    import onnx
    m = onnx.load(src)
    for d in m.graph.input[0].type.tensor_type.shape.dim[2:]:
        d.Clear()
        d.dim_param = "hw"
    for o in m.graph.output:
        for d in o.type.tensor_type.shape.dim[2:]:
            d.Clear()
    onnx.save(m, dst)
    return m
