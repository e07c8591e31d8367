"""Merges a decoder pair into one model as Optimum's decoder_model_merged.onnx
does: an If on a `use_cache_branch` input (bool [1]) runs the decoder with
past inputs (true) or the prompt decoder without them (false).

    python3 merge_decoder.py DIR     # reads DIR/decoder_model.onnx and
                                     # DIR/decoder_with_past_model.onnx,
                                     # writes DIR/decoder_model_merged.onnx

The merged model's inputs are the union of both (past_key_values.* among
them, use_cache_branch last); its outputs are the prompt decoder's: the
logits and every present.*. The branch with past passes the past inputs
that it has no present for (an encoder-decoder's cross-attention keys and
values, computed once by the prompt step) through as those presents. Each
branch is its decoder's graph, its inputs read from the outer scope and
every name it defines prefixed, so that no name is defined twice.
"""
import os
import sys

import onnx
from onnx import TensorProto, helper


def branch(graph, prefix, outputs, outer_inputs):
    """graph as an If branch: no inputs (read from the outer scope), its own
    names prefixed, producing `outputs` (outer names) in that order."""
    keep = {i.name for i in graph.input}
    missing = keep - outer_inputs
    if missing:
        sys.exit(f"{prefix}: inputs {sorted(missing)} are not inputs of the merged model")

    def name(n):
        return n if (n in keep or n == "") else prefix + n

    g = helper.make_graph([], prefix.rstrip("/"), [], [])
    for t in graph.initializer:
        c = g.initializer.add()
        c.CopyFrom(t)
        c.name = name(t.name)
    for n in graph.node:
        c = g.node.add()
        c.CopyFrom(n)
        c.name = name(n.name) if n.name else ""
        c.input[:] = [name(i) for i in n.input]
        c.output[:] = [name(o) for o in n.output]
    produced = {o.name: o for o in graph.output}
    for out in outputs:
        if out.name in produced:
            v = g.output.add()
            v.CopyFrom(produced[out.name])
            v.name = name(out.name)
        else:  # a past passed through as its present
            past = "past_key_values" + out.name[len("present"):]
            if past not in keep:
                sys.exit(f"{prefix}: no output {out.name} and no input {past} to pass through")
            g.node.append(helper.make_node("Identity", [past], [prefix + out.name], name=prefix + "pass/" + out.name))
            v = g.output.add()
            v.CopyFrom(out)
            v.name = prefix + out.name
    return g


def main():
    d = sys.argv[1]
    first = onnx.load(os.path.join(d, "decoder_model.onnx"))
    past = onnx.load(os.path.join(d, "decoder_with_past_model.onnx"))
    inputs = list(past.graph.input)
    for i in first.graph.input:
        if i.name not in {x.name for x in inputs}:
            inputs.append(i)
    inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))
    outer = {i.name for i in inputs}
    outputs = list(first.graph.output)
    then_g = branch(past.graph, "with_past/", outputs, outer)
    else_g = branch(first.graph, "prompt/", outputs, outer)
    node = helper.make_node("If", ["use_cache_branch"], [o.name for o in outputs], name="optimum::if",
                            then_branch=then_g, else_branch=else_g)
    g = helper.make_graph([node], "merged_decoder", inputs, outputs)
    m = helper.make_model(g, opset_imports=list(past.opset_import), ir_version=past.ir_version)
    onnx.checker.check_model(m)
    out = os.path.join(d, "decoder_model_merged.onnx")
    onnx.save(m, out + ".part")
    os.replace(out + ".part", out)
    print(out)


if __name__ == "__main__":
    main()
