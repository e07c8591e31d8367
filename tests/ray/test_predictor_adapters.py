"""wgnn.ray.Predictor in Dataset.map_batches, and the adapter each actor
opens: Ray hands an actor with num_gpus=1 its GPU through
CUDA_VISIBLE_DEVICES, and wgnn.resolve_adapter (the rule sessions open
adapters by) maps it onto the NVIDIA adapters of the list."""
import os

import numpy as np
import pytest

import wgnn
import wgnn.ray

pytestmark = pytest.mark.timeout(300)

FAKE_TWO_NVIDIA = [
    {"index": 0, "name": "NVIDIA H100 80GB HBM3", "vendor": "nvidia", "vendor_id": 0x10DE, "device_id": 0x2330,
     "backend": "Vulkan", "type": "discrete GPU", "uuid": "3f9c1a2b-0000-4c5d-8e9f-0123456789ab",
     "pci_bus": "0000:1b:00.0"},
    {"index": 1, "name": "NVIDIA H100 80GB HBM3", "vendor": "nvidia", "vendor_id": 0x10DE, "device_id": 0x2330,
     "backend": "Vulkan", "type": "discrete GPU", "uuid": "8a1bd3c4-1111-4e2f-9a0b-fedcba987654",
     "pci_bus": "0000:2c:00.0"},
    {"index": 2, "name": "llvmpipe (LLVM 15.0.6, 256 bits)", "vendor": "mesa", "vendor_id": 0x10005,
     "device_id": 0, "backend": "Vulkan", "type": "CPU", "uuid": "", "pci_bus": ""},
]


def model_bytes():
    """y = 2x + 1 and z = sum(x) over a free batch dimension."""
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"]), helper.make_node("Add", ["t", "one"], ["y"]),
         helper.make_node("ReduceSum", ["x", "axes"], ["z"], keepdims=0)],
        "affine", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch"])],
        [numpy_helper.from_array(np.float32(2), "two"), numpy_helper.from_array(np.float32(1), "one"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_predictor_map_batches(cluster, tmp_path):
    import ray

    path = str(tmp_path / "affine.onnx")
    with open(path, "wb") as f:
        f.write(model_bytes())
    x = np.arange(4 * 100, dtype=np.float32).reshape(100, 4) / 7
    ds = ray.data.from_numpy(x)  # one column, "data"
    out = ds.map_batches(wgnn.ray.Predictor, fn_constructor_args=(path,), concurrency=2, num_gpus=1, batch_size=16,
                         batch_format="numpy").take_all()
    y = np.stack([r["y"] for r in out])
    z = np.array([r["z"] for r in out])
    order = np.argsort(z)
    np.testing.assert_allclose(y[order], (2 * x + 1)[np.argsort(x.sum(1))], rtol=1e-6)
    np.testing.assert_allclose(np.sort(z), np.sort(x.sum(1)), rtol=1e-5)
    # Named columns, an id carried through, only the output asked for.
    items = [{"id": i, "features": x[i]} for i in range(100)]
    opts = wgnn.SessionOptions()
    opts.fusion = False  # passed through to the session
    rows = ray.data.from_items(items).map_batches(
        wgnn.ray.Predictor, fn_constructor_args=(path,),
        fn_constructor_kwargs=dict(sess_options=opts, input_columns={"x": "features"}, output_columns={"y": "pred"},
                                   keep_columns=["id"]),
        concurrency=2, num_gpus=1, batch_size=10, batch_format="numpy").take_all()
    assert sorted(rows[0]) == ["id", "pred"]
    got = np.stack([r["pred"] for r in sorted(rows, key=lambda r: r["id"])])
    np.testing.assert_allclose(got, 2 * x + 1, rtol=1e-6)
    with pytest.raises(wgnn.Error, match="no output 'nope'"):
        wgnn.ray.Predictor(path, output_columns={"nope": "p"})


def test_each_actor_opens_its_cuda_visible_device(cluster):
    import ray

    @ray.remote(num_gpus=1, num_cpus=0)
    class Probe:
        def where(self):
            return {"cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "node": ray.get_runtime_context().get_node_id(),
                    "fake": wgnn.resolve_adapter(adapters=FAKE_TWO_NVIDIA),
                    "real": wgnn.resolve_adapter(), "opened": wgnn.get_device_info()}

    probes = [Probe.remote() for _ in range(3)]  # the cluster's three GPUs: two on node A, one on node B
    seen = ray.get([p.where.remote() for p in probes], timeout=120)
    for p in probes:
        ray.kill(p)
    by_node = {}
    for s in seen:
        assert s["cvd"] is not None and s["cvd"].isdigit(), s
        want = FAKE_TWO_NVIDIA[int(s["cvd"])]
        assert s["fake"]["uuid"] == want["uuid"] and s["fake"]["index"] == want["index"], (s["cvd"], s["fake"])
        by_node.setdefault(s["node"], []).append(s["fake"]["uuid"])
        # This machine's own adapters have no NVIDIA one: CUDA_VISIBLE_DEVICES
        # does not apply, and the session opens what resolve_adapter says.
        assert s["opened"]["index"] == s["real"]["index"] and s["opened"]["uuid"] == s["real"]["uuid"], s
    sizes = sorted(len(v) for v in by_node.values())
    assert sizes == [1, 2], by_node
    pair = next(v for v in by_node.values() if len(v) == 2)
    assert sorted(pair) == sorted(a["uuid"] for a in FAKE_TWO_NVIDIA[:2]), "two actors of one node share a GPU"
