"""`wgnn serve` on loopback with the tiny matting model (mean over RGB, then
a sigmoid): the cut-outs it answers checked pixel-wise, the query options,
/health, the errors and limits (413, 400, 503 with a full queue or past the
time limit), a load of 200 requests at 8 concurrent in which every request
gets a correct PNG or a 503, and the server killed in the middle of
requests (SIGTERM drains: each request answered, exit 0; SIGKILL) leaving
no file, temporary or partial, behind.

usage: serve_test.py WGNN WORKDIR
"""
import http.client
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_matting import alpha_of, matting_model  # noqa: E402


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


class Server:
    """wgnn serve on a free port, in its own folder and cache folder."""

    def __init__(self, *args, name="server"):
        self.dir = os.path.join(WORK, name)
        self.cache = os.path.join(self.dir, "cache")
        os.makedirs(self.cache)
        env = dict(os.environ, WGNN_CACHE_DIR=self.cache)
        self.err_path = os.path.join(self.dir, "stderr.txt")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen([WGNN, "serve", "--port", "0", *args], cwd=self.dir, env=env,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.proc.stdout.readline()
        if "listening on http://127.0.0.1:" not in line:
            self.proc.kill()
            sys.exit(f"FAIL: the server did not start: {line!r} {open(self.err_path).read()}")
        self.port = int(line.split("127.0.0.1:")[1].split("/")[0])
        self.banner = line

    def request(self, method, path, body=None, headers=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, body, query="", ctype="image/png", **kw):
        return self.request("POST", "/remove-bg" + query, body, {"Content-Type": ctype}, **kw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=60)
        self.err.close()


def png(arr):
    b = io.BytesIO()
    Image.fromarray(arr).save(b, format="PNG")
    return b.getvalue()


def solid(w, h, rgb):
    return np.full((h, w, 3), rgb, np.uint8)


def decode(body):
    return np.asarray(Image.open(io.BytesIO(body)))


model = os.path.join(WORK, "m.onnx")
matting_model(model, 64, 64)

s = Server("--model", model, "--queue", "4")
check("isnet pre-processing" in s.banner and "queue 4" in s.banner, f"the banner names the model and queue: {s.banner}")
st, hd, body = s.request("GET", "/health")
h = json.loads(body)
check(st == 200 and h["status"] == "ok" and h["model"] == "m.onnx" and h["queue"] == 4, f"/health: {h}")

rgb = (200, 100, 50)
st, hd, body = s.post(png(solid(50, 40, rgb)))
check(st == 200 and hd.get("Content-Type") == "image/png", f"POST /remove-bg: a PNG ({st} {hd.get('Content-Type')})")
if st == 200:
    a = decode(body)
    check(a.shape == (40, 50, 4) and (a[..., :3] == rgb).all() and (np.abs(a[..., 3].astype(int) - alpha_of(rgb)) <= 1).all(),
          f"the cut-out is the photo with the matte as alpha ({alpha_of(rgb)})")
st, _, body = s.post(png(solid(50, 40, rgb)), "?only_mask=1")
check(st == 200 and decode(body).shape == (40, 50), "only_mask=1: the gray matte")
st, _, body = s.post(png(solid(50, 40, rgb)), "?bg_color=0,0,255")
if st == 200:
    a = decode(body).astype(float)
    al = alpha_of(rgb) / 255
    want = np.array(rgb) * al + np.array([0, 0, 255]) * (1 - al)
    check(a.shape == (40, 50, 3) and np.abs(a - want).max() <= 1.01, "bg_color=0,0,255: composited over blue, RGB")
else:
    check(False, f"bg_color: status {st}")
# post_process: the matte made hard (white: 158 -> 255, black: 96 -> 0).
half = np.zeros((40, 50, 3), np.uint8)
half[:, :25] = 255
st, _, body = s.post(png(half), "?post_process=1&only_mask=1")
m = decode(body) if st == 200 else None
check(m is not None and set(np.unique(m)) == {0, 255} and (m[:, :20] == 255).all() and (m[:, 30:] == 0).all(),
      "post_process=1: a hard matte")
# A multipart form, as curl -F file=@photo.png sends it; and a JPEG with EXIF.
boundary = "wgnnboundary"
form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"p.png\"\r\n"
        f"Content-Type: image/png\r\n\r\n").encode() + png(solid(30, 20, rgb)) + f"\r\n--{boundary}--\r\n".encode()
