"""`wgnn serve`'s remove-bg endpoint as a Ray Serve deployment
(docs/SCALING.md, "Ray Serve"): one replica per GPU, Serve's autoscaling
between min_replicas and max_replicas.

    from ray import serve
    import wgnn.ray
    serve.run(wgnn.ray.remove_bg_app(max_replicas=8), route_prefix="/")
    # curl -H 'Content-Type: image/jpeg' --data-binary @photo.jpg localhost:8000/remove-bg > cutout.png

The HTTP contract is tools/serve.cpp's (docs/REMOVE_BG.md): POST /remove-bg
with the photo as the body (or a multipart form's field 'file', else its
first), query parameters only_mask, post_process and bg_color=R,G,B[,A]
(any other: 400); 200 with the cut-out PNG (the bytes `wgnn serve` and
`wgnn remove-bg` give) and X-Wgnn-Run-Ms (here the photo's whole time in
the replica: decode, cut-out, encode; wgnn serve's is the GPU run); errors as
text/plain "error: ...": 400 for a body that is not a photo (wgnn's decoder
message), a truncated photo, a bad parameter or an empty body; 413 for a
body over max_bytes, a urlencoded body over 8 KiB or a photo over
max_pixels; 503 with Retry-After when the replica's time limit (timeout_s,
or less with X-Wgnn-Deadline-Ms) passes (a photo already on the device
finishes there, unanswered); 500 when the GPU fails. GET
/health answers JSON for the replica that takes it. Admission: Serve's
max_ongoing_requests per replica and max_queued_requests (503 past it, from
Serve's proxy); wgnn serve's Host/Origin checks and token are not repeated
here: put Serve behind what guards the cluster.
"""
import asyncio
import email.parser
import email.policy
import os
import time
from urllib.parse import parse_qsl

import wgnn

from ._photo import Cutter, parse_color

_FLAG_TRUE = ("", "1", "true", "yes", "on")
_FLAG_FALSE = ("0", "false", "no", "off")


