"""PyTorch modules on wgnn without writing a file: through torch.export and
ExecuTorch's WebGPU lowering, into wgnn's .pte front end (docs/EXECUTORCH.md).

    import wgnn.torch
    fast = wgnn.torch.compile(model, (x,))        # torch.export, then lowered once
    y = fast(x)                                   # torch tensors in and out

    compiled = torch.compile(model, backend="wgnn")   # each graph TorchDynamo captures

Needs torch and executorch (the versions of tests/pte/requirements.txt;
scripts/setup-executorch makes such an environment). The program is the
one ExecuTorch itself would ship (`to_edge_transform_and_lower` with
WebGPUPartitioner, then `to_executorch()`), held in memory: the ATen ops
reach wgnn with their names, the ops the partitioner leaves out as portable
kernels, which wgnn runs on the GPU too.

torch.compile(backend="wgnn") hands each graph TorchDynamo captures to
wgnn; a graph that cannot be exported or that wgnn cannot run (an op
without a mapping, dynamic shapes) runs in PyTorch instead, with a warning
naming why: the fallback is per captured graph.
"""
import warnings

import numpy as np

from . import InferenceSession, Unsupported

__all__ = ["compile", "export_pte", "backend", "CompiledModule"]


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("wgnn.torch needs PyTorch (and executorch): scripts/setup-executorch makes such an "
                          "environment") from e
    return torch


def export_pte(module, example_inputs, partitioner="webgpu"):
    """The ExecuTorch program of `module` at `example_inputs`, as bytes.

    partitioner: "webgpu" (WebGPUPartitioner, the default), or None for
    portable kernels only (every op outside a delegate)."""
    torch = _torch()
    from executorch.exir import to_edge_transform_and_lower

    if not isinstance(example_inputs, tuple):
        example_inputs = tuple(example_inputs) if isinstance(example_inputs, list) else (example_inputs,)
    parts = []
    if partitioner == "webgpu":
        from executorch.backends.webgpu.partitioner import WebGPUPartitioner

        parts = [WebGPUPartitioner()]
    elif partitioner is not None:
        raise ValueError(f"partitioner: 'webgpu' or None, not {partitioner!r}")
    with torch.no_grad():
        ep = torch.export.export(module, example_inputs)
        prog = to_edge_transform_and_lower(ep, partitioner=parts).to_executorch()
    return bytes(prog.buffer)


class CompiledModule:
    """A module's program on wgnn: called with tensors of the example
    inputs' shapes and dtypes, returns torch tensors (the module's output
    structure: a tensor, or a tuple/list of them)."""

    def __init__(self, pte, out_spec, sess_options=None):
        self.session = InferenceSession(pte, sess_options)
        self._names = [i.name for i in self.session.get_inputs()]
        self._out_spec = out_spec

    def __call__(self, *args):
        torch = _torch()
        flat = [a for a in args if isinstance(a, torch.Tensor)]
        if len(flat) != len(self._names):
            raise ValueError(f"{len(flat)} tensors given, the program takes {len(self._names)}")
        feeds = {n: t.detach().cpu().contiguous().numpy() for n, t in zip(self._names, flat)}
        outs = [torch.from_numpy(np.ascontiguousarray(o)) for o in self.session.run(None, feeds)]
        if self._out_spec is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        from torch.utils import _pytree

        return _pytree.tree_unflatten(outs, self._out_spec)


def compile(module, example_inputs, partitioner="webgpu", sess_options=None):  # noqa: A001 - as torch.compile
    """torch.export `module` at `example_inputs`, lower it as ExecuTorch's
    WebGPU backend does, and load the program into wgnn."""
    torch = _torch()
    from torch.utils import _pytree

    if not isinstance(example_inputs, tuple):
        example_inputs = tuple(example_inputs) if isinstance(example_inputs, list) else (example_inputs,)
    was_training = getattr(module, "training", False)
    if hasattr(module, "eval"):
        module.eval()
    try:
        with torch.no_grad():
            _, out_spec = _pytree.tree_flatten(module(*example_inputs))
        pte = export_pte(module, example_inputs, partitioner)
    finally:
        if was_training:
            module.train()
    return CompiledModule(pte, out_spec, sess_options)


def backend(gm, example_inputs, **kwargs):
    """torch.compile's backend "wgnn": the captured graph on wgnn, or in
    PyTorch when it cannot be (a warning says why).

    The graph is exported and lowered at its first call, not while
    TorchDynamo compiles (torch.export cannot run inside that)."""
    state = {}

    def run(*args):
        if "fn" not in state:
            try:
                state["fn"] = compile(gm, tuple(args))
            except Exception as e:  # export, lowering or wgnn's load: many exception types
                warnings.warn(f"wgnn: this graph runs in PyTorch: {type(e).__name__}: {e}", stacklevel=2)
                state["fn"] = gm.forward
        out = state["fn"](*args)
        # TorchDynamo's graphs return a tuple (or list) of tensors.
        return out if isinstance(out, (tuple, list)) else (out,)

    return run
