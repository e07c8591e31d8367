"""wgnn.InferenceSession against onnxruntime.InferenceSession: descriptions,
outputs, dtypes, errors, threads, device info."""
import json
import os
import subprocess
import threading
import time

import numpy as np
import onnxruntime
import pytest
from conftest import model
from onnx import TensorProto, helper

import wgnn


def test_descriptions_match_onnxruntime(small_model):
    ours = wgnn.InferenceSession(small_model)
    ref = onnxruntime.InferenceSession(small_model, providers=["CPUExecutionProvider"])
    for a, b in [(ours.get_inputs(), ref.get_inputs()), (ours.get_outputs(), ref.get_outputs())]:
        assert [(v.name, v.shape, v.type) for v in a] == [(v.name, v.shape, v.type) for v in b]
    assert ours.get_inputs()[0].shape == ["batch", 4]
    assert ours.get_inputs()[0].type == "tensor(float)"


def test_outputs_match_onnxruntime(small_model):
    rng = np.random.default_rng(1)
    feed = {"a": rng.standard_normal((5, 4), dtype=np.float32), "b": rng.standard_normal((5, 4), dtype=np.float32)}
    ours = wgnn.InferenceSession(small_model)
    ref = onnxruntime.InferenceSession(small_model, providers=["CPUExecutionProvider"])
    (y,) = ours.run(None, feed)
    (want,) = ref.run(None, feed)
    assert y.dtype == np.float32 and y.shape == (5, 3)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    # Named outputs, and a name asked for twice.
    y1, y2 = ours.run(["y", "y"], feed)
    np.testing.assert_array_equal(y1, y)
    np.testing.assert_array_equal(y2, y)
    # Another batch size builds another graph on the same session.
    (y3,) = ours.run(None, {k: v[:2] for k, v in feed.items()})
    np.testing.assert_allclose(y3, want[:2], rtol=1e-5, atol=1e-6)
    assert ours.builds() == 2



def test_inputs_of_any_layout_are_read_as_numpy_sees_them(small_model):
    """Inputs are read in place, not copied: views with strides, Fortran
    order, read-only and broadcast arrays must still give numpy's values,
    and the caller's arrays are left as they were."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal((8, 10), dtype=np.float32)
    ours = wgnn.InferenceSession(small_model)
    ref = onnxruntime.InferenceSession(small_model, providers=["CPUExecutionProvider"])
    readonly = rng.standard_normal((5, 4), dtype=np.float32)
    readonly.setflags(write=False)
    feeds = [
        {"a": base[::2, 1:5], "b": base[1::2, 5:9]},                     # strided views
        {"a": np.asfortranarray(base[:5, :4]), "b": base[:4, :5].T},    # column-major
        {"a": readonly, "b": np.broadcast_to(base[0, :4], (5, 4))},     # read-only, stride 0
    ]
    for feed in feeds:
        before = {k: v.copy() for k, v in feed.items()}
        (y,) = ours.run(None, feed)
        (want,) = ref.run(None, {k: np.ascontiguousarray(v) for k, v in feed.items()})
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        for k, v in feed.items():
            np.testing.assert_array_equal(v, before[k])


def test_named_outputs_are_the_ones_read_back():
    """run(output_names) as ONNX Runtime's: the outputs named, in that order,
    the same values as the whole run's (only those are read back); None
    gives every output."""
    m = model([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Exp", ["x"], ["e"]),
               helper.make_node("Abs", ["x"], ["a"])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
              [helper.make_tensor_value_info(v, TensorProto.FLOAT, [3, 4]) for v in ("n", "e", "a")])
    x = np.random.default_rng(3).standard_normal((3, 4), dtype=np.float32)
    s = wgnn.InferenceSession(m)
    n, e, a = s.run(None, {"x": x})
    np.testing.assert_array_equal(n, -x)
    np.testing.assert_array_equal(a, np.abs(x))
    (e2,) = s.run(["e"], {"x": x})
    np.testing.assert_array_equal(e2, e)
    a2, n2 = s.run(["a", "n"], {"x": x})
    np.testing.assert_array_equal(a2, a)
    np.testing.assert_array_equal(n2, n)
    assert s.builds() == 1  # one plan for every choice of outputs

DTYPES = [
    (np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16), (np.int64, TensorProto.INT64),
    (np.int32, TensorProto.INT32), (np.bool_, TensorProto.BOOL), (np.uint8, TensorProto.UINT8),
    (np.int8, TensorProto.INT8),
]


@pytest.mark.parametrize("np_type,onnx_type", DTYPES, ids=[np.dtype(t).name for t, _ in DTYPES])
def test_dtypes_round_trip(np_type, onnx_type):
    """Identity of every dtype wgnn takes: the values come back unchanged,
    with their dtype, and ONNX Runtime's type string."""
    m = model([helper.make_node("Identity", ["x"], ["y"])],
              [helper.make_tensor_value_info("x", onnx_type, [2, 3])],
              [helper.make_tensor_value_info("y", onnx_type, [2, 3])])
    rng = np.random.default_rng(7)
    if np_type == np.bool_:
        x = rng.integers(0, 2, (2, 3)).astype(np.bool_)
    elif np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)  # int64 lives as int32 on the GPU
        x = rng.integers(lo, hi, (2, 3), endpoint=True).astype(np_type)
    else:
        x = (rng.standard_normal((2, 3)) * 100).astype(np_type)
    s = wgnn.InferenceSession(m)
    ref = onnxruntime.InferenceSession(m, providers=["CPUExecutionProvider"])
    assert s.get_inputs()[0].type == ref.get_inputs()[0].type
    (y,) = s.run(None, {"x": x})
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)


