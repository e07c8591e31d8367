"""bench/compare_models.py end to end on a CPU: a two-model zoo written here
with the zoo's interface (one small convolutional model, one whose build
fails), an ONNX Runtime peer folder made from .deps/ort, PyTorch on the CPU.
Checks the JSON lines, the markdown table (numbers, the skipped fp16 column
with its note, the failure notes, the targets), the chart when matplotlib
is there, --report-only merging, and the errors for a missing peer or zoo.

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
# Spec.inputs(mini), Spec.output_names; export.py --model --opset --out [--mini].
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


MODELS = {"resnet50": Spec(build_small, image, ["logits"]), "broken": Spec(build_broken, image, ["logits"])}
ZOO = ["resnet50", "broken"]
''')
with open(os.path.join(zoo, "export.py"), "w") as f:
    f.write('''
import argparse, os, sys
import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import MODELS
ap = argparse.ArgumentParser()
ap.add_argument("--model"); ap.add_argument("--opset", type=int); ap.add_argument("--out")
ap.add_argument("--mini", action="store_true"); ap.add_argument("--dynamo", action="store_true")
a = ap.parse_args()
spec = MODELS[a.model]
base = f"{a.model}{'_mini' if a.mini else ''}_opset{a.opset}"
try:
    model, inputs = spec.build(a.mini), spec.inputs(a.mini)
except Exception as e:
    print(f"FAIL {base}.onnx (torchscript): {type(e).__name__}: {e}")
    sys.exit(1)
torch.onnx.export(model, tuple(inputs.values()), os.path.join(a.out, base + ".onnx"), input_names=list(inputs),
                  output_names=spec.output_names, opset_version=a.opset)
os.makedirs(os.path.join(a.out, base + "_inputs"), exist_ok=True)
for k, v in inputs.items():
    np.save(os.path.join(a.out, base + "_inputs", k + ".npy"), v.numpy())
print(f"OK {base}.onnx")
''')

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
skip = [] if webgpu else ["--skip", "ort-webgpu"]
rc, stdout, err = compare("--ort-peer", peer, "--out", out, "--name", "run1", *skip)
check(rc == 0, f"compare_models runs (rc {rc}: {err.strip()[-500:]})")
rows = []
if os.path.exists(os.path.join(out, "run1.jsonl")):
    rows = [json.loads(l) for l in open(os.path.join(out, "run1.jsonl")) if l.strip()]
meta = [r for r in rows if r.get("kind") == "meta"]
res = {(r["model"], r["tool"]): r for r in rows if r.get("kind") == "result"}
check(len(meta) == 1 and meta[0]["adapter"] and meta[0]["ort_version"] != "?",
      f"one meta line with the adapter and ONNX Runtime's version: {meta}")
tools = ["wgnn", "ort-cpu", "torch-fp32"] + (["ort-webgpu"] if webgpu else [])
for t in tools:
    r = res.get(("resnet50", t), {})
    ok = r.get("ok") and r["result"]["median_ms"] > 0 and r["result"]["min_ms"] <= r["result"]["median_ms"]
    check(bool(ok), f"{t} timed the small model: {r}")
w = res.get(("resnet50", "wgnn"), {}).get("result", {})
check(w.get("gpu_ms", 0) > 0 and w.get("encode_us", 0) > 0 and w.get("runs") == 3,
      "wgnn's line carries gpu_ms, encode_us and the runs")
check(res.get(("resnet50", "torch-fp16"), {}).get("skipped", "").startswith("fp16 needs CUDA"),
      "PyTorch fp16 is skipped on the CPU, saying why")
check(all(not res.get(("broken", t), {"ok": True})["ok"] for t in tools),
      "every tool of the model whose build fails is recorded as failed")
check("notinstalled" in res.get(("broken", "wgnn"), {}).get("error", ""), "the failure keeps the export's message")

md = open(os.path.join(out, "run1.md")).read() if os.path.exists(os.path.join(out, "run1.md")) else ""
line = next((l for l in md.splitlines() if l.startswith("| ResNet-50 224 |")), "")
cells = [c.strip() for c in line.strip("|").split("|")]
check(len(cells) == 10, f"the table has a ResNet-50 row of 10 cells: {line!r}")
if len(cells) == 10:
    check(re.fullmatch(r"[0-9.]+ \([0-9.]+\)", cells[1]) is not None, f"wgnn: median (min): {cells[1]!r}")
    check(re.fullmatch(r"[0-9.]+", cells[4]) is not None, f"PyTorch fp32 is a number: {cells[4]!r}")
    check(cells[5].startswith("skipped ["), f"PyTorch fp16 says skipped with a note: {cells[5]!r}")
    check(cells[8] == "≤2.5" and cells[9].endswith("×"), f"the issue's target and wgnn's ratio: {cells[8:]}")
check("fp16 needs CUDA" in md and "notinstalled" in md, "the notes say why cells are empty")
check("| MobileNetV2 224 | 6.60 | 7.40 | 3.20 | ≤1.5 |" in md, "the issue's reference table is there")
try:
    import matplotlib  # noqa: F401
    check(open(os.path.join(out, "run1.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n", "the chart is a PNG")
except ImportError:
    check("No chart: matplotlib is not installed" in md, "without matplotlib the report says there is no chart")

# --report-only merges: a later file's line replaces an earlier one.
later = os.path.join(WORK, "later.jsonl")
patched = dict(res[("resnet50", "wgnn")])
patched["result"] = dict(patched["result"], median_ms=1234.5, min_ms=1200.0)
with open(later, "w") as f:
    f.write(json.dumps(patched) + "\n")
rc, stdout, err = compare("--report-only", os.path.join(out, "run1.jsonl"), later, "--out", out, "--name", "merged")
merged = open(os.path.join(out, "merged.md")).read() if rc == 0 else ""
check(rc == 0 and "| ResNet-50 224 | 1234.5 (1200.0) |" in merged, f"--report-only: later lines win (rc {rc} {err[-300:]})")

for args, says in ((["--ort-peer", os.path.join(WORK, "nopeer"), "--out", out], "no bench.js there"),
                   (["--out", out], "--ort-peer DIR is needed"),
                   (["--ort-peer", peer, "--out", out, "--models", "nosuch"], "unknown model(s) nosuch"),
                   (["--ort-peer", peer, "--out", out, "--zoo", os.path.join(WORK, "nozoo")], "zoo.py is missing")):
    rc, stdout, err = compare(*args)
    check(rc != 0 and says in err, f"{' '.join(a for a in args if not a.startswith('/'))} fails saying '{says}': "
                                   f"{err.strip()[-200:]!r}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
