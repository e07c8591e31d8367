"""Export zoo models (scripts/models/zoo.py) to ONNX, with their inputs.

usage: export.py --model NAME|all --opset N [--mini] --out DIR [--dynamo] [--half]

Writes DIR/NAME[_mini]_opsetN.onnx and DIR/NAME[_mini]_opsetN_inputs/<input>.npy,
checks the model with onnx.checker and prints one line per model. Without
--dynamo the TorchScript exporter runs with training=PRESERVE on the
eval-mode model, which keeps BatchNormalization nodes (EVAL mode would fold
them into the convolutions). --dynamo takes torch.export's exporter (torch
2.x). Exit status 1 when any export fails.

--half exports the model in float16 instead: model.half(), its floating-point
inputs cast to float16 (integer inputs such as token ids stay as they are),
traced on CUDA when torch.cuda.is_available(), else on the CPU (where a torch
without float16 CPU kernels for the model's ops fails, saying so). It writes
DIR/NAME[_mini]_opsetN_fp16.onnx and DIR/NAME[_mini]_opsetN_fp16_inputs/ (the
float inputs as float16 .npy), beside the float32 export, which is unchanged:
the model ONNX Runtime runs at the precision of `wgnn bench --fp16`.
"""
import argparse
import inspect
import os
import sys
import time
import traceback
from collections import Counter

import numpy as np
import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import MODELS  # noqa: E402


def base_name(name, opset, mini, half=False, dynamic=None):
    return f"{name}{'_mini' if mini else ''}_opset{opset}{'_fp16' if half else ''}{'_dynamic' if dynamic else ''}"


def parse_dynamic(specs):
    """["input_ids:1:seq", ...] -> {"input_ids": {1: "seq"}}: the inputs' axes
    exported as symbolic dims (torch.onnx.export's dynamic_axes)."""
    out = {}
    for spec in specs or []:
        parts = spec.split(":")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2]:
            raise ValueError(f"--dynamic {spec}: expected INPUT:AXIS:NAME, e.g. input_ids:1:seq")
        out.setdefault(parts[0], {})[int(parts[1])] = parts[2]
    return out


def to_half(model, inputs):
    """model.half() on CUDA when there is one, else on the CPU, and its
    floating-point inputs cast to float16 there; one forward pass first, so a
    float16 kernel the CPU lacks fails here with a message that says so."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(dev).half()
    inputs = {k: (v.to(dev).half() if v.is_floating_point() else v.to(dev)) for k, v in inputs.items()}
    try:
        with torch.no_grad():
            model(*inputs.values())
    except RuntimeError as e:
        first = (str(e).strip().splitlines() or [""])[0]
        if dev.type == "cpu" and "Half" in first:
            raise RuntimeError(f"float16 export on the CPU: torch {torch.__version__} has no CPU float16 kernel for "
                               f"this model ({first}); export --half where CUDA is available") from e
        raise
    return model, inputs, dev.type


def check_half_inputs(path, inputs):
    """The float16 export's graph inputs: float16 where the zoo's input is a
    floating-point tensor, the zoo's integer type otherwise."""
    m = onnx.load(path, load_external_data=False)
    kinds = {i.name: i.type.tensor_type.elem_type for i in m.graph.input}
    for k, v in inputs.items():
        want = onnx.TensorProto.FLOAT16 if v.is_floating_point() else None
        got = kinds.get(k)
        if want is not None and got != want:
            raise RuntimeError(f"input '{k}' of the float16 export is {onnx.TensorProto.DataType.Name(got or 0)}, "
                               "not FLOAT16")
        if want is None and got in (onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT):
            raise RuntimeError(f"integer input '{k}' became {onnx.TensorProto.DataType.Name(got)}")


def rename_io(path, in_names, out_names):
    """Gives the graph's inputs and outputs the zoo's names, in order, where an
    exporter chose others (compare.py finds <input>.npy by name)."""
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    graph_in = [i for i in m.graph.input if i.name not in inits]
    if len(graph_in) != len(in_names) or len(m.graph.output) != len(out_names):
        raise RuntimeError(f"the export has inputs {[i.name for i in graph_in]} and outputs "
                           f"{[o.name for o in m.graph.output]}; expected {in_names} and {out_names}")
    ren = {v.name: n for v, n in zip(list(graph_in) + list(m.graph.output), in_names + out_names) if v.name != n}
    if not ren:
        return
    for v in list(graph_in) + list(m.graph.output) + list(m.graph.value_info):
        v.name = ren.get(v.name, v.name)
    for node in m.graph.node:
        node.input[:] = [ren.get(x, x) for x in node.input]
        node.output[:] = [ren.get(x, x) for x in node.output]
    onnx.save(m, path)