st, _, body = s.post(form, ctype=f"multipart/form-data; boundary={boundary}")
check(st == 200 and decode(body).shape == (20, 30, 4), f"a multipart form's file ({st})")
upright = np.zeros((32, 48, 3), np.uint8)
upright[:, :24] = 250
exif = Image.Exif()
exif[0x0112] = 6
b = io.BytesIO()
Image.fromarray(upright).transpose(Image.Transpose.ROTATE_90).save(b, format="JPEG", quality=95, exif=exif.tobytes())
st, _, body = s.post(b.getvalue(), ctype="image/jpeg")
a = decode(body) if st == 200 else None
check(a is not None and a.shape == (32, 48, 4) and a[16, 5, 0] > 200 and a[16, 43, 0] < 50,
      "a JPEG with EXIF orientation 6 comes back upright")

# Errors, each with its status and a reason.
for what, args, want_status, want_text in [
    ("not an image", (b"hello, not a photo",), 400, "not an image"),
    ("empty body", (b"",), 400, "no photo"),
    ("unknown parameter", (png(solid(8, 8, rgb)), "?colour=red"), 400, "unknown query parameter 'colour'"),
    ("bad colour", (png(solid(8, 8, rgb)), "?bg_color=300,0,0"), 400, "bg_color '300,0,0'"),
    ("mask and colour", (png(solid(8, 8, rgb)), "?only_mask=1&bg_color=1,2,3"), 400, "give one of them"),
    ("bad flag", (png(solid(8, 8, rgb)), "?only_mask=maybe"), 400, "give 1 or 0"),
]:
    st, _, body = s.post(*args)
    check(st == want_status and want_text in body.decode(errors="replace"),
          f"{what}: {want_status} with '{want_text}' ({st} {body[:160]!r})")
st, _, body = s.request("GET", "/nope")
check(st == 404 and b"/health" in body, f"an unknown path: 404 naming the pages ({st})")
noisy = png(np.random.default_rng(2).integers(0, 256, (60, 60, 3), np.uint8))  # over 8 KiB
st, _, body = s.request("POST", "/remove-bg", noisy,
                        {"Content-Type": "application/x-www-form-urlencoded"})
check(st == 413 and b"Content-Type" in body, f"a photo sent as a form-encoded body: 413 saying what to send ({body[:120]!r})")
st, _, body = s.request("GET", "/")
check(st == 200 and b"<input id=\"file\" type=\"file\"" in body, "GET /: the page")
s.stop()
check(s.proc.returncode in (-signal.SIGINT, 0), f"SIGINT stops the server (rc {s.proc.returncode})")

# Limits: request bytes, photo pixels, time.
s = Server("--model", model, "--max-bytes", "20000", "--max-pixels", "10000", "--timeout", "30", name="limits")
noise = np.random.default_rng(3).integers(0, 256, (100, 100, 3), np.uint8)
st, _, body = s.post(png(noise))
check(st == 413 and b"larger than 20000 bytes" in body, f"--max-bytes: 413 ({st} {body[:100]!r})")
st, _, body = s.post(png(solid(101, 100, rgb)))
check(st == 413 and b"too large" in body, f"--max-pixels: 413 ({st} {body[:100]!r})")
st, _, body = s.post(png(solid(100, 100, rgb)))
check(st == 200, f"at the limits: 200 ({st})")
s.stop()
s = Server("--model", model, "--timeout", "0.000001", name="timeout")
st, hd, body = s.post(png(solid(50, 40, rgb)))
check(st == 503 and (b"timed out" in body or b"past this request's deadline" in body) and hd.get("Retry-After") == "1",
      f"--timeout: 503, timed out or turned away at the door ({st} {body[:100]!r})")
s.stop()

# Load: 200 requests, 8 at a time, against a queue of 2. Every request gets
# a correct PNG (its own colours, its own matte) or a 503.
s = Server("--model", model, "--queue", "2", "--quiet", name="load")
colours = [(int(v) % 256, (int(v) * 7) % 256, (int(v) * 13) % 256) for v in range(200)]
bodies = [png(solid(40 + i % 7, 30 + i % 5, colours[i])) for i in range(200)]


