"""The .pte side of bench/run_pte_models.sh (run in .venv-executorch,
scripts/setup-executorch, with torchvision): full-size zoo models
(scripts/models/zoo.py) lowered with WebGPUPartitioner, their inputs and
eager PyTorch's float32 outputs as .npy.

    .venv-executorch/bin/python bench/pte_prepare.py OUT_DIR [--mini] modnet resnet50 ...

--mini: the zoo's mini sizes (the plain-torch stand-ins have only those).

Writes OUT_DIR/NAME.pte, OUT_DIR/NAME.input_<i>.npy, OUT_DIR/NAME.output_<k>.npy.
"""
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "models"))
import zoo  # noqa: E402
from executorch.backends.webgpu.partitioner import WebGPUPartitioner  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402

out = sys.argv[1]
mini = "--mini" in sys.argv[2:]
os.makedirs(out, exist_ok=True)
for name in [a for a in sys.argv[2:] if a != "--mini"]:
    spec = zoo.MODELS[name]
    torch.manual_seed(0)
    m = spec.build(mini=mini).eval()
    args = tuple(spec.inputs(mini).values())
    with torch.no_grad():
        ep = torch.export.export(m, args)
        prog = to_edge_transform_and_lower(ep, partitioner=[WebGPUPartitioner()]).to_executorch()
        y = m(*args)
    name = f"{name}_mini" if mini else name
    with open(os.path.join(out, f"{name}.pte"), "wb") as f:
        f.write(prog.buffer)
    for i, t in enumerate(args):
        np.save(os.path.join(out, f"{name}.input_{i}.npy"), t.numpy())
    ys = list(y) if isinstance(y, (tuple, list)) else [y]
    for k, t in enumerate(ys):
        np.save(os.path.join(out, f"{name}.output_{k}.npy"), t.numpy())
    plan = prog.executorch_program.execution_plan[0]
    print(f"{name}: {len(prog.buffer) / 1e6:.1f} MB, {len(plan.delegates)} delegated subgraphs, "
          f"portable ops {sorted({o.name for o in plan.operators})}", flush=True)
