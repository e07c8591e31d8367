"""The .pte side of bench/run_pte_models.sh and bench/run_executorch.sh (run
in .venv-executorch, scripts/setup-executorch, with torchvision): full-size
zoo models (scripts/models/zoo.py) lowered with WebGPUPartitioner, their
inputs and eager PyTorch's float32 outputs as .npy.

    .venv-executorch/bin/python bench/pte_prepare.py OUT_DIR [--mini] [--two-level] [--keep-out=OPS] modnet resnet50 ...

--mini: the zoo's mini sizes (the plain-torch stand-ins have only those).
--two-level: every parameter of 4,096 values or more becomes +-(its own
  standard deviation), signs from a seeded block of 4,099 tiled over it,
  before the export: the same shapes, the same arithmetic and activations of
  the same scale, but a .pte that xz packs to almost nothing, so full-size
  models travel to a machine that reaches no registry. Speed is unchanged (float32 weights
  all the same); outputs are still checked against eager PyTorch.

--keep-out=aten.arange.start_step,aten.full.default: edge ops the partitioner
  leaves outside the delegate (portable kernels in the program), for a
  runtime whose delegate lacks them.

Besides the zoo: `llama_prefill`, the Llama-style decoder of
scripts/models/decoders.py at GPT-2-small's size (12 layers, 12 heads, 4
K/V heads), one forward over a 128-token prompt with no cache, returning the
logits (`--mini`: the decoders' mini size).

Writes OUT_DIR/NAME.pte, OUT_DIR/NAME.input_<i>.npy, OUT_DIR/NAME.output_<k>.npy.
"""
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "models"))
import decoders  # noqa: E402
import zoo  # noqa: E402
from executorch.backends.webgpu.partitioner import WebGPUPartitioner  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402


class LlamaPrefill(torch.nn.Module):
    """decoders.Llama's blocks over a prompt of fixed length with no cache:
    logits only. The positions' cos/sin and the causal mask are constants
    of that length (buffers), as a static-shape prefill export has them."""

    def __init__(self, mini, t):
        super().__init__()
        mods, self.c = decoders.build("llama", "mini" if mini else "full")
        self.m = mods["decoder"].eval()
        c = self.c
        dh = c["d"] // c["heads"]
        freqs = torch.arange(t).float()[None, :, None] * self.m.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos().unsqueeze(1))
        self.register_buffer("sin", emb.sin().unsqueeze(1))
        self.register_buffer("bias", decoders.causal_bias(t, 0))
        self.register_buffer("empty", torch.zeros(1, c["kv_heads"], 0, dh))

    def forward(self, input_ids):
        x = self.m.embed_tokens(input_ids)
        for blk in self.m.blocks:
            x, _, _ = blk(x, self.empty, self.empty, self.cos, self.sin, self.bias)
        return torch.matmul(self.m.norm(x), self.m.embed_tokens.weight.t())


def llama_prefill(mini):
    t = 16 if mini else 128
    m = LlamaPrefill(mini, t)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, m.c["vocab"], (1, t), generator=g)
    return m, (ids,)


def two_level(m):
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for t in m.parameters():  # not buffers: masks, positions, norm statistics
            if t.is_floating_point() and t.numel() >= 4096:
                s = t.float().std().item() or 1.0
                # One seeded block of 4,099 signs (a prime: no row of any
                # weight repeats the one before), tiled: xz packs the
                # repeats to almost nothing.
                block = torch.randint(0, 2, (4099,), generator=g).to(t.dtype) * 2 - 1
                signs = block.repeat(t.numel() // 4099 + 1)[: t.numel()].reshape(t.shape)
                t.copy_(signs * s)
    return m


out = sys.argv[1]
flags = {a.split("=")[0]: a.partition("=")[2] for a in sys.argv[2:] if a.startswith("--")}
mini = "--mini" in flags
keep_out = []
for op in filter(None, flags.get("--keep-out", "").split(",")):
    from executorch.exir.dialects._ops import ops as exir_ops
    ns, name, overload = op.split(".")
    keep_out.append(getattr(getattr(getattr(exir_ops.edge, ns), name), overload))
os.makedirs(out, exist_ok=True)
for name in [a for a in sys.argv[2:] if not a.startswith("--")]:
    torch.manual_seed(0)
    if name == "llama_prefill":
        m, args = llama_prefill(mini)
    else:
        spec = zoo.MODELS[name]
        m = spec.build(mini=mini).eval()
        args = tuple(spec.inputs(mini).values())
    if "--two-level" in flags:
        m = two_level(m)
    with torch.no_grad():
        ep = torch.export.export(m, args)
        prog = to_edge_transform_and_lower(ep, partitioner=[WebGPUPartitioner(operator_blocklist=keep_out)]).to_executorch()
        y = m(*args)
    name = f"{name}_mini" if mini else name
    path = os.path.join(out, f"{name}.pte")
    if os.path.lexists(path):
        os.remove(path)  # a link (bench/pte_manifest_npy.py) is replaced, never written through
    with open(path, "wb") as f:
        f.write(prog.buffer)
    for i, t in enumerate(args):
        np.save(os.path.join(out, f"{name}.input_{i}.npy"), t.numpy())
    ys = list(y) if isinstance(y, (tuple, list)) else [y]
    for k, t in enumerate(ys):
        np.save(os.path.join(out, f"{name}.output_{k}.npy"), t.numpy())
    plan = prog.executorch_program.execution_plan[0]
    print(f"{name}: {len(prog.buffer) / 1e6:.1f} MB, {len(plan.delegates)} delegated subgraphs, "
          f"portable ops {sorted({o.name for o in plan.operators})}", flush=True)
