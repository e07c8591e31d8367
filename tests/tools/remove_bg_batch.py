"""`wgnn remove-bg` on a folder of photos the way people have them, on a
tiny matting model built with onnx.helper (mean over RGB, then a sigmoid):
JPEGs with EXIF orientations, a PNG with transparency, gray, WebP, TIFF, a
corrupt file, one already done, same-stem photos, stdin and stdout, and
SIGINT in the middle of a run. Every output is checked pixel-wise.

usage: remove_bg_batch.py WGNN WORKDIR
"""
import io
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
from PIL import Image, ImageOps

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


def run(*args, stdin=None, cwd=WORK, text=True):
    p = subprocess.run([WGNN, "remove-bg", *args], cwd=cwd, capture_output=True, text=text, timeout=300,
                       input=stdin)
    return p.returncode, p.stdout, p.stderr


def quadrants(w, h):
    """Four solid quadrants of distinct colours (and so distinct mattes)."""
    a = np.zeros((h, w, 3), np.uint8)
    a[:h // 2, :w // 2] = (250, 250, 250)
    a[:h // 2, w // 2:] = (250, 20, 20)
    a[h // 2:, :w // 2] = (20, 20, 250)
    a[h // 2:, w // 2:] = (10, 10, 10)
    return a


def save_jpeg(arr, path, orientation):
    """Stores `arr` turned so that EXIF orientation `orientation` shows it
    upright again: what a camera held sideways writes."""
    im = Image.fromarray(arr)
    # The inverse of what the orientation asks a viewer to do.
    inverse = {1: None, 3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90,
               8: Image.Transpose.ROTATE_270}[orientation]
    stored = im.transpose(inverse) if inverse is not None else im
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored.save(path, quality=95, exif=exif.tobytes())
    # The reference: PIL's own reading of the file, turned by PIL.
    return np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB"))


model = os.path.join(WORK, "m.onnx")
matting_model(model, 64, 64)
photos = os.path.join(WORK, "photos")
out = os.path.join(WORK, "out")
os.makedirs(os.path.join(photos, "sub"))
os.makedirs(out)

want = {}  # input name -> (expected RGB upright, expected input alpha or None)
# JPEGs held sideways (6, 8), upside down (3), upright (1): 48x32 upright.
upright = quadrants(48, 32)
for o in (6, 8, 3, 1):
    name = f"turned_{o}.jpg"
    want[name] = (save_jpeg(upright, os.path.join(photos, name), o), None)
    stored = np.asarray(Image.open(os.path.join(photos, name)).convert("RGB"))
    if o in (6, 8):
        check(stored.shape[:2] == (48, 32), f"{name} is stored sideways: {stored.shape}")
# A PNG with transparency: a fully transparent band, a half-transparent one.
rgba = np.zeros((30, 40, 4), np.uint8)
rgba[..., :3] = (200, 120, 60)
rgba[..., 3] = 255
rgba[:, :10, 3] = 0
rgba[:, 10:20, 3] = 128
Image.fromarray(rgba).save(os.path.join(photos, "alpha.png"))
want["alpha.png"] = (rgba[..., :3], rgba[..., 3])
# Gray PNG and gray JPEG.
gray = np.tile(np.arange(0, 240, 6, dtype=np.uint8), (24, 1))
Image.fromarray(gray).save(os.path.join(photos, "gray.png"))
want["gray.png"] = (np.stack([gray] * 3, -1), None)
Image.fromarray(gray).save(os.path.join(photos, "gray_jpeg.jpg"), quality=95)
want["gray_jpeg.jpg"] = (np.stack([np.asarray(Image.open(os.path.join(photos, "gray_jpeg.jpg")))] * 3, -1), None)
# WebP (lossless, and with alpha) and TIFF.
webp = quadrants(36, 20)
Image.fromarray(webp).save(os.path.join(photos, "photo.webp"), lossless=True)
want["photo.webp"] = (webp, None)
webpa = np.zeros((20, 36, 4), np.uint8)
webpa[..., :3] = (90, 160, 30)
webpa[..., 3] = 255
webpa[:8, :, 3] = 0
Image.fromarray(webpa).save(os.path.join(photos, "transparent.webp"), lossless=True, exact=True)
want["transparent.webp"] = (webpa[..., :3], webpa[..., 3])
# A TIFF held sideways: its Orientation tag (274) is 6.
Image.fromarray(upright).transpose(Image.Transpose.ROTATE_90).save(os.path.join(photos, "turned_tiff_6.tif"),
                                                                    tiffinfo={274: 6})
want["turned_tiff_6.tif"] = (upright, None)  # lossless: exactly the upright photo
check(Image.open(os.path.join(photos, "turned_tiff_6.tif")).size == (32, 48), "the TIFF is stored sideways")
tif = quadrants(30, 22)
Image.fromarray(tif).save(os.path.join(photos, "scan.tif"), compression="tiff_lzw")
want["scan.tif"] = (tif, None)
# A photo with the same stem in a subfolder: its cut-out keeps the subfolder.
sub = np.full((16, 24, 3), (30, 200, 100), np.uint8)
Image.fromarray(sub).save(os.path.join(photos, "sub", "turned_1.png"))
# Corrupt: a JPEG signature, then garbage.
with open(os.path.join(photos, "corrupt.jpg"), "wb") as f:
    f.write(b"\xff\xd8\xff\xe0" + os.urandom(200))
# Already done: its output exists and must stay as it is.
Image.fromarray(quadrants(20, 20)).save(os.path.join(photos, "done.jpg"), quality=95)
done_bytes = b"a previous cut-out, kept\n"
with open(os.path.join(out, "done_cutout.png"), "wb") as f:
    f.write(done_bytes)
# Not photos: a text file, and an earlier cut-out lying in the folder.
with open(os.path.join(photos, "notes.txt"), "w") as f:
    f.write("not a photo\n")
Image.fromarray(rgba).save(os.path.join(photos, "old_cutout.png"))
n_photos = len(want) + 1 + 1 + 1  # + sub/turned_1.png, corrupt.jpg, done.jpg

rc, stdout, err = run(photos, "-o", out, "--model", model, "--recursive")
print(err)
check(rc == 1, f"a failed photo makes the exit status 1 (rc {rc})")
check(f"[{n_photos}/{n_photos}]" in err and "photos/s" in err and "ETA" in err,
      f"progress [i/{n_photos}] with rate and ETA")
check(f"{n_photos - 2} done, 1 skipped, 1 failed, of {n_photos} photos" in err, "the summary counts")
check("failed: " in err and "corrupt.jpg" in err and "cannot read" in err.split("failed: ")[-1],
      "the corrupt file's reason is in the summary")
check("done.jpg: skipped" in err, "the done photo is said to be skipped")
with open(os.path.join(out, "done_cutout.png"), "rb") as f:
    check(f.read() == done_bytes, "the existing output is left as it was")
check(not os.path.exists(os.path.join(out, "old_cutout_cutout.png")), "an earlier cut-out in the folder is not a photo")
check(not os.path.exists(os.path.join(out, "corrupt_cutout.png")), "the corrupt photo has no output")

for name, (rgb, in_alpha) in want.items():
    path = os.path.join(out, os.path.splitext(name)[0] + "_cutout.png")
    if not os.path.exists(path):
        check(False, f"{name}: no output")
        continue
    im = Image.open(path)
    got = np.asarray(im)
    h, w = rgb.shape[:2]
    check(im.mode == "RGBA" and got.shape == (h, w, 4), f"{name}: RGBA {w}x{h} ({im.mode} {got.shape})")
    if got.shape != (h, w, 4):
        continue
    # JPEG decoders round differently; anything turned wrongly is off by ~200.
    diff = np.abs(got[..., :3].astype(int) - rgb.astype(int))
    tol = 0 if name.endswith((".png", ".webp", ".tif")) else 8
    check(diff.max() <= tol, f"{name}: colours are the upright photo's (max diff {diff.max()}, allowed {tol})")
    if name.startswith("turned_"):
        # The matte follows the upright photo: the white quadrant's is high,
        # the dark one's low, in the corners where they are upright.
        a = got[..., 3].astype(int)
        tl, br = a[2, 2], a[-3, -3]
        check(abs(tl - alpha_of((250, 250, 250))) <= 3 and abs(br - alpha_of((10, 10, 10))) <= 3,
              f"{name}: the matte is upright (top-left {tl}, bottom-right {br})")
    if in_alpha is not None:
        a = got[..., 3].astype(int)
        m = alpha_of(rgb[0, -1])
        check((a <= in_alpha.astype(int)).all(), f"{name}: output alpha <= the photo's own alpha")
        check((a[in_alpha == 0] == 0).all(), f"{name}: transparent pixels stay transparent")
        opaque = in_alpha == 255
        check(np.abs(a[opaque] - m).max() <= 1, f"{name}: where the photo is opaque, alpha is the matte ({m})")
        half = in_alpha == 128
        if half.any():
            check(np.abs(a[half] - m * 128 / 255).max() <= 1.01, f"{name}: half transparency halves the matte")

subout = os.path.join(out, "sub", "turned_1_cutout.png")
check(os.path.exists(subout) and np.asarray(Image.open(subout)).shape == (16, 24, 4) and
      (np.asarray(Image.open(subout))[..., :3] == sub).all(),
      "the same stem in a subfolder goes to OUT/sub/, not over OUT/turned_1_cutout.png")

# The pipeline with several host threads (decode, pre-processing and writes
# beside the GPU): the same files, progress lines in the photos' order.
rc, _, err = run(photos, "-o", os.path.join(WORK, "threads"), "--model", model, "--recursive", "--threads", "3")
order = [int(line.split("[")[1].split("/")[0]) for line in err.splitlines() if line.startswith("remove-bg: [")]
check(order == list(range(1, n_photos + 1)), f"--threads 3: one progress line per photo, in order ({order})")
check(rc == 1 and f"{n_photos - 1} done, 0 skipped, 1 failed" in err, "--threads 3: the corrupt photo fails alone")
same = True
for name in list(want) + ["sub/turned_1.png", "done.jpg"]:
    a = os.path.join(WORK, "threads", os.path.splitext(name)[0] + "_cutout.png")
    b = os.path.join(out, os.path.splitext(name)[0] + "_cutout.png")
    if name == "done.jpg":
        same &= os.path.exists(a)
    else:
        same &= os.path.exists(a) and (np.asarray(Image.open(a)) == np.asarray(Image.open(b))).all()
check(same, "--threads 3 writes the same cut-outs as the first run")
# The GPU thread keeps one photo queued behind the one running, only at the
# same input size: a model of free size (MODNet pre-processing) on photos
# of three aspect ratios, interleaved, each a solid colour of its own. Every
# cut-out must be its own photo's size with its own colour's matte (a photo
# given another's matte, or one lost in the queue, would show).
free = os.path.join(WORK, "free.onnx")
matting_model(free, "h", "w")
mixed = os.path.join(WORK, "mixed")
os.makedirs(mixed)
sizes = [(64, 48), (64, 48), (48, 80), (64, 48), (48, 80), (96, 32), (96, 32), (64, 48), (48, 80)]
mixed_colours = [(20 * k + 10, 250 - 25 * k, (70 * k) % 256) for k in range(len(sizes))]
for k, ((w, h), c) in enumerate(zip(sizes, mixed_colours)):
    Image.fromarray(np.full((h, w, 3), c, np.uint8)).save(os.path.join(mixed, f"m{k}.png"))
rc, _, err = run(mixed, "-o", os.path.join(WORK, "mixed_out"), "--model", free, "--size", "32")
check(rc == 0 and f"{len(sizes)} done, 0 skipped, 0 failed" in err, f"mixed sizes: all done ({err.strip()[-300:]})")
right = True
for k, ((w, h), c) in enumerate(zip(sizes, mixed_colours)):
    path = os.path.join(WORK, "mixed_out", f"m{k}_cutout.png")
    got = np.asarray(Image.open(path)) if os.path.exists(path) else np.zeros((0,))
    want_a = alpha_of(c, mean=127.5, std=127.5)  # MODNet: (x / 255 - 0.5) / 0.5
    ok = got.shape == (h, w, 4) and (got[..., :3] == c).all() and (np.abs(got[..., 3].astype(int) - want_a) <= 1).all()
    if not ok:
        print(f"  m{k}: {got.shape}, alpha {np.unique(got[..., 3]) if got.ndim == 3 else None}, want {want_a}")
    right &= ok
check(right, "mixed sizes: each cut-out has its own size, colours and matte")
# Inputs (short side 32): m0 m1 32x32 | m2 32x64 | m3 32x32 | m4 32x64 |
# m5 m6 96x32 | m7 32x32 | m8 32x64: m1 and m6 follow one of their size.
check(" 2 queued behind the photo on the GPU" in err, "mixed sizes: a photo is queued behind one of its size only")
stage_line = [line for line in err.splitlines() if "per photo, median ms:" in line]
check(len(stage_line) == 1 and all(f"{w} " in stage_line[0] for w in ("decode", "pre-process", "wait for input",
                                                                       "submit", "wait for the GPU", "post-process",
                                                                       "encode and write"))
      and "-," not in stage_line[0], f"the summary breaks each photo's time into stages ({stage_line})")

rc, _, err = run(photos, "--threads", "17", "--model", model)
check(rc == 1 and "--threads 17: give 1 to 16" in err, f"--threads 17 refused ({err.strip()})")

# Again: all that exist are skipped; --overwrite redoes them.
rc, _, err = run(photos, "-o", out, "--model", model, "--recursive", "--quiet")
check(f"0 done, {n_photos - 1} skipped, 1 failed" in err, f"second run: all but the corrupt one skipped ({err.strip()})")
rc, _, err = run(photos, "-o", out, "--model", model, "--recursive", "--overwrite", "--quiet")
check(f"{n_photos - 1} done, 0 skipped, 1 failed" in err, f"--overwrite redoes them ({err.strip()})")
check(np.asarray(Image.open(os.path.join(out, "done_cutout.png"))).shape == (20, 20, 4), "done.jpg redone")
rc, _, err = run(photos, "-o", os.path.join(WORK, "flat"), "--model", model, "--quiet")
check(not os.path.exists(os.path.join(WORK, "flat", "sub")), "without --recursive, subfolders are not read")

rc, _, err = run(photos, "-o", os.path.join(WORK, "masks"), "--model", model, "--only-mask", "--quiet")
mask6 = os.path.join(WORK, "masks", "turned_6_mask.png")
cut6 = np.asarray(Image.open(os.path.join(out, "turned_6_cutout.png")))
check(os.path.exists(mask6) and Image.open(mask6).mode == "L" and (np.asarray(Image.open(mask6)) == cut6[..., 3]).all(),
      "--only-mask on a folder: _mask.png files, gray, the cut-outs' alpha")

# Same stems given by name: refused before anything runs.
clash = os.path.join(WORK, "clash")
os.makedirs(os.path.join(clash, "a"))
os.makedirs(os.path.join(clash, "b"))
Image.fromarray(sub).save(os.path.join(clash, "a", "x.png"))
Image.fromarray(sub).save(os.path.join(clash, "b", "x.jpg"))
rc, _, err = run(os.path.join(clash, "a", "x.png"), os.path.join(clash, "b", "x.jpg"), "-o",
                 os.path.join(WORK, "clash_out"), "--model", model)
check(rc == 1 and "would both be cut out to" in err and "loading" not in err, f"same stems refused up front: {err.strip()}")
check(not os.listdir(os.path.join(WORK, "clash_out")) if os.path.isdir(os.path.join(WORK, "clash_out")) else True,
      "nothing was written for the clash")
Image.fromarray(sub).save(os.path.join(clash, "a", "x.webp"))
rc, _, err = run(os.path.join(clash, "a"), "-o", os.path.join(WORK, "clash_out"), "--model", model)
check(rc == 1 and "would both be cut out to" in err, "x.png and x.webp in one folder refused")

# stdin to stdout, a photo with EXIF orientation 6.
with open(os.path.join(photos, "turned_6.jpg"), "rb") as f:
    jpg = f.read()
p = subprocess.run([WGNN, "remove-bg", "-", "-o", "-", "--model", model, "--quiet"], input=jpg,
                   capture_output=True, timeout=300)
check(p.returncode == 0 and p.stdout[:8] == b"\x89PNG\r\n\x1a\n", f"- to -: a PNG on stdout (rc {p.returncode})")
if p.returncode == 0:
    got = np.asarray(Image.open(io.BytesIO(p.stdout)))
    ref = np.asarray(Image.open(os.path.join(out, "turned_6_cutout.png")))
    check(got.shape == ref.shape and (got == ref).all(), "stdin to stdout gives the same cut-out as the file")
    check(p.stderr == b"", f"--quiet: nothing on stderr ({p.stderr[-200:]!r})")
p = subprocess.run([WGNN, "remove-bg", "-", "-o", os.path.join(WORK, "from_stdin.png"), "--model", model, "--quiet"],
                   input=jpg, capture_output=True, timeout=300)
check(p.returncode == 0 and os.path.exists(os.path.join(WORK, "from_stdin.png")), "stdin to a file")

# Errors found before the model is loaded.
for args, want_err in [
    ([os.path.join(photos, "gray.png"), "-o", "/proc/cut.png"], "cannot write into the folder"),
    ([os.path.join(photos, "gray.png"), "-o", "g.png", "--mask", "/proc/m.png"], "--mask '/proc/m.png': cannot write"),
    ([photos, "-o", "-"], "stdout takes one photo"),
    (["-", os.path.join(photos, "gray.png")], "must be the only input"),
    (["-"], "give -o FILE.png"),
    ([photos, "--runs", "2"], "--runs times one photo"),
    ([photos, "--mask", "m.png"], "--mask names one file"),
    ([photos, "-o", os.path.join(WORK, "x.png")], "is a folder: its photos' cut-outs go to a folder"),
    ([os.path.join(photos, "gray.png"), os.path.join(photos, "scan.tif"), "-o", os.path.join(WORK, "x.png")],
     "names a folder, not a PNG"),
    ([os.path.join(WORK, "clash")], "holds no photos"),
    ([os.path.join(photos, "gray.png"), os.path.join(photos, "gray.png")], "is given twice"),
    ([photos, os.path.join(photos, "gray.png")], "is given twice"),
    ([os.path.join(photos, "old_cutout.png"), os.path.join(photos, "old.jpg"), "-o", photos], "is the photo"),
]:
    rc, _, err = run(*args, "--model", model, cwd=WORK)
    check(rc == 1 and want_err in err and "loading" not in err,
          f"{' '.join(a.replace(WORK, '') for a in args)}: exit 1 with '{want_err}' before loading ({err.strip()[-200:]})")
rc, _, err = run(os.path.join(photos, "gray.png"), "-o", os.path.join(WORK, "g.png"), "--model", model,
                 "--preprocess", "modnet")
check(rc == 1 and "has a fixed size" in err, f"--preprocess modnet with a fixed-size model is refused ({err.strip()[-200:]})")

# SIGINT in the middle: large noisy photos make each write take a while.
big = os.path.join(WORK, "big")
os.makedirs(big)
rng = np.random.default_rng(1)
for i in range(24):
    Image.fromarray(rng.integers(0, 256, (900, 1200, 3), np.uint8)).save(os.path.join(big, f"p{i:02d}.png"),
                                                                      compress_level=0)


def check_interrupted(dest, what):
    names = sorted(os.listdir(dest))
    outputs = [n for n in names if n.endswith("_cutout.png") and not n.startswith(".")]
    check(len(outputs) < 24, f"{what}: interrupted before the end ({len(outputs)} of 24 written)")
    check(set(names) == set(outputs), f"{what}: no temporary or partial files: {sorted(set(names) - set(outputs))}")
    complete = True
    for n in outputs:
        try:
            im = Image.open(os.path.join(dest, n))
            im.load()
            complete &= im.size == (1200, 900) and im.mode == "RGBA"
        except Exception as e:  # a cut-short PNG
            print(f"  {n}: {e}")
            complete = False
    check(complete, f"{what}: every output present is a complete PNG")


# SIGINT between photos, at moments after the k-th progress line.
for k, delay in [(2, 0.0), (3, 0.05)]:
    dest = os.path.join(WORK, f"big_out_{k}")
    proc = subprocess.Popen([WGNN, "remove-bg", big, "-o", dest, "--model", model], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    for line in proc.stderr:
        if f"[{k}/24]" in line:
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            break
    proc.stderr.read()
    rc = proc.wait(timeout=120)
    check(rc == -signal.SIGINT, f"SIGINT after photo {k}: the run stops (rc {rc})")
    check_interrupted(dest, f"SIGINT after photo {k}")

# SIGINT while a cut-out is being written: the moment its temporary file
# appears in the output folder (after `attempt` complete outputs).
for attempt in range(3):
    dest = os.path.join(WORK, f"big_out_write_{attempt}")
    os.makedirs(dest)
    proc = subprocess.Popen([WGNN, "remove-bg", big, "-o", dest, "--model", model, "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = None
    deadline = time.time() + 120
    while seen is None and proc.poll() is None and time.time() < deadline:
        with os.scandir(dest) as it:
            for e in it:
                if e.name.startswith(".") and ".tmp-" in e.name and len(os.listdir(dest)) > attempt:
                    seen = e.name
                    break
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=120)
    check(seen is not None, f"write {attempt}: a temporary file was seen while a cut-out was written")
    check(rc == -signal.SIGINT, f"SIGINT while writing ({seen}): the run stops (rc {rc})")
    check_interrupted(dest, f"SIGINT while writing {seen}")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
