"""The BART-base-sized decoder stand-in (scripts/models/zoo.py
bart_base_standin: bart-base sizes, a [50265, 768] float32 token embedding
and a [768, 50265] output head, 154 MB each) exported with PyTorch, run by
`wgnn run` under WebGPU's default limits (WGNN_LIMITS=default: 128 MiB
storage bindings, 256 MiB buffers) and by ONNX Runtime's CPU provider on the
same inputs; the logits must be within compare.py's tolerance (1e-3 *
max|ORT| + 1e-4). Both large tensors are over the binding limit, so the
embedding Gather and the head's MatMul run split (ops/helpers.h
binding_spans).

usage: bart_full_vs_ort.py WGNN ORT_MODULE_DIR WORKDIR
"""
import os
import subprocess
import sys

WGNN, ORT_DIR, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts", "models")
NAME, OPSET = "bart_base_standin", 17
LIMIT = 128 << 20

try:
    import onnx
    import onnx.numpy_helper
    import torch  # noqa: F401 - export.py needs it
except ImportError as e:
    print(f"FAIL: {e}: this test exports with PyTorch (Debian's python3-torch; scripts/setup installs it)")
    sys.exit(1)

os.makedirs(WORK, exist_ok=True)
base = f"{NAME}_opset{OPSET}"
path = os.path.join(WORK, base + ".onnx")
r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "export.py"), "--model", NAME, "--opset", str(OPSET),
                    "--out", WORK], capture_output=True, text=True)
if r.returncode != 0:
    print(f"FAIL export:\n{r.stdout}{r.stderr}")
    sys.exit(1)
m = onnx.load(path, load_external_data=False)
big = {i.name: list(i.dims) for i in m.graph.initializer
       if i.data_type == onnx.TensorProto.FLOAT and 4 * int(__import__("numpy").prod(i.dims)) > LIMIT}
users = {n.op_type for n in m.graph.node if any(x in big for x in n.input)}
if len(big) < 2 or not {"Gather", "MatMul"} <= users:
    print(f"FAIL the export no longer has a Gather and a MatMul on tensors over 128 MiB: {big}, used by {users}")
    sys.exit(1)
env = dict(os.environ, WGNN_LIMITS="default")
r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "compare.py"), "--wgnn", WGNN, path,
                    "--inputs", os.path.join(WORK, base + "_inputs"), "--ort", "node", "--ort-dir", ORT_DIR,
                    "--work", os.path.join(WORK, base + "_outputs"), "--label", base + " (WGNN_LIMITS=default)"],
                   capture_output=True, text=True, env=env)
print(r.stdout.strip() or r.stderr.strip())
if r.returncode != 0 and r.stderr.strip() and r.stdout.strip():
    print(r.stderr.strip())
sys.exit(r.returncode)