def test_scalar_and_empty_outputs():
    m = model([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    (y,) = wgnn.InferenceSession(m).run(None, {"x": np.array([1, 2, 3.5], np.float32)})
    assert y.shape == () and float(y) == 6.5


def test_errors_are_exceptions_with_wgnn_messages(small_model, tmp_path):
    with pytest.raises(wgnn.Error, match="parse|protobuf|model"):
        wgnn.InferenceSession(b"not a model")
    with pytest.raises(wgnn.Error, match="missing.onnx"):
        wgnn.InferenceSession(str(tmp_path / "missing.onnx"))
    unsupported = model([helper.make_node("Det", ["x"], ["y"])],
                        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    with pytest.raises(wgnn.Unsupported, match="Det"):
        wgnn.InferenceSession(unsupported)
    assert issubclass(wgnn.Unsupported, wgnn.Error) and issubclass(wgnn.Error, RuntimeError)
    s = wgnn.InferenceSession(small_model)
    x = np.ones((2, 4), np.float32)
    with pytest.raises(wgnn.Error, match="'nope'"):
        s.run(None, {"a": x, "nope": x})
    with pytest.raises(wgnn.Error, match="'b'"):
        s.run(None, {"a": x})  # an input missing
    with pytest.raises(wgnn.Error, match="float"):
        s.run(None, {"a": x.astype(np.int32), "b": x})  # the wrong dtype
    with pytest.raises(wgnn.Error):
        s.run(None, {"a": np.ones((2, 5), np.float32), "b": x})  # the wrong shape
    with pytest.raises(wgnn.Unsupported, match="float64|element type"):
        s.run(None, {"a": x.astype(np.float64), "b": x})
    with pytest.raises(wgnn.Error, match="no output named 'z'"):
        s.run(["z"], {"a": x, "b": x})
    with pytest.raises(TypeError):
        wgnn.InferenceSession(12)
    # The session still runs after all that.
    assert s.run(None, {"a": x, "b": x})[0].shape == (2, 3)


def test_threads_share_a_session(small_model):
    """Several threads run one session: runs take turns (the device lock),
    each gives what a run alone gives."""
    s = wgnn.InferenceSession(small_model)
    rng = np.random.default_rng(3)
    feeds = [{"a": rng.standard_normal((3, 4), dtype=np.float32),
              "b": rng.standard_normal((3, 4), dtype=np.float32)} for _ in range(4)]
    alone = [s.run(None, f)[0] for f in feeds]
    got = [[] for _ in feeds]

    def work(i):
        for _ in range(20):
            got[i].append(s.run(None, feeds[i])[0])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(feeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, runs in enumerate(got):
        assert len(runs) == 20
        for y in runs:
            np.testing.assert_array_equal(y, alone[i])


def test_session_options_and_providers(small_model):
    o = wgnn.SessionOptions()
    o.graph_optimization_level = 99  # ONNX Runtime's knobs are accepted
    o.fusion = False
    s = wgnn.InferenceSession(small_model, sess_options=o, providers=["CPUExecutionProvider"])
    assert s.get_providers() == ["WgnnExecutionProvider"]
    assert s.get_session_options() is o
    o2 = wgnn.SessionOptions()
    o2.adapter = "no-such-adapter"
    with pytest.raises(wgnn.Error, match="no adapter matches 'no-such-adapter'"):
        wgnn.InferenceSession(small_model, sess_options=o2)
    o3 = wgnn.SessionOptions()
    o3.fp16 = True
    if not wgnn.get_device_info()["features"]["shader-f16"]:
        with pytest.raises(wgnn.Error, match="shader-f16"):
            wgnn.InferenceSession(small_model, sess_options=o3).run(None, {"a": np.ones((1, 4), np.float32),
                                                                          "b": np.ones((1, 4), np.float32)})
    else:
        feed = {"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)}
        (y,) = wgnn.InferenceSession(small_model, sess_options=o3).run(None, feed)
        (want,) = wgnn.InferenceSession(small_model).run(None, feed)
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, want, rtol=2e-3, atol=1e-3)


def test_every_session_option_reaches_the_session():
    """outputs and ir_import (the C++ SessionOptions in full), and ONNX
    Runtime's device_id provider option."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])], "g", [x],
                          [y, z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    feed = {"x": np.array([1, -2], np.float32)}
    for ir_import in (True, False):
        o = wgnn.SessionOptions()
        o.outputs = ["z"]
        o.ir_import = ir_import
        s = wgnn.InferenceSession(m, sess_options=o)
        assert [v.name for v in s.get_outputs()] == ["z"]
        (got,) = s.run(None, feed)
        np.testing.assert_array_equal(got, [-1, 2])
    bad = wgnn.SessionOptions()
    bad.outputs = ["nope"]
    with pytest.raises(wgnn.Error, match="nope"):
        wgnn.InferenceSession(m, sess_options=bad)
    bad = wgnn.SessionOptions()
    bad.max_plans = 0
    with pytest.raises(ValueError, match="max_plans"):
        wgnn.InferenceSession(m, sess_options=bad)
    # device_id: an index in list_adapters(); one past the end lists them.
    adapters = wgnn.list_adapters()
    s = wgnn.InferenceSession(m, providers=[("WgnnExecutionProvider", {"device_id": 0})])
    np.testing.assert_array_equal(s.run(["y"], feed)[0], [1, 0])
    with pytest.raises(wgnn.Error, match=f"adapter {len(adapters)} does not exist"):
        wgnn.InferenceSession(m, providers=["WgnnExecutionProvider"], provider_options=[{"device_id": len(adapters)}])
    with pytest.raises(ValueError, match="device_id"):
        wgnn.InferenceSession(m, providers=[("WgnnExecutionProvider", {"device_id": "first"})])


def test_adapters_are_listed_and_resolved_as_sessions_open_them():
    adapters = wgnn.list_adapters()
    assert adapters and [a["index"] for a in adapters] == list(range(len(adapters)))
    info = wgnn.get_device_info()
    opened = adapters[info["index"]]
    assert opened["name"] == info["adapter"] and opened["uuid"] == info["uuid"]
    assert wgnn.resolve_adapter()["uuid"] == info["uuid"]
    assert wgnn.resolve_adapter("0") == adapters[0]
    # Two NVIDIA GPUs out of PCI order, as Ray would hand them to actors.
    two = [{"name": "NVIDIA H100", "vendor_id": 0x10DE, "device_id": 0x2330,
            "uuid": "bbbbbbbb-0000-0000-0000-000000000002", "pci_bus": "0000:3b:00.0"},
           {"name": "NVIDIA H100", "vendor_id": 0x10DE, "device_id": 0x2330,
            "uuid": "aaaaaaaa-0000-0000-0000-000000000001", "pci_bus": "0000:19:00.0"}]
    assert wgnn.resolve_adapter(adapters=two, cuda_visible_devices="0")["uuid"].startswith("aaaa")
    assert wgnn.resolve_adapter(adapters=two, cuda_visible_devices="1")["uuid"].startswith("bbbb")
    assert wgnn.resolve_adapter(adapters=two, cuda_visible_devices="GPU-bbbbbbbb")["uuid"].startswith("bbbb")
    assert wgnn.resolve_adapter("1", adapters=two, cuda_visible_devices="0")["uuid"].startswith("aaaa"), \
        "a selector overrides the variable"
    with pytest.raises(wgnn.Error, match="hides every NVIDIA GPU"):
        wgnn.resolve_adapter(adapters=two, cuda_visible_devices="")
    with pytest.raises(wgnn.Error, match="Vulkan shows 2 NVIDIA GPUs"):
        wgnn.resolve_adapter(adapters=two, cuda_visible_devices="2")


def test_verbose_prints_each_build(small_model, capsys):
    o = wgnn.SessionOptions()
    o.log_severity_level = 0  # ONNX Runtime's way; o.verbose = True is wgnn's
    s = wgnn.InferenceSession(small_model, sess_options=o)
    feed = {"a": np.ones((2, 4), np.float32), "b": np.ones((2, 4), np.float32)}
    s.run(None, feed)
    s.run(None, feed)
    err = capsys.readouterr().err
    assert err.count("wgnn: built graph") == 1 and "a [2, 4]" in err and "dispatches" in err, err
    s.run(None, {k: v[:1] for k, v in feed.items()})
    assert "built graph 2" in capsys.readouterr().err
    quiet = wgnn.InferenceSession(small_model)
    quiet.run(None, feed)
    assert capsys.readouterr().err == ""


def test_device_info_is_what_the_cli_says():
    """The package's own CLI (wgnn/bin/wgnn, the same driver lookup)."""
    ours = wgnn.get_device_info()
    exe = os.path.join(os.path.dirname(wgnn.__file__), "bin", "wgnn")
    # Choosing the bundled lavapipe sets VK_DRIVER_FILES in this process:
    # the CLI gets the environment this process started with.
    env = {k: v for k, v in os.environ.items()
           if not (k in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES") and v.startswith(os.path.dirname(wgnn.__file__)))}
    theirs = json.loads(subprocess.run([exe, "info", "--json"], capture_output=True, text=True, check=True,
                                       env=env).stdout)
    # The pipeline cache's folder is keyed by the binary (the CLI and the
    # module are two), everything else is the same device's.
    ours.pop("pipeline_cache")
    theirs.pop("pipeline_cache")
    assert ours == theirs


def test_gil_released_while_the_gpu_runs():
    """A Python thread keeps running while another thread's run() waits for
    the device: during one long run the counter thread advances."""
    n = 512

    def chain(depth):
        # x @ b @ b ... with b = 1/n: every product stays all ones.
        nodes = [helper.make_node("MatMul", ["a" if i == 0 else f"c{i - 1}", "b"],
                                  ["y" if i == depth - 1 else f"c{i}"]) for i in range(depth)]
        return model(nodes, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n]),
                             helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])])

    feed = {"a": np.ones((n, n), np.float32), "b": np.full((n, n), 1 / n, np.float32)}
    # A run long enough to tell (over 250 ms): a longer chain where the
    # adapter is fast.
    for depth in (3, 12, 48, 192):
        s = wgnn.InferenceSession(chain(depth))
        s.run(None, feed)  # the graph built, the shaders compiled
        t0 = time.perf_counter()
        s.run(None, feed)
        if time.perf_counter() - t0 > 0.3:
            break
    stop = threading.Event()
    ticks = [0]

    def count():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.2)  # the counter's rate when it has the interpreter to itself
        before = ticks[0]
        time.sleep(0.2)
        rate = (ticks[0] - before) / 0.2
        before = ticks[0]
        t0 = time.perf_counter()
        (y,) = s.run(None, feed)
        elapsed = time.perf_counter() - t0
        during = ticks[0] - before
    finally:
        stop.set()
        t.join()
    np.testing.assert_allclose(y, np.ones((n, n), np.float32), rtol=1e-4)
    share = during / (rate * elapsed)
    print(f"one run of {depth} products {elapsed * 1000:.1f} ms; the other thread ran {share:.0%} of its free rate")
    # Holding the GIL through the run would leave the counter a few 5 ms
    # switch intervals (under 2% of this run). Released, it gets what the CPU
    # leaves it: on lavapipe the driver's threads compute on the same cores
    # (36% seen on 2 cores).
    assert elapsed > 0.25, f"the run of {depth} products took {elapsed * 1000:.1f} ms: too short to tell"
    assert share > 0.1, f"the other thread ran {share:.0%} of its free rate during a {elapsed * 1000:.1f} ms run"
