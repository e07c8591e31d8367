"""wgnn.ray's tests (scripts/test-ray, in .venv-ray): a local Ray cluster of
three nodes on this machine (ray.cluster_utils.Cluster), GPUs declared as
num_gpus (the head none, one node two, one node one: Ray then sets
CUDA_VISIBLE_DEVICES per actor as on a GPU machine, while wgnn runs on
whatever adapter the machine has, lavapipe on CI), photos made here, and
the CLI that scripts/setup built (build/wgnn) as the reference."""
import os
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_PHOTOS = int(os.environ.get("WGNN_RAY_TEST_PHOTOS", "300"))
TINY_SIDE = 64


def build_dir():
    return os.environ.get("WGNN_BUILD_DIR", os.path.join(ROOT, "build"))


def cli():
    path = os.path.join(build_dir(), "wgnn")
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{path} is missing: run scripts/setup (the tests compare with the CLI it builds)")
    return path


def isnet_any_size():
    for d in (os.path.join(build_dir(), "models"), os.path.join(ROOT, ".deps", "models")):
        p = os.path.join(d, "isnet_any_size.onnx")
        if os.path.exists(p):
            return p
    raise AssertionError("isnet_any_size.onnx is missing: run scripts/setup")


def tiny_matting(path, side=TINY_SIDE):
    """A small matting model (two 3x3 convolutions, a sigmoid) with a fixed
    side x side input: the CLI's ISNet pre-processing, quick on lavapipe."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w1 = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(np.zeros(4, np.float32), "b1")
    w2 = numpy_helper.from_array((rng.standard_normal((1, 4, 3, 3)) * 0.3).astype(np.float32), "w2")
    b2 = numpy_helper.from_array(np.zeros(1, np.float32), "b2")
    g = helper.make_graph(
        [helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
         helper.make_node("Sigmoid", ["c2"], ["output"])],
        "tiny_matting", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, side, side])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, side, side])], [w1, b1, w2, b2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def make_photos(folder, n, seed=1, max_side=220):
    """n photos of varied sizes: JPEG, JPEG with an EXIF orientation (2 to
    8), RGB PNG, RGBA PNG, gray JPEG (upper-case .JPG), palette PNG, and a
    few in a subfolder. A disk on a gradient, with noise."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(folder, "sub"), exist_ok=True)
    names = []
    for i in range(n):
        w, h = int(rng.integers(16, max_side)), int(rng.integers(16, max_side))
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1), ((xx + yy) * 3) % 256], -1)
        disk = (xx - w / 2) ** 2 + (yy - h / 2) ** 2 < (min(w, h) / 3) ** 2
        base[disk] = rng.integers(0, 255, 3)
        base = np.clip(base + rng.integers(-20, 20, base.shape), 0, 255).astype(np.uint8)
        im = Image.fromarray(base)
        sub = "sub" if i % 10 == 9 else ""
        kind = i % 6
        stem = os.path.join(folder, sub, f"p{i:04d}")
        if kind == 0:
            path = stem + ".jpg"
            im.save(path, quality=85)
        elif kind == 1:
            exif = Image.Exif()
            exif[0x0112] = int(rng.integers(2, 9))
            path = stem + ".jpeg"
            im.save(path, quality=90, exif=exif)
        elif kind == 2:
            path = stem + ".png"
            im.save(path)
        elif kind == 3:
            a = np.where(disk, 255, rng.integers(0, 255, (h, w))).astype(np.uint8)
            path = stem + ".png"
            Image.fromarray(np.dstack([base, a])).save(path)
        elif kind == 4:
            path = stem + ".JPG"
            im.convert("L").save(path, quality=80)
        else:
            path = stem + ".png"
            im.convert("P", palette=Image.Palette.ADAPTIVE, colors=32).save(path)
        names.append(path)
    return names


def run_cli(args, timeout=600):
    r = subprocess.run([cli(), "remove-bg", *args, "--quiet"], capture_output=True, text=True, timeout=timeout)
    return r


def outputs_of(folder):
    """Every file below `folder`, relative, with its bytes."""
    found = {}
    for root, _dirs, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                found[os.path.relpath(p, folder)] = fh.read()
    return found


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("wgnn_ray")


@pytest.fixture(scope="session")
def tiny_model(work):
    return tiny_matting(str(work / "tiny_matting.onnx"))


@pytest.fixture(scope="session")
def photos(work, tiny_model):
    """The photos (N_PHOTOS, and one file that is not a photo), and the
    CLI's cut-outs of them (`wgnn remove-bg SRC -o REF --recursive` with the
    tiny model): {relative output path: bytes}."""
    src = str(work / "photos")
    make_photos(src, N_PHOTOS)
    with open(os.path.join(src, "broken.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 this is not a JPEG")
    ref = str(work / "reference")
    r = run_cli([src, "-o", ref, "--recursive", "--model", tiny_model])
    # One photo fails (broken.jpg): the CLI says so and exits 1.
    assert r.returncode == 1 and "broken.jpg" in r.stderr, r.stderr[-2000:]
    return src, outputs_of(ref)


@pytest.fixture(scope="session")
def cluster():
    """Three nodes: the head (2 CPUs, no GPU), node A (2 CPUs, 2 GPUs) and
    node B (2 CPUs, 1 GPU); the driver connected to it."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    store = 120 * 1024 * 1024
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 0, "object_store_memory": store,
                                                      "include_dashboard": False})
    c.add_node(num_cpus=2, num_gpus=2, object_store_memory=store, resources={"node_a": 1})
    c.add_node(num_cpus=2, num_gpus=1, object_store_memory=store, resources={"node_b": 1})
    c.wait_for_nodes(timeout=120)
    ray.init(address=c.address, include_dashboard=False, log_to_driver=True)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture
def fresh_dir(tmp_path):
    d = tmp_path / "out"
    yield str(d)
    shutil.rmtree(d, ignore_errors=True)
