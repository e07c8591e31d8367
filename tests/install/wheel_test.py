"""Installs the repaired wheel (dist/, made by scripts/wheel) into fresh
environments and runs tests/install/wheel_check.py there: a small model and
ISNet against ONNX Runtime, and remove_bg, on whatever Vulkan driver the
environment has (the bundled lavapipe on a machine without a GPU).

  --python PY     a fresh venv of this interpreter on this machine (repeatable)
  --root DIR      a fresh venv of DIR's /usr/bin/python3 inside DIR, a root
                  file system of another distribution (debootstrap: see
                  docs/INSTALL.md, "Wheel"), entered with chroot (as root)

Run with a Python that has numpy, onnx and onnxruntime (the checkout's .venv):
the references are computed here, before any wheel is installed. pip takes
wgnn from dist/ only (--no-index) and numpy from the package index.
Prints one JSON line per environment, then 'N passed, N failed'.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUMPY = "numpy==2.4.6"  # python/requirements.txt's pin; it has wheels for CPython 3.11 to 3.14
SIZE = 128  # ISNet's input size here (the first run compiles every kernel: tens of seconds on lavapipe)


def prepare(d, isnet):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(59)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    g = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "g")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("GlobalAveragePool", ["r"], ["p"]),
            helper.make_node("Flatten", ["p"], ["f"]),
            helper.make_node("Gemm", ["f", "g"], ["l"]),
            helper.make_node("Softmax", ["l"], ["y"], axis=1),
        ],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [w, b, g],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "small.onnx"))
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(os.path.join(d, "small_x.npy"), x)
    cpu = ["CPUExecutionProvider"]
    (y,) = ort.InferenceSession(os.path.join(d, "small.onnx"), providers=cpu).run(None, {"x": x})
    np.save(os.path.join(d, "small_ort.npy"), y)

    # A photo: a bright disc on a dark gradient, and ISNet's input for it
    # (python/examples/isnet_session.py's normalisation).
    yy, xx = np.mgrid[0:300, 0:400]
    photo = np.stack([xx * 0.2, yy * 0.2, 40 + 0 * xx], -1)
    disc = (xx - 200) ** 2 + (yy - 150) ** 2 < 90**2
    photo[disc] = [230, 180, 60]
    photo = photo.astype(np.uint8)
    np.save(os.path.join(d, "photo.npy"), photo)
    shutil.copy(isnet, os.path.join(d, "isnet_any_size.onnx"))
    from PIL import Image

    small_photo = Image.fromarray(photo).resize((SIZE, SIZE), Image.BILINEAR)
    xi = ((np.asarray(small_photo, np.float32) - 128) / 256).transpose(2, 0, 1)[None].copy()
    np.save(os.path.join(d, "isnet_x.npy"), xi)
    # ISNet with a free input size (ONNX Runtime checks the declared
    # 1024x1024 otherwise), for both runtimes.
    sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
    from isnet_reference import free_size_copy

    free_size_copy(isnet, os.path.join(d, "isnet_free.onnx"))
    s = ort.InferenceSession(os.path.join(d, "isnet_free.onnx"), providers=cpu)
    (m,) = s.run([s.get_outputs()[0].name], {s.get_inputs()[0].name: xi})
    np.save(os.path.join(d, "isnet_ort.npy"), m)
    try:  # the checkout's own package (scripts/setup's .venv), when this Python has it
        import wgnn

        np.save(os.path.join(d, "remove_bg_ref.npy"), wgnn.remove_bg(photo, model=isnet, size=SIZE)[..., 3])
    except ImportError:
        pass
    shutil.copy(os.path.join(ROOT, "tests", "install", "wheel_check.py"), d)


def run(cmd, **kw):
    # This process's environment as it started: the checkout's wgnn, imported
    # by prepare(), pointed VK_DRIVER_FILES at its own lavapipe since.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "WGNN_"))}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    if r.returncode != 0:
        sys.stderr.write(f"$ {' '.join(cmd)}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r


def check_env(label, prefix, d, python, wheels):
    """Makes a venv with `python` in d (as `prefix` runs it), installs, checks."""
    venv = os.path.join(d, "venv")
    steps = [
        [python, "-m", "venv", venv],
        [venv + "/bin/pip", "install", "-q", "--disable-pip-version-check", NUMPY],
        [venv + "/bin/pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--find-links", wheels, "wgnn"],
        [venv + "/bin/python", os.path.join(d, "wheel_check.py"), d],
    ]
    for cmd in steps:
        r = run(prefix + cmd)
        if r.returncode != 0:
            lines = r.stdout.strip().splitlines()
            res = json.loads(lines[-1]) if cmd is steps[-1] and lines[-1:] and lines[-1].startswith("{") else {}
            print(json.dumps({"env": label, **res, "ok": False, "failed": " ".join(cmd[1:])}))
            return False
    res = json.loads(r.stdout.strip().splitlines()[-1])
    r = run(prefix + [venv + "/bin/pip", "list", "--format=freeze"])
    res["installed"] = [line for line in r.stdout.split() if line.startswith(("wgnn", "numpy"))]
    print(json.dumps({"env": label, **res}))
    return res["ok"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", action="append", default=[])
    ap.add_argument("--root", action="append", default=[])
    ap.add_argument("--wheels", default=os.path.join(ROOT, "dist"))
    ap.add_argument("--isnet", default=os.path.join(ROOT, ".deps", "models", "isnet_any_size.onnx"))
    a = ap.parse_args()
    if not glob.glob(os.path.join(a.wheels, "wgnn-*manylinux*.whl")):
        sys.exit(f"no repaired wheel in {a.wheels}: scripts/wheel makes it")
    ref = tempfile.mkdtemp(prefix="wgnn-wheel-ref-")
    prepare(ref, a.isnet)
    passed = failed = 0
    for py in a.python:
        d = tempfile.mkdtemp(prefix="wgnn-wheel-")
        for f in os.listdir(ref):
            shutil.copy(os.path.join(ref, f), d)
        good = check_env(f"host {py}", [], d, py, a.wheels)
        passed, failed = passed + good, failed + (not good)
        if good:
            shutil.rmtree(d)
    for root in a.root:
        # The root sees the wheels, the inputs and this machine's certificates
        # and pip settings; /proc is mounted for the time of the run.
        d_in = "/tmp/wgnn-wheel-test"
        d = root + d_in
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(ref, d)
        shutil.copytree(a.wheels, d + "/wheels")
        for f in ["/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt", "/etc/pip.conf"]:
            if os.path.exists(f):
                os.makedirs(os.path.dirname(root + f), exist_ok=True)
                shutil.copy(f, root + f)
        mounted = not os.path.ismount(root + "/proc")
        if mounted:
            subprocess.run(["mount", "-t", "proc", "proc", root + "/proc"], check=True)
        try:
            env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
            env.update({k: v for k, v in os.environ.items() if k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT")})
            prefix = ["chroot", root, "env", "-i"] + [f"{k}={v}" for k, v in env.items()]
            with open(root + "/etc/os-release") as f:
                name = next(line.split("=", 1)[1].strip().strip('"') for line in f if line.startswith("PRETTY_NAME="))
            good = check_env(f"{name} ({root})", prefix, d_in, "/usr/bin/python3", d_in + "/wheels")
        finally:
            if mounted:
                subprocess.run(["umount", root + "/proc"], check=False)
        passed, failed = passed + good, failed + (not good)
        if good:
            shutil.rmtree(d)
    shutil.rmtree(ref)
    print(f"{passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
