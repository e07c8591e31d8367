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

`et_llama`: the same sizes through ExecuTorch's own LLM export
(examples.models.llama.export_llama -kv --use_sdpa_with_kv_cache -V, a
checkpoint of seeded weights, a context of 256): et_llama.pte with the
inputs of a 128-token prompt (et_llama) and of one decode step at position
128 (et_llama_decode.*, the same program); eager PyTorch's logits for both,
each from empty caches.

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


def et_llama(out, mini, two):
    import json
    import subprocess
    import tempfile

    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params = ({"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 128} if mini else
              {"dim": 768, "n_layers": 12, "n_heads": 12, "n_kv_heads": 4, "vocab_size": 32000})
    params.update({"multiple_of": 256 if not mini else 32, "norm_eps": 1e-5, "rope_theta": 10000.0})
    ctx = 32 if mini else 256
    prompt = 16 if mini else 128
    torch.manual_seed(0)
    m = construct_transformer(ModelArgs(max_seq_len=ctx, max_context_len=ctx, max_batch_size=1, use_kv_cache=True,
                                        enable_dynamic_shape=True, **params)).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.02)
            elif "norm" in name:
                p.uniform_(0.8, 1.2)
    if two:
        m = two_level(m)
    name = "et_llama_mini" if mini else "et_llama"
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "params.json"), "w") as f:
            json.dump(params, f)
        torch.save(m.state_dict(), os.path.join(tmp, "model.pth"))
        subprocess.run([sys.executable, "-m", "executorch.examples.models.llama.export_llama", "--model", "llama3",
                        "--params", "params.json", "--checkpoint", "model.pth", "-kv", "--use_sdpa_with_kv_cache",
                        "-V", "--max_seq_length", str(ctx), "--max_context_length", str(ctx), "--output_name",
                        "m.pte"], cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for n in (name, name + "_decode"):
            path = os.path.join(out, n + ".pte")
            if os.path.lexists(path):
                os.remove(path)
            with open(os.path.join(tmp, "m.pte"), "rb") as src, open(path, "wb") as dst:
                dst.write(src.read())
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, params["vocab_size"], (1, prompt), generator=g)
    nxt = torch.randint(0, params["vocab_size"], (1, 1), generator=g)
    with torch.no_grad():
        for n, (t, p) in ((name, (ids, 0)), (name + "_decode", (nxt, prompt))):
            # Each from empty caches, as a runner started for it has them
            # (bench/run_executorch.sh starts one per program).
            for b_name, buf in m.named_buffers():
                if b_name.endswith("k_cache") or b_name.endswith("v_cache"):
                    buf.zero_()
            pos = torch.tensor([p])
            y = m(t, {"input_pos": pos})
            y = y[0] if isinstance(y, tuple) else y
            np.save(os.path.join(out, f"{n}.input_0.npy"), t.numpy())
            np.save(os.path.join(out, f"{n}.input_1.npy"), pos.numpy())
            np.save(os.path.join(out, f"{n}.output_0.npy"), y.float().numpy())
    print(f"{name}: {os.path.getsize(os.path.join(out, name + '.pte')) / 1e6:.1f} MB (export_llama), prompt {prompt}, "
          f"decode at {prompt}", flush=True)


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
    if name == "et_llama":
        et_llama(out, mini, "--two-level" in flags)
        continue
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