class HttpError(Exception):
    def __init__(self, status, message, retry_after=None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


def _flag(name, v):
    if v in _FLAG_TRUE:
        return True
    if v in _FLAG_FALSE:
        return False
    raise HttpError(400, f"{name}={v}: give 1 or 0 (true or false)")


def parse_query(query):
    """tools/serve.cpp's parse_query: only_mask, post_process, bg_color."""
    opts = {"only_mask": False, "post_process": False, "bg_color": None}
    for k, v in parse_qsl(query, keep_blank_values=True):
        if k == "only_mask":
            opts["only_mask"] = _flag(k, v)
        elif k == "post_process":
            opts["post_process"] = _flag(k, v)
        elif k == "bg_color":
            try:
                opts["bg_color"] = parse_color(v, "bg_color")
            except wgnn.Error as e:
                raise HttpError(400, str(e)) from None
        else:
            raise HttpError(400, f"unknown query parameter '{k}'; accepted: only_mask, post_process, "
                                 "bg_color=R,G,B[,A]")
    if opts["only_mask"] and opts["bg_color"] is not None:
        raise HttpError(400, "only_mask gives the matte, bg_color a composite: give one of them")
    return opts


def _form_file(content_type, body):
    """A multipart form's field 'file', else its first part."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    parts = [p for p in msg.iter_parts()] if msg.is_multipart() else []
    if not parts:
        raise HttpError(400, "the form holds no file: send the photo as the field 'file'")
    for p in parts:
        if p.get_param("name", header="content-disposition") == "file":
            return p.get_payload(decode=True) or b""
    return parts[0].get_payload(decode=True) or b""


def _truncated(body):
    """serve_guard::incomplete_photo's main cases: a PNG without IEND or a
    JPEG without its end marker."""
    if body[:8] == b"\x89PNG\r\n\x1a\n" and b"IEND" not in body[-16:]:
        return "a PNG cut short (no IEND chunk)"
    if body[:3] == b"\xff\xd8\xff" and b"\xff\xd9" not in body[-16:]:
        return "a JPEG cut short (no end marker)"
    return ""


class RemoveBgDeployment:
    """The replica: a Cutter (model, size, preprocess, adapter: as
    wgnn.ray.Cutter) made once; requests run on it one at a time (the device
    runs one photo at a time), their decoding and encoding in threads."""

    def __init__(self, model=None, size=0, preprocess="auto", adapter=None, max_bytes=32 << 20,
                 max_pixels=4096 * 4096, timeout_s=60.0):
        self.cutter = Cutter(model, size=size, preprocess=preprocess, adapter=adapter)
        self.max_bytes, self.max_pixels, self.timeout_s = int(max_bytes), int(max_pixels), float(timeout_s)
        self.served = self.failed = self.in_flight = 0
        self.adapter = wgnn.get_device_info(adapter).get("adapter", "")
        # The first run builds the graph and compiles its shaders: done here,
        # not in the first request (as wgnn serve's blank photo).
        import numpy as np

        self.cutter.cut(np.zeros((32, 32, 3), np.uint8))

    def _work(self, body, opts):
        if not body:
            raise HttpError(400, "no photo: send a PNG, JPEG, WebP or TIFF as the request body")
        why = _truncated(body)
        if why:
            raise HttpError(400, f"the photo is {why}")
        t0 = time.perf_counter()
        try:
            png = self.cutter.cut_bytes(body, "the photo", max_pixels=self.max_pixels, **opts)
        except wgnn.GpuError as e:
            if isinstance(e, wgnn.DeviceLost):
                from . import _die_on_device_loss

                _die_on_device_loss(e)
            raise HttpError(500, str(e)) from None
        except wgnn.HostOutOfMemory:
            raise HttpError(503, "out of host memory for this photo", retry_after=1) from None
        except wgnn.Error as e:
            # What the photo is to blame for: not a photo, too large, a size the model refuses.
            raise HttpError(413 if "too large" in str(e) else 400, str(e)) from None
        return png, (time.perf_counter() - t0) * 1e3

    async def __call__(self, request):
        from starlette.responses import JSONResponse, Response

        def text(status, message, retry_after=None):
            headers = {"Retry-After": str(retry_after)} if retry_after else None
            return Response(f"error: {message}\n", status_code=status, media_type="text/plain; charset=utf-8",
                            headers=headers)

        path = request.url.path.rstrip("/") or "/"
        if path.endswith("/health") and request.method == "GET":
            return JSONResponse({"status": "ok", "model": os.path.basename(self.cutter.model),
                                 "size": self.cutter.size, "adapter": self.adapter, "pid": os.getpid(),
                                 "in_flight": self.in_flight, "served": self.served, "failed": self.failed})
        if not path.endswith("/remove-bg"):
            return text(404, f"no such page '{request.url.path}'; there are /health and POST /remove-bg")
        if request.method != "POST":
            return text(405, "POST the photo to /remove-bg")
        self.in_flight += 1
        try:
            limit = self.timeout_s
            deadline_ms = request.headers.get("x-wgnn-deadline-ms")
            if deadline_ms is not None:
                try:
                    ms = int(deadline_ms.strip())
                except ValueError:
                    ms = 0
                if ms <= 0:
                    raise HttpError(400, "X-Wgnn-Deadline-Ms: give the milliseconds the client waits, 1 or more")
                limit = min(limit, ms / 1e3)
            opts = parse_query(request.url.query)
            ctype = request.headers.get("content-type", "")
            form = ctype.startswith("application/x-www-form-urlencoded")
            limit_bytes = min(self.max_bytes, 8192) if form else self.max_bytes
            chunks, total = [], 0
            async for chunk in request.stream():
                total += len(chunk)
                if total > limit_bytes:
                    if form:
                        raise HttpError(413, "a body sent as application/x-www-form-urlencoded (curl --data-binary's "
                                             "default) is limited to 8 KiB: send the photo with its own type (curl -H "
                                             "'Content-Type: image/jpeg' --data-binary @photo.jpg) or as a form's file "
                                             "(curl -F file=@photo.jpg)")
                    raise HttpError(413, f"the request is larger than {self.max_bytes} bytes (max_bytes)")
                chunks.append(chunk)
            body = b"".join(chunks)
            if ctype.startswith("multipart/form-data"):
                body = _form_file(ctype, body)
            try:
                png, run_ms = await asyncio.wait_for(asyncio.to_thread(self._work, body, opts), limit)
            except asyncio.TimeoutError:
                raise HttpError(503, f"timed out: no cut-out within {limit:g} s", retry_after=1) from None
            self.served += 1
            return Response(png, media_type="image/png", headers={"X-Wgnn-Run-Ms": f"{run_ms:.1f}"})
        except HttpError as e:
            self.failed += 1
            return text(e.status, e.message, e.retry_after)
        except MemoryError:
            self.failed += 1
            return text(503, "out of host memory for this photo", 1)
        finally:
            self.in_flight -= 1


def remove_bg_app(model=None, size=0, preprocess="auto", min_replicas=1, max_replicas=1, num_gpus_per_replica=1,
                  num_cpus_per_replica=1, target_ongoing_requests=2, max_ongoing_requests=4, max_queued_requests=16,
                  max_bytes=32 << 20, max_pixels=4096 * 4096, timeout_s=60.0, adapter=None, name="wgnn-remove-bg"):
    """The bound application for serve.run(): RemoveBgDeployment with one
    replica per GPU (ray_actor_options num_gpus=num_gpus_per_replica; 0 on
    CPU-only nodes), Serve's autoscaling between min_replicas and
    max_replicas (a fixed count when they are equal), at most
    max_ongoing_requests at once per replica and max_queued_requests
    waiting (503 past it; -1: no limit)."""
    from ray import serve

    if not 1 <= min_replicas <= max_replicas:
        raise wgnn.Error(f"replicas: give 1 <= min_replicas ({min_replicas}) <= max_replicas ({max_replicas})")
    import ray

    if ray.is_initialized() and num_gpus_per_replica:
        # serve.run would wait for GPUs that never come: say so instead.
        gpus = ray.cluster_resources().get("GPU", 0)
        if gpus < num_gpus_per_replica * min_replicas:
            raise wgnn.Error(f"{min_replicas} replicas of {num_gpus_per_replica} GPUs, and the cluster has {gpus:g}: "
                             "start its GPU nodes first, or give num_gpus_per_replica=0 for CPU nodes (lavapipe)")
    options = dict(name=name, ray_actor_options={"num_gpus": num_gpus_per_replica, "num_cpus": num_cpus_per_replica},
                   max_ongoing_requests=max_ongoing_requests, max_queued_requests=max_queued_requests)
    if min_replicas == max_replicas:
        options["num_replicas"] = min_replicas
    else:
        options["autoscaling_config"] = {"min_replicas": min_replicas, "max_replicas": max_replicas,
                                         "target_ongoing_requests": target_ongoing_requests}
    model = os.path.abspath(model) if model is not None else None
    return serve.deployment(RemoveBgDeployment).options(**options).bind(
        model=model, size=size, preprocess=preprocess, adapter=adapter, max_bytes=max_bytes, max_pixels=max_pixels,
        timeout_s=timeout_s)
