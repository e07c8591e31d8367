"""Makes the ExecuTorch fixtures of tests/data/pte/ (run in .venv-executorch,
scripts/setup-executorch):

  op_tests/   ExecuTorch's own WebGPU op tests: the cases of the executorch
              wheel (executorch/backends/webgpu/test/op_tests/cases.py),
              written by its own generator (generate_op_tests: a .pte per
              case, lowered with the Vulkan partitioner as the WebGPU backend
              is, inputs and a float64 PyTorch golden as raw files,
              manifest.json).
  errors/     small programs wgnn must refuse with a clear error (another
              backend's delegate, ops without a mapping, a dynamic shape)
              and one it runs without any delegate (portable kernels only).
  models/     the seed models from scripts/models/zoo.py at their mini
              sizes (MODNet; timm's DaViT and DeiT; transformers' Whisper
              encoder and BART decoder) and the plain-torch stand-ins of
              the same patterns (Whisper, BART, a ViT, two
              transformer blocks): torch.export, lowered with
              WebGPUPartitioner, written in the same manifest format with a
              float64 eager golden. And three exported with dynamic shapes
              (torch.export.Dim bounds: MODNet's height and width, the BART
              stand-in's target length, the transformer blocks' sequence),
              each run at its bound and at smaller sizes. And a decoder
              with a key/value cache in mutable buffers (index_copy_ at
              the step's position, ExecuTorch's static-cache pattern): its
              steps are cases run in order through one session. And a
              small Llama written by ExecuTorch's own LLM export
              (examples.models.llama.export_llama -kv
              --use_sdpa_with_kv_cache -V: rotary, sdpa_with_kv_cache,
              the cache inside the delegate, the position read from an
              input), its prompt and three decode steps against eager
              PyTorch.

    .venv-executorch/bin/python scripts/models/pte_fixtures.py [--out tests/data/pte] [--only op_tests|models]

tests/pte/executorch_op_tests.py runs both folders through wgnn.
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys

import torch

MAX_CASE_BYTES = 256 * 1024
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The seed models, their zoo names, and the tolerance of each against the
# float64 golden (float32 through deeper networks drifts more).
MODELS = {
    "modnet": (1e-3, 1e-3),
    # The seed models themselves (timm's DaViT, transformers' Whisper
    # encoder and BART decoder), at the zoo's mini sizes.
    "davit_base": (1e-3, 1e-3),
    "whisper_base_encoder": (1e-3, 1e-3),
    "bart_base_decoder": (1e-3, 1e-3),
    "deit_tiny": (1e-3, 1e-3),
    "whisper_standin": (1e-3, 1e-3),
    "bart_standin": (1e-3, 1e-3),
    "vit_standin": (1e-3, 1e-3),
    "transformer_block": (1e-3, 1e-3),
}


def op_tests(out):
    d = os.path.join(out, "op_tests")
    shutil.rmtree(d, ignore_errors=True)
    # The verified suites (the generator's default set): the ones ExecuTorch
    # runs green itself.
    subprocess.run([sys.executable, "-m", "executorch.backends.webgpu.test.op_tests.generate_op_tests",
                    "--output", d], check=True)
    prune(d)


def prune(d):
    # Cases over MAX_CASE_BYTES (a few with BART- or SigLIP-sized inputs)
    # are left out of the committed copy, listed in left_out.txt.
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    files = {}
    for e in manifest:
        files.setdefault(e["pte"], set()).update({e["pte"], e["golden"]["path"], *[i["path"] for i in e["inputs"]]})
    size = {k: sum(os.path.getsize(os.path.join(d, f)) for f in v) for k, v in files.items()}
    drop = sorted(k for k, n in size.items() if n > MAX_CASE_BYTES)
    for k in drop:
        for f in files[k]:
            os.remove(os.path.join(d, f))
    kept = [e for e in manifest if e["pte"] not in drop]
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(kept, f, indent=2)
    with open(os.path.join(d, "left_out.txt"), "w") as f:
        f.write(f"# Cases of ExecuTorch's generator over {MAX_CASE_BYTES} bytes, not committed "
                "(scripts/models/pte_fixtures.py):\n")
        for k in drop:
            f.write(f"{k} {size[k]}\n")
    print(f"op_tests: {len(kept)} entries in {d}, {len(drop)} cases left out (over {MAX_CASE_BYTES} bytes)")


def write_raw(t, path):
    if t.dtype == torch.bool:
        t.to(torch.int8).numpy().astype("<i1").tofile(path)
        return "bool"
    if t.dtype in (torch.int64, torch.int32):
        t.numpy().astype("<i8" if t.dtype == torch.int64 else "<i4").tofile(path)
        return "int64" if t.dtype == torch.int64 else "int32"
    t.to(torch.float32).numpy().astype("<f4").tofile(path)
    return "float32"


def _sliced(spec, size):
    """The mini inputs with the dynamic dims at `size` (a case's sizes)."""
    base = spec.inputs(True)
    g = torch.Generator().manual_seed(size[0] * 1000 + size[-1])
    if "image" in base:
        return {"image": torch.rand(1, 3, size[0], size[1], generator=g)}
    if "ids" in base:  # the transformer blocks: one sequence length
        n = size[0]
        keep = torch.ones(1, n, dtype=torch.int64)
        keep[0, n - n // 4:] = 0
        return {"ids": base["ids"][:, :n].contiguous(), "x": torch.randn(1, n, base["x"].shape[2], generator=g),
                "keep": keep}
    out = dict(base)
    out["input_ids"] = base["input_ids"][:, :size[0]].contiguous()
    return out


def _dynamic(args):
    """torch.export's dynamic_shapes for a mini model's inputs."""
    from torch.export import Dim
    if len(args) == 1:  # an image: height and width, multiples of 32 up to the mini size
        h = args[0].shape[2]
        return ({2: 32 * Dim("h", min=1, max=h // 32), 3: 32 * Dim("w", min=1, max=h // 32)},)
    if len(args) == 3:  # the transformer blocks: ids, x and keep share the sequence
        seq = Dim("seq", min=2, max=args[0].shape[1])
        return ({1: seq}, {1: seq}, {1: seq})
    return ({1: Dim("t", min=2, max=args[0].shape[1])}, None)  # BART: the target length


# Models exported with dynamic shapes, and the sizes each case runs at (the
# first: the bound).
DYNAMIC = {
    "modnet": [(256, 256), (64, 96), (160, 128)],
    "bart_standin": [(32,), (9,), (17,)],
    "transformer_block": [(24,), (5,), (13,)],
}


class KVDecoder(torch.nn.Module):
    """One token a step; keys and values kept in buffers of max_len slots,
    written at `pos` (index_copy_), attention over the slots up to pos."""

    def __init__(self, d=32, heads=2, max_len=16, vocab=50):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.emb = torch.nn.Embedding(vocab, d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.o = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)
        self.register_buffer("k_cache", torch.zeros(1, heads, max_len, d // heads))
        self.register_buffer("v_cache", torch.zeros(1, heads, max_len, d // heads))
        self.register_buffer("slots", torch.arange(max_len))

    def forward(self, tok, pos):
        x = self.emb(tok)
        q, k, v = self.qkv(self.norm(x)).view(1, 1, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        att = (q @ self.k_cache.transpose(2, 3)) / self.hd ** 0.5
        att = att.masked_fill(self.slots > pos, float("-inf")).softmax(-1)
        y = (att @ self.v_cache).transpose(1, 2).reshape(1, 1, -1)
        return (x + self.o(y)) @ self.emb.weight.T


def kv_decoder(d, entries, steps=6):
    """The KV decoder lowered with WebGPUPartitioner, and its steps: each
    step's token and position, and eager PyTorch's logits after the steps
    before it (float64 on a float64 copy)."""
    from executorch.backends.webgpu.partitioner import WebGPUPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model = KVDecoder().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        ep = torch.export.export(copy.deepcopy(model), (torch.tensor([[3]]), torch.tensor([0])))
    prog = to_edge_transform_and_lower(ep, partitioner=[WebGPUPartitioner()]).to_executorch()
    with open(os.path.join(d, "kv_decoder.pte"), "wb") as f:
        f.write(prog.buffer)
    ref = copy.deepcopy(model).double()
    eager = copy.deepcopy(model)
    g = torch.Generator().manual_seed(7)
    for step in range(steps):
        tok = torch.randint(0, 50, (1, 1), generator=g)
        pos = torch.tensor([step])
        tag = f"kv_decoder_step{step}"
        in_entries = []
        for i, t in enumerate((tok, pos)):
            rel = f"{tag}.in{i}.bin"
            dt = write_raw(t, os.path.join(d, rel))
            in_entries.append({"path": rel, "shape": list(t.shape), "dtype": dt})
        with torch.no_grad():
            want = ref(tok, pos)
            torch.testing.assert_close(eager(tok, pos), want.float(), atol=1e-4, rtol=1e-4)
        rel = f"{tag}.golden.bin"
        dt = write_raw(want, os.path.join(d, rel))
        entries.append({"op": "model", "case": tag, "pte": "kv_decoder.pte", "inputs": in_entries,
                        "golden": {"path": rel, "shape": list(want.shape), "dtype": dt, "output_index": 0},
                        "atol": 1e-4, "rtol": 1e-4})
    print(f"models: kv_decoder.pte: {len(prog.buffer)} bytes, state in mutable buffers, {steps} steps")


def et_llama(d, entries):
    """ExecuTorch's LLM export of a 2-layer Llama (seeded weights written as
    a checkpoint), lowered for Vulkan/WebGPU, and eager PyTorch's logits for a
    prompt of 3 tokens and 3 single-token steps after it."""
    import tempfile

    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 128, "multiple_of": 32,
              "norm_eps": 1e-5, "rope_theta": 10000.0}
    torch.manual_seed(0)
    model = construct_transformer(ModelArgs(max_seq_len=32, max_context_len=32, max_batch_size=1, use_kv_cache=True,
                                            enable_dynamic_shape=True, **params)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.08)
            elif "norm" in name:
                p.uniform_(0.8, 1.2)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "params.json"), "w") as f:
            json.dump(params, f)
        torch.save(model.state_dict(), os.path.join(tmp, "tiny.pth"))
        subprocess.run([sys.executable, "-m", "executorch.examples.models.llama.export_llama", "--model", "llama3",
                        "--params", "params.json", "--checkpoint", "tiny.pth", "-kv", "--use_sdpa_with_kv_cache",
                        "-V", "--max_seq_length", "32", "--max_context_length", "32", "--output_name", "et_llama.pte"],
                       cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.copy(os.path.join(tmp, "et_llama.pte"), os.path.join(d, "et_llama.pte"))
    steps = [([5, 7, 9], 0), ([11], 3), ([2], 4), ([40], 5)]
    with torch.no_grad():
        for i, (toks, pos) in enumerate(steps):
            tag = f"et_llama_step{i}"
            args = (torch.tensor([toks]), torch.tensor([pos]))
            in_entries = []
            for k, t in enumerate(args):
                rel = f"{tag}.in{k}.bin"
                dt = write_raw(t, os.path.join(d, rel))
                in_entries.append({"path": rel, "shape": list(t.shape), "dtype": dt})
            y = model(args[0], {"input_pos": args[1]})
            y = y[0] if isinstance(y, tuple) else y
            rel = f"{tag}.golden.bin"
            dt = write_raw(y, os.path.join(d, rel))
            entries.append({"op": "model", "case": tag, "pte": "et_llama.pte", "inputs": in_entries,
                            "golden": {"path": rel, "shape": list(y.shape), "dtype": dt, "output_index": 0},
                            "atol": 1e-4, "rtol": 1e-4})
    print(f"models: et_llama.pte: {os.path.getsize(os.path.join(d, 'et_llama.pte'))} bytes, {len(steps)} steps")


def _model_cases(d, entries, tag, pte, model, args, atol, rtol):
    """One run of `pte` at `args`: the inputs as TAG.in<i>.bin, a float64
    golden per output (TAG[_out<k>].golden.bin), and a manifest entry per
    output. The float32 eager run must be within the tolerance of the
    float64 golden: the tolerance is one PyTorch itself meets."""
    in_entries = []
    for i, t in enumerate(args):
        rel = f"{tag}.in{i}.bin"
        dt = write_raw(t.contiguous(), os.path.join(d, rel))
        in_entries.append({"path": rel, "shape": list(t.shape), "dtype": dt})
    with torch.no_grad():
        golden = copy.deepcopy(model).double()(*[t.double() if t.is_floating_point() else t for t in args])
        eager = model(*args)
    golden = list(golden) if isinstance(golden, (tuple, list)) else [golden]
    eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
    for k, (g, e) in enumerate(zip(golden, eager)):
        torch.testing.assert_close(e.float(), g.float(), atol=atol, rtol=rtol)
        suffix = f"_out{k}" if len(golden) > 1 else ""
        rel = f"{tag}{suffix}.golden.bin"
        dt = write_raw(g.contiguous(), os.path.join(d, rel))
        entries.append({"op": "model", "case": f"{tag}{suffix}", "pte": pte, "inputs": in_entries,
                        "golden": {"path": rel, "shape": list(g.shape), "dtype": dt, "output_index": k},
                        "atol": atol, "rtol": rtol})


def models(out):
    from executorch.backends.webgpu.partitioner import WebGPUPartitioner
    from executorch.exir import to_edge_transform_and_lower

    sys.path.insert(0, HERE)
    import zoo

    d = os.path.join(out, "models")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    entries = []
    for name, (atol, rtol) in MODELS.items():
        spec = zoo.MODELS[name]
        torch.manual_seed(0)
        model = spec.build(mini=True).eval()
        inputs = spec.inputs(True)
        args = tuple(inputs.values())
        ep = torch.export.export(model, args)
        prog = to_edge_transform_and_lower(ep, partitioner=[WebGPUPartitioner()]).to_executorch()
        with open(os.path.join(d, f"{name}.pte"), "wb") as f:
            f.write(prog.buffer)
        _model_cases(d, entries, name, f"{name}.pte", model, args, atol, rtol)
        delegated = sum(len(p.delegates) for p in prog.executorch_program.execution_plan)
        kernels = sum(len(p.operators) for p in prog.executorch_program.execution_plan)
        print(f"models: {name}: {len(prog.buffer)} bytes, {delegated} delegated subgraphs, {kernels} portable ops")
    for name, sizes in DYNAMIC.items():
        atol, rtol = MODELS[name]
        spec = zoo.MODELS[name]
        torch.manual_seed(0)
        model = spec.build(mini=True).eval()
        args = tuple(spec.inputs(True).values())
        ep = torch.export.export(model, args, dynamic_shapes=_dynamic(args))
        prog = to_edge_transform_and_lower(ep, partitioner=[WebGPUPartitioner()]).to_executorch()
        pte = f"{name}_dynamic.pte"
        with open(os.path.join(d, pte), "wb") as f:
            f.write(prog.buffer)
        for size in sizes:
            tag = f"{name}_dynamic_{'x'.join(map(str, size))}"
            _model_cases(d, entries, tag, pte, model, tuple(_sliced(spec, size).values()), atol, rtol)
        print(f"models: {pte}: {len(prog.buffer)} bytes, dynamic, {len(sizes)} sizes")
    kv_decoder(d, entries)
    et_llama(d, entries)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(entries, f, indent=2)


class _Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2.0


class _Unmapped(torch.nn.Module):
    def forward(self, x):
        return torch.atan2(x, x + 1.0) + torch.trunc(x)


def errors(out):
    from executorch.backends.webgpu.partitioner import WebGPUPartitioner
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    d = os.path.join(out, "errors")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    torch.manual_seed(0)
    x = (torch.randn(2, 8),)

    def save(name, module, partitioner, dynamic_shapes=None):
        ep = torch.export.export(module.eval(), x, dynamic_shapes=dynamic_shapes)
        prog = to_edge_transform_and_lower(ep, partitioner=partitioner).to_executorch()
        with open(os.path.join(d, name), "wb") as f:
            f.write(prog.buffer)
        print(f"errors: {name}: {len(prog.buffer)} bytes")

    torch.manual_seed(1)
    small = _Small().eval()
    save("xnnpack.pte", small, [XnnpackPartitioner()])
    save("portable_only.pte", small, [])
    save("unmapped_ops.pte", _Unmapped(), [WebGPUPartitioner()])
    save("dynamic_batch.pte", small, [WebGPUPartitioner()],
         dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    # The portable-only program's output for its input (the loader test).
    with torch.no_grad():
        write_raw(x[0], os.path.join(d, "portable_only.in0.bin"))
        write_raw(small(*x), os.path.join(d, "portable_only.golden.bin"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "pte"))
    ap.add_argument("--only", choices=["op_tests", "models", "errors"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.only in (None, "op_tests"):
        op_tests(a.out)
    if a.only in (None, "models"):
        models(a.out)
    if a.only in (None, "errors"):
        errors(a.out)


if __name__ == "__main__":
    main()
