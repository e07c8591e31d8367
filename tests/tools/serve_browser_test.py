"""`wgnn serve`'s page in headless Chromium (Debian's chromium), driven
through the DevTools protocol (python3-websocket): a photo is dropped on
the page (a drag-and-drop of a file) and then chosen through its file
input, and the cut-out the page shows and offers for download is checked
against `wgnn remove-bg` on the same photo with the same model; a file
that is not a photo shows the server's error.

The model is ISNet at 64x64 when MODEL is given (scripts/setup's
isnet_any_size.onnx; small so that lavapipe runs it in seconds), else the
tiny matting model.

usage: serve_browser_test.py WGNN WORKDIR [MODEL]
Exits 77 (skipped) when chromium or python3-websocket is missing.
"""
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import numpy as np
from PIL import Image

WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
MODEL = sys.argv[3] if len(sys.argv) > 3 else None
CHROMIUM = shutil.which("chromium")
try:
    import websocket
except ImportError:
    websocket = None
if CHROMIUM is None or websocket is None:
    print("skipped: needs Debian's chromium and python3-websocket (scripts/setup installs them)")
    sys.exit(77)
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_matting import matting_model  # noqa: E402


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


tiny = not MODEL
if MODEL:
    model_args = ["--model", MODEL, "--size", "64"]
else:
    MODEL = os.path.join(WORK, "m.onnx")
    matting_model(MODEL, 64, 64)
    model_args = ["--model", MODEL]

# A photo: a bright disc on a dark, slightly noisy ground.
h, w = 90, 120
yy, xx = np.mgrid[0:h, 0:w]
photo = np.full((h, w, 3), (30, 40, 50), np.uint8)
photo[(yy - 45) ** 2 + (xx - 60) ** 2 < 30 ** 2] = (240, 220, 200)
photo = np.clip(photo.astype(int) + np.random.default_rng(1).integers(-8, 9, photo.shape), 0, 255).astype(np.uint8)
photo_path = os.path.join(WORK, "disc photo.png")
Image.fromarray(photo).save(photo_path)
bad_path = os.path.join(WORK, "notes.png")
with open(bad_path, "w") as f:
    f.write("not a photo\n")

# The reference: the CLI on the same photo and model.
ref_path = os.path.join(WORK, "reference.png")
p = subprocess.run([WGNN, "remove-bg", photo_path, "-o", ref_path, *model_args, "--quiet"], capture_output=True,
                   text=True, timeout=900)
if p.returncode != 0:
    sys.exit(f"FAIL: remove-bg: {p.stderr}")
reference = np.asarray(Image.open(ref_path))

server = subprocess.Popen([WGNN, "serve", "--port", "0", *model_args], stdout=subprocess.PIPE,
                          stderr=open(os.path.join(WORK, "server.txt"), "w"), text=True)
line = server.stdout.readline()
if "listening on" not in line:
    server.kill()
    sys.exit(f"FAIL: the server did not start: {line!r}")
url = line.split("listening on ")[1].split(" ")[0]

profile = os.path.join(WORK, "profile")
browser = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--no-default-browser-check", "--remote-debugging-port=0", "--remote-allow-origins=*",
                            f"--user-data-dir={profile}", "about:blank"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


class Page:
    """One page target over the DevTools protocol."""

    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=600)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method, timeout=60):
        t = time.time() + timeout
        while time.time() < t:
            for i, e in enumerate(self.events):
                if e["method"] == method:
                    return self.events.pop(i)
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise RuntimeError(f"no {method} within {timeout} s")

    def js(self, expr, await_promise=False):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_state(self, timeout):
        t = time.time() + timeout
        while time.time() < t:
            state = self.js("document.body.dataset.state")
            if state in ("done", "error"):
                return state
            time.sleep(0.1)
        return "timeout"


