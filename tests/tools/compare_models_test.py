"""bench/compare_models.py end to end on a CPU: a three-model zoo written here
with the zoo's interface (one small convolutional model, one of ops a CPU
torch has in float16 with an integer and a float input, one whose build
fails) exported by scripts/models/export.py, an ONNX Runtime peer folder made
from .deps/ort, PyTorch on the CPU, wgnn also in float16 mode. Checks the
JSON lines, the float16 export (export.py --half: float16 inputs, integer
ones kept) and ORT WebGPU on it (the tool ort-webgpu-fp16, where lavapipe
gives ONNX Runtime a WebGPU adapter; a CPU float16 export that this torch
cannot do is that tool's error), the markdown table (numbers, the skipped
fp16 column with its note, the fp16 columns, the failure notes, the targets,
ISNet's fp16 note), the chart when matplotlib is there, --report-only
merging, --reuse, and the errors for a missing peer or zoo.

usage: compare_models_test.py WGNN ORT_DIR WORKDIR   (exit 77: no torch here)
"""
import json
import os
import re
import shutil
import subprocess
import sys

WGNN, ORT, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "compare_models.py")
try:
    import torch  # noqa: F401
except ImportError:
    print("skipped: PyTorch is not installed")
    sys.exit(77)
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


# A zoo with the interface of scripts/models: MODELS, ZOO, Spec.build(mini),
# Spec.inputs(mini), Spec.output_names; scripts/models/export.py beside it
# exports it (--model --opset --out [--mini] [--half]).
zoo = os.path.join(WORK, "zoo")
os.makedirs(zoo)
with open(os.path.join(zoo, "zoo.py"), "w") as f:
    f.write('''
import torch
import torch.nn as nn


class Spec:
    def __init__(self, build, inputs, output_names):
        self.build, self.inputs, self.output_names = build, inputs, output_names


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, image):
        return self.fc(torch.relu(self.conv(image)).mean(dim=(2, 3)))


def build_small(mini=False):
    torch.manual_seed(0)
    return Small().eval()


def build_broken(mini=False):
    raise ImportError("No module named 'notinstalled'")


def image(mini=False):
    return {"image": torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))}


class Embed(nn.Module):
    """Gather, Mul, Add, ReduceMean: ops a CPU torch runs in float16 (1.13 too)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 16)
        self.scale = nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, ids, x):
        return (x * self.scale + self.embed(ids)).mean(dim=-1)


def build_embed(mini=False):
    torch.manual_seed(0)
    return Embed().eval()


def ids_x(mini=False):
    g = torch.Generator().manual_seed(0)
    return {"ids": torch.randint(0, 10, (1, 8), generator=g), "x": torch.randn(1, 8, 16, generator=g)}


MODELS = {"resnet50": Spec(build_small, image, ["logits"]), "embed": Spec(build_embed, ids_x, ["hidden"]),
          "broken": Spec(build_broken, image, ["logits"])}
ZOO = ["resnet50", "embed", "broken"]
''')
shutil.copy(os.path.join(REPO, "scripts", "models", "export.py"), os.path.join(zoo, "export.py"))

# The peer: bench/ort_bench.js as bench.js beside onnxruntime-node; node from PATH.
peer = os.path.join(WORK, "peer")
os.makedirs(peer)
shutil.copy(os.path.join(REPO, "bench", "ort_bench.js"), os.path.join(peer, "bench.js"))
os.symlink(os.path.join(ORT, "node_modules"), os.path.join(peer, "node_modules"))

env = dict(os.environ)
icd = os.path.join(os.path.dirname(ORT), "lavapipe", "lvp_icd.json")
webgpu = "VK_DRIVER_FILES" in env or os.path.exists(icd)
if "VK_DRIVER_FILES" not in env and os.path.exists(icd):
    # ONNX Runtime's Dawn does not find lavapipe by itself (wgnn respects this too).
    env["VK_DRIVER_FILES"] = icd
    lib = os.path.join(os.path.dirname(icd), "root", "usr", "lib", "x86_64-linux-gnu")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")