def one(i):
    try:
        st, hd, body = s.post(bodies[i], timeout=300)
    except Exception as e:  # a dropped connection is a lost request
        return i, "lost", repr(e)
    if st == 503:
        return i, "503", body.decode(errors="replace")
    if st != 200:
        return i, "bad", f"status {st}: {body[:200]!r}"
    try:
        a = decode(body)
    except Exception as e:
        return i, "bad", f"not a PNG: {e}"
    w, h = 40 + i % 7, 30 + i % 5
    ok = (a.shape == (h, w, 4) and (a[..., :3] == colours[i]).all() and
          (np.abs(a[..., 3].astype(int) - alpha_of(colours[i])) <= 1).all())
    return i, "png" if ok else "bad", "" if ok else f"wrong cut-out {a.shape}"


t0 = time.time()
with ThreadPoolExecutor(8) as ex:
    results = list(ex.map(one, range(200)))
took = time.time() - t0
kinds = {k: sum(1 for _, kk, _ in results if kk == k) for k in ("png", "503", "lost", "bad")}
print(f"      load: {kinds} in {took:.1f} s")
check(kinds["lost"] == 0 and kinds["bad"] == 0, f"200 requests at 8 concurrent: none lost or wrong "
      f"({[r for r in results if r[1] in ('lost', 'bad')][:3]})")
check(kinds["png"] + kinds["503"] == 200 and kinds["png"] > 0, f"every request a correct PNG or a 503 ({kinds})")
busy = [r for r in results if r[1] == "503"]
check(all("busy" in r[2] for r in busy), "each 503 says the server is busy")
check(kinds["503"] > 0, f"a queue of 2 under 8 concurrent clients turns some away ({kinds['503']})")
st, _, body = s.request("GET", "/health")
h = json.loads(body)
check(h["served"] == kinds["png"] and h["busy"] == kinds["503"] and h["in_flight"] == 0,
      f"/health counts them: served {h['served']}, busy {h['busy']}, in flight {h['in_flight']}")
s.stop()

# Killed in the middle of requests: large photos keep the server busy while
# the signal comes. Nothing may be left in its folder or its cache folder
# but complete files, and no client may take a cut short answer for a PNG.
big = png(np.random.default_rng(5).integers(0, 256, (1500, 2000, 3), np.uint8))
for sig in (signal.SIGTERM, signal.SIGKILL):
    s = Server("--model", model, "--quiet", "--max-bytes", str(64 << 20), name=f"kill_{sig.name}")
    before = {os.path.relpath(os.path.join(d, f), s.dir) for d, _, fs in os.walk(s.dir) for f in fs}
    outcomes = []

    def client():
        try:
            st, _, body = s.post(big, timeout=120)
            outcomes.append(("answer", st, body))
        except Exception as e:
            outcomes.append(("error", repr(e), b""))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    s.proc.send_signal(sig)
    rc = s.proc.wait(timeout=60)
    for t in threads:
        t.join(timeout=120)
    s.err.close()
    if sig == signal.SIGTERM:
        check(rc == 0, f"SIGTERM mid-request: the server drains and exits 0 (rc {rc})")
        check(all(k == "answer" and st in (200, 503) for k, st, _ in outcomes),
              f"SIGTERM: every admitted request answered, a PNG or a 503 ({[(k, st) for k, st, _ in outcomes]})")
    else:
        check(rc == -sig, f"{sig.name} mid-request: the server dies of it (rc {rc})")
    after = {os.path.relpath(os.path.join(d, f), s.dir) for d, _, fs in os.walk(s.dir) for f in fs}
    new = sorted(after - before)
    check(not [f for f in new if ".tmp-" in f] and not [f for f in after if ".tmp-" in f],
          f"{sig.name}: no temporary file left ({new})")
    check(new == [], f"{sig.name}: the server wrote no file while serving ({new})")
    complete = True
    for kind, st, body in outcomes:
        if kind == "answer" and st == 200:
            try:
                complete &= decode(body).shape == (1500, 2000, 4)
            except Exception:
                complete = False
    check(len(outcomes) == 4 and complete,
          f"{sig.name}: each client got a complete PNG or a broken connection, never a partial PNG "
          f"({[(k, st) for k, st, _ in outcomes]})")

# After a SIGKILL, a new server in the same folders serves again.
s = Server("--model", model, "--quiet", name="restart")
st, _, body = s.post(png(solid(50, 40, rgb)))
check(st == 200 and decode(body).shape == (40, 50, 4), "a new server serves again")
s.stop()

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
