"""wgnn.ray.remove_bg_app on Ray Serve (127.0.0.1, the head's proxy only):
wgnn serve's contract (cut-outs byte for byte the CLI's, its 400 and 413
errors), and a replica killed under bounded load: every request answered,
a cut-out or a clear error, none hanging; the deployment then serves again."""
import http.client
import io
import os
import signal
import socket
import threading
import time

import pytest
from conftest import N_PHOTOS, run_cli
from test_remove_bg_folder import worker_pids

import wgnn
import wgnn.ray

pytestmark = pytest.mark.timeout(300)
CLIENT_TIMEOUT_S = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, query="", content_type="image/jpeg", timeout=CLIENT_TIMEOUT_S):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/remove-bg" + (f"?{query}" if query else ""), body=body,
                  headers={"Content-Type": content_type})
        r = c.getresponse()
        return r.status, r.read(), r.getheader("Content-Type", "")
    finally:
        c.close()


@pytest.fixture(scope="module")
def app(cluster, tiny_model):
    from ray import serve

    port = free_port()
    serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
    serve.run(wgnn.ray.remove_bg_app(model=tiny_model, min_replicas=2, max_replicas=2, num_gpus_per_replica=1,
                                     max_ongoing_requests=4, max_queued_requests=64, timeout_s=20),
              name="remove-bg", route_prefix="/")
    try:
        yield port
    finally:
        serve.shutdown()


def photo_jobs(src):
    """(photo path, its output's path relative to the reference) for the
    first photos of the fixture's folder."""
    jobs = []
    for rel in sorted(os.listdir(src)) + [os.path.join("sub", f) for f in sorted(os.listdir(os.path.join(src, "sub")))]:
        if rel.startswith("p") or rel.startswith("sub"):
            if os.path.isfile(os.path.join(src, rel)):
                jobs.append((os.path.join(src, rel), os.path.splitext(rel)[0] + "_cutout.png"))
    return jobs


def test_too_few_gpus_is_an_error(cluster, tiny_model):
    with pytest.raises(wgnn.Error, match="the cluster has 3"):
        wgnn.ray.remove_bg_app(model=tiny_model, min_replicas=4, max_replicas=4)


def test_contract(app, photos, tiny_model, tmp_path):
    port = app
    src, reference = photos
    jobs = photo_jobs(src)[:6]
    for path, rel in jobs:
        with open(path, "rb") as f:
            status, body, ctype = post(port, f.read())
        assert status == 200 and ctype == "image/png", (status, body[:200])
        assert body == reference[rel], f"the cut-out of {path} differs from the CLI's"
    # The options give the CLI's bytes for the same flags.
    path = jobs[3][0]  # an RGBA PNG (the 4th kind)
    with open(path, "rb") as f:
        data = f.read()
    for query, flags in [("only_mask=1", ["--only-mask"]), ("bg_color=255,0,0", ["--bg-color", "255,0,0"]),
                         ("bg_color=10,20,30,128", ["--bg-color", "10,20,30,128"]),
                         ("post_process=1", ["--post-process"])]:
        out = str(tmp_path / "cli.png")
        r = run_cli([path, "-o", out, "--model", tiny_model, *flags])
        assert r.returncode == 0, r.stderr
        status, body, _ = post(port, data, query, content_type="image/png")
        assert status == 200, body
        with open(out, "rb") as f:
            assert body == f.read(), f"?{query} differs from remove-bg {' '.join(flags)}"
    # Errors: wgnn's messages, 4xx.
    status, body, ctype = post(port, b"GIF89a not a photo")
    assert status == 400 and ctype.startswith("text/plain") and b"looks like a GIF" in body, body
    status, body, _ = post(port, data, "size=3")
    assert status == 400 and b"unknown query parameter 'size'" in body, body
    status, body, _ = post(port, data, "only_mask=1&bg_color=1,2,3")
    assert status == 400 and b"give one of them" in body, body
    status, body, _ = post(port, b"")
    assert status == 400 and b"no photo" in body, body
    status, body, _ = post(port, data[: len(data) // 2], content_type="image/png")
    assert status == 400 and b"cut short" in body, body
    from PIL import Image

    big = io.BytesIO()
    Image.new("L", (5000, 4000)).save(big, "PNG")
    status, body, _ = post(port, big.getvalue(), content_type="image/png")
    assert status == 413 and b"too large" in body, body
    boundary = "wgnnboundary"
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"p.png\"\r\n"
            f"Content-Type: image/png\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    status, body, _ = post(port, form, content_type=f"multipart/form-data; boundary={boundary}")
    assert status == 200 and body == reference[jobs[3][1]]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT_S)
    c.request("GET", "/health")
    r = c.getresponse()
    assert r.status == 200 and b'"status":"ok"' in r.read().replace(b" ", b"")
    c.close()


def test_replica_killed_under_load(app, photos):
    port = app
    src, reference = photos
    jobs = photo_jobs(src)[:80]
    assert len(jobs) == min(80, N_PHOTOS)
    results = [None] * len(jobs)
    answered = [0]
    lock = threading.Lock()

    def client(k):
        for i in range(k, len(jobs), 4):
            with open(jobs[i][0], "rb") as f:
                data = f.read()
            t = time.time()
            try:
                results[i] = post(port, data) + (time.time() - t,)
            except Exception as e:  # noqa: BLE001 - a timeout or a reset: recorded, asserted below
                results[i] = (None, repr(e).encode(), "", time.time() - t)
            with lock:
                answered[0] += 1

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(4)]
    for th in threads:
        th.start()
    deadline = time.time() + 60
    while answered[0] < 15 and time.time() < deadline:
        time.sleep(0.02)
    replicas = worker_pids("ServeReplica:remove-bg")
    assert len(replicas) == 2, f"expected 2 replica processes, found {replicas}"
    killed_at = answered[0]
    os.kill(replicas[0], signal.SIGKILL)
    for th in threads:
        th.join(timeout=CLIENT_TIMEOUT_S * 25)
    assert not any(th.is_alive() for th in threads), "a client is still waiting"
    assert killed_at < len(jobs), "the load ended before the kill"
    ok, errors = 0, []
    for (path, rel), (status, body, ctype, seconds) in zip(jobs, results):
        assert status is not None, f"{path}: no answer ({body.decode()}) after {seconds:.1f} s"
        if status == 200:
            assert body == reference[rel], f"{path}: a 200 whose PNG differs from the CLI's"
            ok += 1
        else:
            # A request on the killed replica: a server error that says so, never a hang or a cut PNG.
            assert status in (500, 502, 503, 504) and body.strip(), (path, status, body[:300])
            errors.append((status, body.decode(errors="replace").strip()[:120]))
    print(f"killed replica pid {replicas[0]} after {killed_at} answers: {ok} cut-outs, {len(errors)} errors {errors}")
    # The deployment is whole again: requests succeed (Serve restarts the replica).
    deadline = time.time() + 120
    good = 0
    while good < 10 and time.time() < deadline:
        path, rel = jobs[good]
        with open(path, "rb") as f:
            status, body, _ = post(port, f.read())
        if status == 200:
            assert body == reference[rel]
            good += 1
        else:
            time.sleep(0.5)
    assert good == 10, "the deployment did not serve again within 120 s of the kill"
    deadline = time.time() + 120
    while len(worker_pids("ServeReplica:remove-bg")) < 2 and time.time() < deadline:
        time.sleep(0.5)
    assert len(worker_pids("ServeReplica:remove-bg")) == 2, "Serve did not restart the killed replica"