def compare(*args):
    p = subprocess.run([sys.executable, SCRIPT, "--wgnn", WGNN, "--zoo", zoo, "--work", os.path.join(WORK, "w"),
                        "--isnet", "none", "--device", "cpu", "--runs", "3", "--warmup", "1", "--cpu-runs", "3",
                        *args], capture_output=True, text=True, timeout=900, env=env)
    return p.returncode, p.stdout, p.stderr


out = os.path.join(WORK, "results")
# Without a WebGPU adapter for ONNX Runtime, its WebGPU tools are left out.
skip = [] if webgpu else ["--skip", "ort-webgpu,ort-webgpu-fp16"]
rc, stdout, err = compare("--ort-peer", peer, "--out", out, "--name", "run1", "--wgnn-fp16", *skip)
check(rc == 0, f"compare_models runs (rc {rc}: {err.strip()[-500:]})")
rows = []
if os.path.exists(os.path.join(out, "run1.jsonl")):
    rows = [json.loads(l) for l in open(os.path.join(out, "run1.jsonl")) if l.strip()]
meta = [r for r in rows if r.get("kind") == "meta"]
res = {(r["model"], r["tool"]): r for r in rows if r.get("kind") == "result"}
check(len(meta) == 1 and meta[0]["adapter"] and meta[0]["ort_version"] != "?",
      f"one meta line with the adapter and ONNX Runtime's version: {meta}")


def timed(model, tool):
    r = res.get((model, tool), {})
    return bool(r.get("ok") and r["result"]["median_ms"] > 0 and r["result"]["min_ms"] <= r["result"]["median_ms"])


tools = ["wgnn", "wgnn-fp16", "ort-cpu", "torch-fp32"] + (["ort-webgpu"] if webgpu else [])
for model in ("resnet50", "embed"):
    for t in tools:
        check(timed(model, t), f"{t} timed {model}: {res.get((model, t))}")
w = res.get(("resnet50", "wgnn"), {}).get("result", {})
check(w.get("gpu_ms", 0) > 0 and w.get("encode_us", 0) > 0 and w.get("runs") == 3,
      "wgnn's line carries gpu_ms, encode_us and the runs")
check(res.get(("resnet50", "torch-fp16"), {}).get("skipped", "").startswith("fp16 needs CUDA"),
      "PyTorch fp16 is skipped on the CPU, saying why")
check(res.get(("resnet50", "torch-compile-fp32"), {}).get("skipped", "").startswith(
          "torch.compile(mode='reduce-overhead') is timed on CUDA only") and
      res.get(("resnet50", "torch-compile-fp16"), {}).get("skipped", "").startswith("fp16 needs CUDA"),
      f"compiled PyTorch is skipped on the CPU, saying why: {res.get(('resnet50', 'torch-compile-fp32'))}")
broken_tools = tools + (["ort-webgpu-fp16"] if webgpu else [])
check(all(not res.get(("broken", t), {"ok": True})["ok"] for t in broken_tools),
      "every tool of the model whose build fails is recorded as failed")
check("notinstalled" in res.get(("broken", "wgnn"), {}).get("error", ""), "the failure keeps the export's message")

