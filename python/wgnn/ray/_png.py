"""PNG encoding with the CLI's encoder: libpng (the system's libpng16, the one
libwgnn.so links) with image/png_write.cpp's settings (zlib level 3, the Sub
and Up filters, no other chunk), so a cut-out written here has the bytes of
`wgnn remove-bg`'s. Called through ctypes; nothing is compiled.

libpng reports an error by longjmp, which ctypes cannot catch: every input is
checked here first (uint8, 1 to 4 channels, sides of 1 to 16384), so libpng
only fails on running out of memory, where it aborts.
"""
import ctypes
import ctypes.util
import threading

import numpy as np

_ZLIB_LEVEL = 3  # image/png_write.cpp's kZlibLevel
_FILTER_SUB, _FILTER_UP = 0x10, 0x20
_COLOR = {1: 0, 2: 4, 3: 2, 4: 6}  # gray, gray + alpha, RGB, RGBA
_MAX_SIDE = 16384  # image::kMaxSide

_lib = None
_lib_lock = threading.Lock()
_WRITE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_ubyte), ctypes.c_size_t)
_FLUSH = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_WARN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


def _libpng():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        name = ctypes.util.find_library("png16") or "libpng16.so.16"
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            raise RuntimeError(f"wgnn.ray needs libpng16 (Debian's libpng16-16, which libwgnn.so links): {e}") from e
        vp = ctypes.c_void_p
        lib.png_get_libpng_ver.restype = ctypes.c_char_p
        lib.png_get_libpng_ver.argtypes = [vp]
        lib.png_create_write_struct.restype = vp
        lib.png_create_write_struct.argtypes = [ctypes.c_char_p, vp, vp, _WARN]
        lib.png_create_info_struct.restype = vp
        lib.png_create_info_struct.argtypes = [vp]
        lib.png_destroy_write_struct.restype = None
        lib.png_destroy_write_struct.argtypes = [ctypes.POINTER(vp), ctypes.POINTER(vp)]
        lib.png_set_write_fn.restype = None
        lib.png_set_write_fn.argtypes = [vp, vp, _WRITE, _FLUSH]
        lib.png_set_IHDR.restype = None
        lib.png_set_IHDR.argtypes = [vp, vp, ctypes.c_uint32, ctypes.c_uint32] + [ctypes.c_int] * 5
        lib.png_set_compression_level.restype = None
        lib.png_set_compression_level.argtypes = [vp, ctypes.c_int]
        lib.png_set_filter.restype = None
        lib.png_set_filter.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        for f in ("png_write_info", "png_write_end"):
            getattr(lib, f).restype = None
            getattr(lib, f).argtypes = [vp, vp]
        lib.png_write_image.restype = None
        lib.png_write_image.argtypes = [vp, ctypes.POINTER(vp)]
        _lib = lib
        return lib


def libpng_version():
    """The libpng version the encoder runs (e.g. '1.6.39')."""
    return _libpng().png_get_libpng_ver(None).decode()


def encode_png(image):
    """An HxW (gray), HxWx1..4 uint8 array as PNG bytes, byte for byte what
    wgnn's image::encode_png gives for the same pixels."""
    a = np.asarray(image)
    if a.dtype != np.uint8:
        raise TypeError(f"encode_png: needs uint8 pixels, got {a.dtype}")
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in _COLOR:
        raise ValueError(f"encode_png: needs an HxW or HxWxC (C = 1 to 4) array, got shape {a.shape}")
    h, w, c = a.shape
    if not (1 <= w <= _MAX_SIDE and 1 <= h <= _MAX_SIDE):
        raise ValueError(f"encode_png: a {w}x{h} image; each side must be 1 to {_MAX_SIDE}")
    a = np.ascontiguousarray(a)
    lib = _libpng()
    chunks = []
    failure = []

    def write(_png, data, n):
        try:
            chunks.append(ctypes.string_at(data, n))
        except BaseException as e:  # noqa: BLE001 - reported after libpng returns
            failure.append(e)

    write_fn, flush_fn, warn_fn = _WRITE(write), _FLUSH(lambda _png: None), _WARN(lambda _png, _msg: None)
    png = ctypes.c_void_p(lib.png_create_write_struct(lib.png_get_libpng_ver(None), None, None, warn_fn))
    if not png.value:
        raise MemoryError("libpng: png_create_write_struct failed")
    info = ctypes.c_void_p(lib.png_create_info_struct(png))
    try:
        if not info.value:
            raise MemoryError("libpng: png_create_info_struct failed")
        lib.png_set_write_fn(png, None, write_fn, flush_fn)
        lib.png_set_IHDR(png, info, w, h, 8, _COLOR[c], 0, 0, 0)
        lib.png_set_compression_level(png, _ZLIB_LEVEL)
        lib.png_set_filter(png, 0, _FILTER_SUB | _FILTER_UP)
        lib.png_write_info(png, info)
        base = a.ctypes.data
        stride = w * c
        rows = (ctypes.c_void_p * h)(*[base + y * stride for y in range(h)])
        lib.png_write_image(png, rows)
        lib.png_write_end(png, None)
    finally:
        lib.png_destroy_write_struct(ctypes.byref(png), ctypes.byref(info))
    if failure:
        raise failure[0]
    return b"".join(chunks)