try:
    port = None
    t_end = time.time() + 60
    while port is None and time.time() < t_end:
        l = browser.stderr.readline()
        if "DevTools listening on ws://" in l:
            port = int(l.split("ws://127.0.0.1:")[1].split("/")[0])
    if port is None:
        sys.exit("FAIL: chromium did not start its DevTools endpoint")
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
    page = Page(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
    page.call("Page.enable")
    page.call("Runtime.enable")
    page.call("Page.navigate", url=url)
    page.wait_event("Page.loadEventFired")
    check(page.js("document.title").startswith("wgnn"), "the page loads")

    def result_png():
        b64 = page.js("""(async () => {
            const r = await fetch(document.getElementById('download').href);
            const b = new Uint8Array(await r.arrayBuffer());
            let s = '';
            for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode.apply(null, b.subarray(i, i + 8192));
            return btoa(s);
        })()""", await_promise=True)
        return base64.b64decode(b64)

    def check_result(how):
        state = page.wait_state(600)
        status = page.js("document.getElementById('status').textContent")
        check(state == "done", f"{how}: the page shows the cut-out (state {state}, status '{status}')")
        if state != "done":
            return
        info = page.js("""(() => { const img = document.getElementById('cutout'); const a = document.getElementById('download');
            return {w: img.naturalWidth, h: img.naturalHeight, shown: getComputedStyle(document.getElementById('result')).display,
                    bg: getComputedStyle(img).backgroundImage, name: a.download, href: a.href}; })()""")
        check(info["w"] == w and info["h"] == h and info["shown"] == "block",
              f"{how}: the image is shown at the photo's size ({info['w']}x{info['h']}, {info['shown']})")
        check(info["bg"].count("linear-gradient") == 4, f"{how}: over a checkerboard ({info['bg'][:60]}...)")
        check(info["name"] == "disc photo_cutout.png" and info["href"].startswith("blob:"),
              f"{how}: a download link named after the photo ({info['name']}, {info['href'][:12]})")
        data = result_png()
        got = np.asarray(Image.open(io.BytesIO(data)))
        check(data[:8] == b"\x89PNG\r\n\x1a\n" and got.shape == reference.shape and (got == reference).all(),
              f"{how}: the downloaded PNG is remove-bg's cut-out of the photo ({got.shape})")
        # The tiny model's matte follows the brightness: the disc is kept
        # more than the ground (ISNet at 64x64 sees little in this photo).
        if tiny:
          check(int(got[45, 60, 3]) > int(got[5, 5, 3]), f"{how}: the disc is kept more than the ground "
                f"(alpha {got[45, 60, 3]} inside, {got[5, 5, 3]} outside)")

    # 1. Dropped on the drop zone.
    box = page.js("(() => { const r = document.getElementById('drop').getBoundingClientRect();"
                  " return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()")
    drag = {"items": [], "files": [photo_path], "dragOperationsMask": 1}
    for kind in ("dragEnter", "dragOver", "drop"):
        page.call("Input.dispatchDragEvent", type=kind, x=box["x"], y=box["y"], data=drag)
    check_result("dropped")

    # 2. Chosen through the file input, after a file that is not a photo.
    doc = page.call("DOM.getDocument")
    node = page.call("DOM.querySelector", nodeId=doc["root"]["nodeId"], selector="#file")["nodeId"]
    page.js("document.body.dataset.state = 'idle'")
    page.call("DOM.setFileInputFiles", nodeId=node, files=[bad_path])
    state = page.wait_state(120)
    status = page.js("document.getElementById('status').textContent")
    check(state == "error" and "not an image" in status and
          page.js("getComputedStyle(document.getElementById('result')).display") == "none",
          f"a file that is not a photo: the server's error on the page ('{status[:100]}')")
    page.js("document.body.dataset.state = 'idle'")
    page.call("DOM.setFileInputFiles", nodeId=node, files=[photo_path])
    check_result("chosen")
finally:
    browser.kill()
    browser.wait()
    server.kill()
    server.wait()

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