# The float16 export (export.py --half) and ONNX Runtime WebGPU on it.
onnx_dir = os.path.join(WORK, "w", "onnx")
half = os.path.join(onnx_dir, "embed_opset17_fp16.onnx")
if webgpu:
    check(timed("embed", "ort-webgpu-fp16"), f"ort-webgpu-fp16 timed the float16 export: "
                                             f"{res.get(('embed', 'ort-webgpu-fp16'))}")
    check("notinstalled" in res.get(("broken", "ort-webgpu-fp16"), {}).get("error", ""),
          "a failed float16 export is the tool's error, with the export's message")
    # The convolution needs CPU float16 kernels that older torch lacks: then
    # the export says so, and only this tool fails.
    r = res.get(("resnet50", "ort-webgpu-fp16"), {})
    check(timed("resnet50", "ort-webgpu-fp16") or ("float16" in r.get("error", "") and "CUDA" in r.get("error", "")),
          f"the convolutional model's float16 export is timed or fails saying why: {r}")
    try:
        import numpy as np
        import onnx
        m = onnx.load(half)
        kinds = {i.name: onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type) for i in m.graph.input}
        check(kinds == {"ids": "INT64", "x": "FLOAT16"}, f"the float16 export's inputs: {kinds}")
        ins = {n: np.load(os.path.join(onnx_dir, "embed_opset17_fp16_inputs", n + ".npy")) for n in ("ids", "x")}
        f32 = np.load(os.path.join(onnx_dir, "embed_opset17_inputs", "x.npy"))
        check(ins["ids"].dtype == np.int64 and ins["x"].dtype == np.float16 and
              np.array_equal(ins["x"], f32.astype(np.float16)),
              "its inputs: the float32 ones in float16, the ids unchanged")
    except ImportError:
        pass

md = open(os.path.join(out, "run1.md")).read() if os.path.exists(os.path.join(out, "run1.md")) else ""
table = [l for l in md.splitlines() if l.startswith("| model | wgnn |")]
head = [c.strip() for c in table[0].strip("|").split("|")] if table else []
ortv = meta[0]["ort_version"] if meta else "?"
want = ["model", "wgnn", "wgnn GPU", "encode µs", "wgnn fp16", "wgnn fp16 GPU"] + (
       [f"ORT {ortv} WebGPU fp16"] if webgpu else []) + ["PyTorch fp32", "PyTorch fp16", f"ORT {ortv} WebGPU",
                                                        f"ORT {ortv} CPU", "target", "wgnn / target"]
check(head == want, f"the table's columns, ORT WebGPU fp16 beside wgnn fp16 where it ran: {head}")
line = next((l for l in md.splitlines() if l.startswith("| ResNet-50 224 |")), "")
cells = dict(zip(head, [c.strip() for c in line.strip("|").split("|")]))
check(len(cells) == len(head) == len(want), f"the table has a ResNet-50 row of {len(want)} cells: {line!r}")
if len(cells) == len(want):
    check(re.fullmatch(r"[0-9.]+ \([0-9.]+\)", cells["wgnn"]) is not None, f"wgnn: median (min): {cells['wgnn']!r}")
    check(re.fullmatch(r"[0-9.]+", cells["wgnn fp16"]) is not None, f"wgnn fp16 is a number: {cells['wgnn fp16']!r}")
    check(re.fullmatch(r"[0-9.]+", cells["PyTorch fp32"]) is not None,
          f"PyTorch fp32 is a number: {cells['PyTorch fp32']!r}")
    check(cells["PyTorch fp16"].startswith("skipped ["), f"PyTorch fp16 says skipped with a note: {cells}")
    check(cells["target"] == "≤2.5" and cells["wgnn / target"].endswith("×"),
          f"the issue's target and wgnn's ratio: {cells}")
    if webgpu:
        c = cells[f"ORT {ortv} WebGPU fp16"]
        check(re.fullmatch(r"[0-9.]+|fail \[[0-9]+\]", c) is not None, f"ORT WebGPU fp16: a number or a failure: {c!r}")
eline = next((l for l in md.splitlines() if l.startswith("| embed |")), "")
if webgpu:
    c = dict(zip(head, [c.strip() for c in eline.strip("|").split("|")])).get(f"ORT {ortv} WebGPU fp16", "")
    check(re.fullmatch(r"[0-9.]+", c) is not None, f"ORT WebGPU fp16 timed the float16 model: {eline!r}")