def export_one(name, opset, mini, out, dynamo, half=False, dynamic=None):
    spec = MODELS[name]
    model = spec.build(mini)
    inputs = spec.inputs(mini)
    for k in dynamic or {}:
        if k not in inputs:
            raise ValueError(f"--dynamic: '{k}' is not an input of {name} (its inputs: {', '.join(inputs)})")
    where = "cpu"
    if half:
        model, inputs, where = to_half(model, inputs)
    base = base_name(name, opset, mini, half, dynamic)
    path = os.path.join(out, base + ".onnx")
    params = inspect.signature(torch.onnx.export).parameters
    kw = dict(input_names=list(inputs), output_names=list(spec.output_names), opset_version=opset)
    if dynamo and dynamic:
        raise ValueError("--dynamic is for the TorchScript exporter (its dynamic_axes), not --dynamo")
    if dynamo:
        if "dynamo" not in params:
            raise RuntimeError(f"torch {torch.__version__} has no dynamo exporter (torch.onnx.export(dynamo=True))")
        kw["dynamo"] = True
        if "external_data" in params:
            kw["external_data"] = False  # one file: the weights inside the model
        if "fallback" in params:
            kw["fallback"] = False  # fail rather than silently use the TorchScript exporter
    else:
        if "dynamo" in params:
            kw["dynamo"] = False
        if dynamic:
            kw["dynamic_axes"] = dynamic
        kw["training"] = torch.onnx.TrainingMode.PRESERVE
        kw["do_constant_folding"] = True
    exporter = torch.onnx.export
    if "training" in kw and "training" not in params and not any(
            p.kind == p.VAR_KEYWORD for p in params.values()):
        # A torch whose export() no longer names `training`: its TorchScript
        # exporter's own entry point still takes it.
        exporter = torch.onnx.utils.export
        kw.pop("dynamo", None)
    t0 = time.time()
    with torch.no_grad():
        exporter(model, tuple(inputs.values()), path, **kw)
    seconds = time.time() - t0
    rename_io(path, list(inputs), list(spec.output_names))
    onnx.checker.check_model(path)
    if half:
        check_half_inputs(path, inputs)
    m = onnx.load(path, load_external_data=False)
    ops = Counter(n.op_type for n in m.graph.node)
    indir = os.path.join(out, base + "_inputs")
    os.makedirs(indir, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(indir, k + ".npy"), v.cpu().numpy())
    opsets = ",".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in m.opset_import)
    print(f"OK {base}.onnx ({'dynamo' if dynamo else 'torchscript'}"
          f"{', float16 on ' + where if half else ''}, {opsets}, "
          f"{os.path.getsize(path) / 2**20:.1f} MiB, {len(m.graph.node)} nodes, "
          f"BatchNormalization {ops.get('BatchNormalization', 0)}, {seconds:.0f} s) "
          f"ops: {' '.join(f'{k}:{v}' for k, v in sorted(ops.items()))}", flush=True)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a zoo name or 'all': " + ", ".join(MODELS))
    ap.add_argument("--opset", type=int, required=True)
    ap.add_argument("--mini", action="store_true", help="the reduced model (same blocks, small)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dynamo", action="store_true", help="torch.export's exporter (torch 2.x)")
    ap.add_argument("--half", action="store_true",
                    help="export in float16 (model.half(), float inputs as float16; on CUDA when available) "
                         "as NAME[_mini]_opsetN_fp16.onnx")
    ap.add_argument("--dynamic", action="append", metavar="INPUT:AXIS:NAME",
                    help="export this input axis as the symbolic dim NAME (repeatable; TorchScript exporter), "
                         "as NAME[_mini]_opsetN_dynamic.onnx")
    a = ap.parse_args()
    dynamic = parse_dynamic(a.dynamic)
    names = list(MODELS) if a.model == "all" else [a.model]
    for n in names:
        if n not in MODELS:
            ap.error(f"unknown model '{n}'; known: {', '.join(MODELS)}")
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    for n in names:
        try:
            export_one(n, a.opset, a.mini, a.out, a.dynamo, a.half, dynamic)
        except Exception as e:  # noqa: BLE001 - report, go on with the others
            failed += 1
            traceback.print_exc()
            msg = str(e).strip().splitlines()
            print(f"FAIL {base_name(n, a.opset, a.mini, a.half, dynamic)}.onnx ({'dynamo' if a.dynamo else 'torchscript'}): "
                  f"{type(e).__name__}: {msg[0] if msg else ''}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
