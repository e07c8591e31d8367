"""The examples on ISNet and the astronaut photo (docs/PYTHON.md):
python/examples/remove_bg.py gives the pixels of the CLI's files bit for bit, and
python/examples/isnet_session.py gives ONNX Runtime's matte within the
tolerance below when `wgnn` is swapped for `onnxruntime`. ISNet runs at
320x320 (the derived any-size model) to stay quick on lavapipe."""
import os
import subprocess
import sys

import numpy as np
import onnx
from conftest import ROOT, astronaut, cli, isnet_any_size
from PIL import Image

EXAMPLES = os.path.join(ROOT, "python", "examples")
SIZE = 320


def test_remove_bg_matches_cli_bit_for_bit(workdir):
    photo, model = astronaut(), isnet_any_size()
    cli_out, py_out = os.path.join(workdir, "cli.png"), os.path.join(workdir, "py.png")
    subprocess.run([cli(), "remove-bg", photo, "-o", cli_out, "--mask", cli_out[:-4] + "_mask.png",
                    "--model", model, "--size", str(SIZE), "--quiet"], check=True)
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "remove_bg.py"), photo, py_out, "--model", model,
                    "--size", str(SIZE)], check=True)
    for a, b in [(cli_out, py_out), (cli_out[:-4] + "_mask.png", py_out[:-4] + "_mask.png")]:
        x, y = np.asarray(Image.open(a)), np.asarray(Image.open(b))
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x, y), f"{b} differs from the CLI's {a} in {np.count_nonzero(x != y)} values"
    alpha = np.asarray(Image.open(py_out))[..., 3]
    assert 0.2 < np.mean(alpha > 128) < 0.8  # a subject was found, not an empty or full matte


def test_remove_bg_arrays():
    import wgnn

    photo = np.asarray(Image.open(astronaut()).convert("RGB"))
    rgba = wgnn.remove_bg(photo, model=isnet_any_size(), size=SIZE)
    assert rgba.shape == photo.shape[:2] + (4,) and rgba.dtype == np.uint8
    np.testing.assert_array_equal(rgba[..., :3], photo)
    # RGBA in: the photo's alpha multiplies the matte (transparent stays so).
    with_alpha = np.dstack([photo, np.zeros(photo.shape[:2], np.uint8)])
    assert not wgnn.remove_bg(with_alpha, model=isnet_any_size(), size=SIZE)[..., 3].any()
    for bad in (photo[..., :2], photo.astype(np.float32), photo[0]):
        try:
            wgnn.remove_bg(bad, model=isnet_any_size(), size=SIZE)
        except (wgnn.Error, TypeError) as e:
            assert "uint8" in str(e) or "HxWx" in str(e)
        else:
            raise AssertionError(f"remove_bg took a {bad.dtype} {bad.shape} image")


def test_session_script_wgnn_vs_onnxruntime(workdir):
    """The same script with either runtime. ONNX Runtime checks the declared
    1024x1024, so both get a copy of the model with a free height and width.
    Tolerance: every matte value within 5e-3 + 1e-2 |ref| (ISNet's float16
    weights; measured on lavapipe 2026-12-01: max error 2.5e-3, mean 1.8e-4)."""
    m = onnx.load(isnet_any_size())
    for d in m.graph.input[0].type.tensor_type.shape.dim[2:]:
        d.Clear()
        d.dim_param = "hw"
    for o in m.graph.output:
        for d in o.type.tensor_type.shape.dim[2:]:
            d.Clear()
    free = os.path.join(workdir, "isnet_free.onnx")
    onnx.save(m, free)
    out = {}
    for rt in ("wgnn", "onnxruntime"):
        out[rt] = os.path.join(workdir, f"{rt}.npy")
        subprocess.run([sys.executable, os.path.join(EXAMPLES, "isnet_session.py"), free, astronaut(), out[rt],
                        "--size", str(SIZE), "--runtime", rt], check=True)
    got, want = np.load(out["wgnn"]), np.load(out["onnxruntime"])
    assert got.shape == want.shape == (1, 1, SIZE, SIZE) and got.dtype == want.dtype
    err = np.abs(got.astype(np.float64) - want)
    print(f"matte: max error {err.max():.2e}, mean {err.mean():.2e}")
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-3)


def test_one_session_serves_photo_sizes_of_one_structure_in_one_plan():
    """ISNet (isnet_any_size.onnx declares a free height and width) at two
    photo sizes in one InferenceSession, growing and back: the two sizes
    record graphs of one structure, so they are one plan, over the
    Session's one set of buffers, grown to the larger; the smaller size,
    run first, runs again over the grown buffers. Each matte is checked against ONNX Runtime's
    (tolerance as in the test above). Which sizes share a structure depends
    on the kernels the device picks (an in-place concatenation where the
    parts are aligned, a split product): on lavapipe 96 and 128 px do."""
    import onnxruntime as ort
    import wgnn
    model = isnet_any_size()
    assert [d.dim_param for d in onnx.load(model).graph.input[0].type.tensor_type.shape.dim[2:]] == ["height", "width"]
    sess = wgnn.InferenceSession(model)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    out = sess.get_outputs()[0].name
    rng = np.random.default_rng(3)
    photos = {s: rng.uniform(-2, 2, (1, 3, s, s)).astype(np.float32) for s in (96, 128)}
    for s in (96, 128, 96):
        got = sess.run([out], {name: photos[s]})[0]
        want = ref.run([out], {name: photos[s]})[0]
        assert got.shape == want.shape == (1, 1, s, s)
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-3, err_msg=f"{s}x{s}")
    assert sess.builds() == 2, "a size seen before is not built again"
    assert sess.plan_sizes() == 2
    assert sess.plans() == 1, sess.summary()
    assert "1 plan kept for 2 sets of input shapes" in sess.summary()


def test_sizes_of_one_class_replay_the_first_sizes_structure():
    """ISNet at 160 and 192 px: inputs within one power of 4 of elements,
    one size class. On their own the two record different structures on
    lavapipe (a layer's split of its reduction stops between them), so
    with size_classes off they are two plans. With size classes (the
    default) 192 px replays the choices 160 px made, a split kept as one
    range: one plan. Each matte against ONNX Runtime's, both ways."""
    import onnxruntime as ort
    import wgnn
    model = isnet_any_size()
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    photos = {s: rng.uniform(-2, 2, (1, 3, s, s)).astype(np.float32) for s in (160, 192)}
    for classes, plans in ((True, 1), (False, 2)):
        opts = wgnn.SessionOptions()
        opts.size_classes = classes
        sess = wgnn.InferenceSession(model, sess_options=opts)
        name, out = sess.get_inputs()[0].name, sess.get_outputs()[0].name
        for s, x in photos.items():
            got = sess.run([out], {name: x})[0]
            want = ref.run([out], {name: x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-3, err_msg=f"{s}x{s}, size_classes={classes}")
        assert sess.plan_sizes() == 2
        assert sess.plans() == plans, (classes, sess.summary())