check("fp16 needs CUDA" in md and "notinstalled" in md, "the notes say why cells are empty")
check("| MobileNetV2 224 | 6.60 | 7.40 | 3.20 | ≤1.5 |" in md, "the issue's reference table is there")
try:
    import matplotlib  # noqa: F401
    check(open(os.path.join(out, "run1.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n", "the chart is a PNG")
except ImportError:
    check("No chart: matplotlib is not installed" in md, "without matplotlib the report says there is no chart")

# --report-only merges: a later file's line replaces an earlier one. ISNet
# (timed by wgnn here) has no float16 export: its ORT WebGPU fp16 cell is a
# dash with a note saying why.
later = os.path.join(WORK, "later.jsonl")
patched = dict(res[("resnet50", "wgnn")])
patched["result"] = dict(patched["result"], median_ms=1234.5, min_ms=1200.0)
with open(later, "w") as f:
    f.write(json.dumps(patched) + "\n")
    f.write(json.dumps(dict(patched, model="isnet")) + "\n")
    if not webgpu:  # the fp16 column, from a line of its own
        f.write(json.dumps(dict(patched, tool="ort-webgpu-fp16")) + "\n")
rc, stdout, err = compare("--report-only", os.path.join(out, "run1.jsonl"), later, "--out", out, "--name", "merged")
merged = open(os.path.join(out, "merged.md")).read() if rc == 0 else ""
check(rc == 0 and "| ResNet-50 224 | 1234.5 (1200.0) |" in merged, f"--report-only: later lines win (rc {rc} {err[-300:]})")
mhead = next(([c.strip() for c in l.strip("|").split("|")] for l in merged.splitlines()
              if l.startswith("| model | wgnn |")), [])
iline = next((l for l in merged.splitlines() if l.startswith("| ISNet 1024 |")), "")
icell = dict(zip(mhead, [c.strip() for c in iline.strip("|").split("|")])).get(f"ORT {ortv} WebGPU fp16", "")
note = re.fullmatch(r"— \[([0-9]+)\]", icell)
check(note is not None and re.search(rf"^\[{note.group(1)}\] ISNet has no ORT WebGPU fp16 figure: its ONNX file is "
                                     r"already a float16 model", merged, re.M) is not None,
      f"ISNet's ORT WebGPU fp16 cell is a dash with a note: {icell!r}")

if webgpu:
    # --reuse keeps the float16 export; the tool times it again.
    before = os.path.getmtime(half) if os.path.exists(half) else None
    rc, stdout, err = compare("--ort-peer", peer, "--out", out, "--name", "reuse", "--models", "embed", "--reuse",
                              "--skip", "wgnn,torch-fp32,torch-fp16,torch-compile-fp32,torch-compile-fp16,"
                                        "ort-webgpu,ort-cpu")
    rows = [json.loads(l) for l in open(os.path.join(out, "reuse.jsonl")) if l.strip()] if rc == 0 else []
    tools_run = sorted(r["tool"] for r in rows if r.get("kind") == "result")
    check(rc == 0 and before is not None and os.path.getmtime(half) == before and tools_run == ["ort-webgpu-fp16"]
          and all(r["ok"] for r in rows if r.get("kind") == "result"),
          f"--reuse times the float16 export again without exporting it (rc {rc}, {tools_run}, {err[-300:]})")

for args, says in ((["--ort-peer", os.path.join(WORK, "nopeer"), "--out", out], "no bench.js there"),
                   (["--out", out], "--ort-peer DIR is needed"),
                   (["--ort-peer", peer, "--out", out, "--models", "nosuch"], "unknown model(s) nosuch"),
                   (["--ort-peer", peer, "--out", out, "--zoo", os.path.join(WORK, "nozoo")], "zoo.py is missing")):
    rc, stdout, err = compare(*args)
    check(rc != 0 and says in err, f"{' '.join(a for a in args if not a.startswith('/'))} fails saying '{says}': "
                                   f"{err.strip()[-200:]!r}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
