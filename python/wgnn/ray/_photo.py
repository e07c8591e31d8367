"""The CLI's photo handling in Python, for wgnn.ray: decoding as
image::decode_photo does (the format told by the signature, the size checked
from the header, a JPEG's or TIFF's EXIF orientation applied, gray and
palette expanded, 16-bit cut to the high byte), the cut-out through wgnn's
Remover (matting/remover.h: the same pre- and post-processing), the output
variants of tools/cutout_settings.cpp (the matte alone, the cut-out over a
colour, rembg's post-processing) and PNG bytes from the CLI's encoder.

JPEG and PNG photos give the CLI's bytes (tests/ray checks hundreds of
them); WebP and TIFF are decoded by Pillow, whose pixels may differ from the
CLI's decoders in corner cases (TIFF's associated alpha, odd WebP modes).
"""
import io
import math
import os

import numpy as np

import wgnn

from ._png import encode_png

MAX_SIDE = 16384  # image::kMaxSide
DEFAULT_MAX_PIXELS = 8192 * 8192  # image::kDefaultMaxPixels
PHOTO_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff")

_PNG_SIG = b"\x89PNG\r\n\x1a\n"


def _format_of(data, what):
    if data[:8] == _PNG_SIG:
        return "PNG"
    if data[:3] == b"\xff\xd8\xff":
        return "JPEG"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WebP"
    if data[:4] in (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+"):
        return "TIFF"
    looks = ""
    if data[:4] == b"GIF8":
        looks = "a GIF"
    elif data[:2] == b"BM":
        looks = "a BMP"
    elif data[:4] == b"8BPS":
        looks = "a PSD"
    elif len(data) >= 2 and data[:1] == b"P" and b"1"[0] <= data[1] <= b"7"[0]:
        looks = "a PNM"
    elif data[:10] == b"#?RADIANCE" or data[:6] == b"#?RGBE":
        looks = "an HDR"
    elif data[:4] == b"RIFF":
        looks = "a RIFF (not WebP)"
    raise wgnn.Error(f"'{what}' is not an image wgnn can read: "
                     f"{'it looks like ' + looks + ' file' if looks else 'no PNG, JPEG, WebP or TIFF signature'}; "
                     "PNG, JPEG, WebP and TIFF are accepted")


def _oriented(a, o):
    """image::oriented: EXIF orientation o (1 to 8) applied."""
    if o == 2:
        return a[:, ::-1]
    if o == 3:
        return a[::-1, ::-1]
    if o == 4:
        return a[::-1, :]
    if o == 5:
        return a.transpose(1, 0, 2)
    if o == 6:
        return a[::-1].transpose(1, 0, 2)
    if o == 7:
        return a[::-1, ::-1].transpose(1, 0, 2)
    if o == 8:
        return a[:, ::-1].transpose(1, 0, 2)
    return a


def decode_photo(data, what="the photo", max_pixels=DEFAULT_MAX_PIXELS):
    """Photo bytes to an HxWx3 (RGB) or HxWx4 (RGBA) uint8 array, as
    image::decode_photo reads them. Raises wgnn.Error naming `what` for an
    empty file, an unknown format, a photo over the size limits ("too
    large") or one that cannot be decoded."""
    from PIL import Image

    data = bytes(data)
    if not data:
        raise wgnn.Error(f"'{what}' is empty, not an image")
    fmt = _format_of(data, what)
    try:
        im = Image.open(io.BytesIO(data))
        w, h = im.size
    except Exception as e:  # noqa: BLE001 - Pillow raises many kinds
        raise wgnn.Error(f"'{what}' is a {fmt} file wgnn cannot read ({type(e).__name__}: {e})") from None
    if w > MAX_SIDE or h > MAX_SIDE or w * h > max_pixels:
        raise wgnn.Error(f"'{what}' is too large: its {fmt} header says {w}x{h} pixels; accepted are at most "
                         f"{MAX_SIDE} pixels a side and {max_pixels} pixels in all: scale it down first")
    try:
        if fmt in ("WebP", "TIFF"):
            im.seek(0)
        im.load()
        orientation = 1
        if fmt in ("JPEG", "TIFF"):
            o = im.getexif().get(0x0112)
            orientation = o if isinstance(o, int) and 1 <= o <= 8 else 1
        mode = im.mode
        if mode in ("RGB", "RGBA"):
            a = np.asarray(im)
        elif mode in ("I;16", "I;16B", "I;16L", "I"):
            # 16-bit gray: the high byte, as libpng's png_set_strip_16.
            g = (np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8)
            a = np.repeat(g[:, :, None], 3, axis=2)
        elif mode == "CMYK":
            # Adobe's inverted CMYK, as image/jpeg.cpp: R = C * K / 255 with
            # the stored values (Pillow gives them un-inverted).
            cmyk = np.asarray(im).astype(np.uint32)
            if im.info.get("adobe") is not None:
                cmyk = 255 - cmyk
            a = (cmyk[:, :, :3] * cmyk[:, :, 3:4] // 255).astype(np.uint8)
        else:
            has_alpha = mode in ("LA", "PA", "La", "RGBa") or "transparency" in im.info
            a = np.asarray(im.convert("RGBA" if has_alpha else "RGB"))
    except wgnn.Error:
        raise
    except Exception as e:  # noqa: BLE001 - a truncated or broken file
        raise wgnn.Error(f"'{what}' is a {fmt} file wgnn cannot read ({type(e).__name__}: {e})") from None
    return np.ascontiguousarray(_oriented(a, orientation))


def read_photo(path, max_pixels=DEFAULT_MAX_PIXELS):
    """decode_photo of a file, errors naming the path as the CLI's do."""
    if not os.path.exists(path):
        raise wgnn.Error(f"'{path}': no such file")
    if os.path.isdir(path):
        raise wgnn.Error(f"'{path}' is a folder, not an image file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise wgnn.Error(f"cannot read '{path}': {e.strerror}") from None
    return decode_photo(data, path, max_pixels)


def parse_color(s, flag="bg_color"):
    """tools::parse_color: 'R,G,B' or 'R,G,B,A' (each 0 to 255) to 4 ints."""
    parts = s.split(",")
    ok = 3 <= len(parts) <= 4 and all(p and len(p) <= 3 and p.isdigit() and p.isascii() for p in parts)
    if not ok or any(int(p) > 255 for p in parts):
        raise wgnn.Error(f"{flag} '{s}': give R,G,B or R,G,B,A, each 0 to 255 (e.g. 255,255,255 for white)")
    c = [int(p) for p in parts]
    return tuple(c + [255] * (4 - len(c)))


def _round_half_away(v):
    """std::lround for values >= 0."""
    r = np.floor(v)
    return r + (v - r >= 0.5)


def composite_over(rgba, bg):
    """image::composite_over: RGBA over a colour; RGB when bg's alpha is 255."""
    rgba = np.asarray(rgba)
    p = rgba[..., :3].astype(np.float64)
    a = rgba[..., 3:4].astype(np.float64) / 255.0
    ab = bg[3] / 255.0
    ao = a + ab * (1 - a)
    col = np.array(bg[:3], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mixed = _round_half_away((p * a + col * ab * (1 - a)) / ao)
    out = np.where(ao > 0, mixed, p).astype(np.uint8)
    if bg[3] == 255:
        return np.ascontiguousarray(out)
    alpha = _round_half_away(255 * ao).astype(np.uint8)
    return np.ascontiguousarray(np.concatenate([out, alpha], axis=2))


def _cross(a, take_max):
    out = a.copy()
    f = np.maximum if take_max else np.minimum
    out[:, 1:] = f(out[:, 1:], a[:, :-1])
    out[:, :-1] = f(out[:, :-1], a[:, 1:])
    out[1:, :] = f(out[1:, :], a[:-1, :])
    out[:-1, :] = f(out[:-1, :], a[1:, :])
    return out


def _reflect101(n):
    idx = np.arange(-2, n + 2)
    if n == 1:
        return np.zeros_like(idx)
    while ((idx < 0) | (idx >= n)).any():
        idx = np.where(idx < 0, -idx, np.where(idx >= n, 2 * (n - 1) - idx, idx))
    return idx


def post_process_alpha(alpha):
    """image::post_process_alpha (rembg's post_process_mask): an opening
    with the cross, a 5x5 Gaussian (sigma 2, BORDER_REFLECT_101), 0 below
    127 else 255."""
    a = np.asarray(alpha, dtype=np.uint8)
    opened = _cross(_cross(a, False), True).astype(np.float64)
    h, w = a.shape
    k = [math.exp(-float((i - 2) * (i - 2)) / (2 * 2.0 * 2.0)) for i in range(5)]
    total = 0.0
    for v in k:
        total += v
    k = [v / total for v in k]
    xi, yi = _reflect101(w), _reflect101(h)
    rows = np.zeros((h, w))
    for i in range(5):
        rows += k[i] * opened[:, xi[i:i + w]]
    acc = np.zeros((h, w))
    for i in range(5):
        acc += k[i] * rows[yi[i:i + h], :]
    # lround(acc) < 127 exactly when acc < 126.5.
    return np.where(acc < 126.5, 0, 255).astype(np.uint8)


def multiply_alpha(a, b):
    """image::multiply_alpha: round(a * b / 255)."""
    return ((a.astype(np.uint32) * b.astype(np.uint32) + 127) // 255).astype(np.uint8)


class Cutter:
    """One model on one device: photos (arrays or bytes) to cut-out PNG
    bytes, with the CLI's pre- and post-processing and encoder.

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

    def cut(self, photo, only_mask=False, bg_color=None, post_process=False):
        """An HxWx3 / HxWx4 uint8 photo to the output's pixels: RGBA (the
        cut-out), the matte alone (only_mask, HxW) or the cut-out over
        bg_color ((R, G, B, A) or 'R,G,B[,A]'; RGB when A is 255)."""
        if isinstance(bg_color, str):
            bg_color = parse_color(bg_color)
        if only_mask and bg_color is not None:
            raise wgnn.Error("only_mask gives the matte, bg_color a composite: give one of them")
        photo = np.ascontiguousarray(photo)
        if post_process:
            # The matte is cleaned before the photo's own alpha multiplies it.
            _rgba, alpha = self._remover.run(np.ascontiguousarray(photo[..., :3]))
            alpha = post_process_alpha(alpha)
            if photo.ndim == 3 and photo.shape[2] == 4:
                alpha = multiply_alpha(alpha, photo[..., 3])
            rgba = np.concatenate([photo[..., :3], alpha[..., None]], axis=2)
        else:
            rgba, alpha = self._remover.run(photo)
        if only_mask:
            return alpha
        if bg_color is not None:
            return composite_over(rgba, bg_color)
        return rgba

    def cut_png(self, photo, **options):
        """cut(), encoded as the CLI encodes its PNGs."""
        return encode_png(self.cut(photo, **options))

    def cut_bytes(self, data, name="the photo", only_mask=False, bg_color=None, post_process=False,
                  max_pixels=DEFAULT_MAX_PIXELS):
        """A photo file's bytes to its output PNG's bytes: `wgnn remove-bg`'s
        path for one photo. Where the module has it (_Remover.cutout_png),
        the CLI's own C++ decodes, cuts out and encodes, with the GIL
        released; post_process (and an older module) takes the Python
        decoder above with the same encoder. Errors name `name`."""
        if isinstance(bg_color, (tuple, list)):
            bg_color = ",".join(str(int(v)) for v in bg_color)
        if only_mask and bg_color:
            raise wgnn.Error("only_mask gives the matte, bg_color a composite: give one of them")
        if not post_process and hasattr(self._remover, "cutout_png"):
            return self._remover.cutout_png(bytes(data), name, bool(only_mask), bg_color or "", int(max_pixels))
        photo = decode_photo(data, name, max_pixels)
        return self.cut_png(photo, only_mask=only_mask, bg_color=bg_color, post_process=post_process)
