"""Makes ISNet run at any input size: writes a copy of the model whose
Resize nodes take their target size from the tensor they are resized to
match, instead of the constants the export traced at 1024x1024.

usage: isnet_any_size.py IN.onnx OUT.onnx

ISNet upsamples with `_upsample_like(src, tar)` (F.interpolate to
tar.shape[2:]); the ONNX export folded tar's height and width into
constants. Each Resize's `sizes` is Concat(Shape(x)[0:2], CONSTANT); here
the constant becomes Shape(tar)[2:4], where tar is the other input of the
Concat that takes the Resize's result, or the model's input for the
Resizes that lead to a Sigmoid (the side outputs, at the input's size).
Where the export folded the whole size into one constant (the uint8 model of
the same package), sizes becomes Concat(Shape(x)[0:2], Shape(tar)[2:4]).
At the declared 1024x1024 every size is what it was (checked), so the
model computes exactly what the original does there; at another input size
(a multiple of 32) every upsampled map matches the one it joins. The copy
declares its input's height and width free, and says in its metadata
(wgnn.preprocess) that it takes ISNet's pre-processing.
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

src, dst = sys.argv[1:3]
m = onnx.load(src)
g = m.graph
prod = {o: n for n in g.node for o in n.output}
cons = {}
for n in g.node:
    for i in n.input:
        cons.setdefault(i, []).append(n)
inits = {t.name: t for t in g.initializer}
inp = g.input[0]
dims = inp.type.tensor_type.shape.dim
declared = [d.dim_value for d in dims]
assert len(declared) == 4 and declared[2] > 0 and declared[3] > 0, f"input {inp.name} is not a fixed NCHW image"


def constant(name):
    p = prod.get(name)
    if p is None or p.op_type != "Constant":
        return None
    return numpy_helper.to_array(p.attribute[0].t)


# Static shapes at the declared size: the rewrite is checked against them.
inferred = onnx.shape_inference.infer_shapes(m)
shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
          for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}

new_nodes = []
dropped = set()  # the traced constants, dropped when nothing else reads them
rewired = 0
for n in g.node:
    if n.op_type != "Resize" or len(n.input) < 4 or not n.input[3]:
        continue
    folded = inits.get(n.input[3])  # the whole size folded into one constant (the uint8 export)
    if folded is not None:
        full = [int(v) for v in numpy_helper.to_array(folded).tolist()]
        if len(full) != 4:
            sys.exit(f"{n.name}: sizes {full} are not N, C, H, W")
        hw = full[2:]
    else:
        sizes = prod[n.input[3]]
        if sizes.op_type != "Concat" or len(sizes.input) != 2 or constant(sizes.input[1]) is None:
            sys.exit(f"{n.name}: sizes are not Concat(Shape slice, constant); this is not the ISNet export expected")
        hw = [int(v) for v in constant(sizes.input[1]).tolist()]
    # The consumer, through Casts.
    out, users = n.output[0], cons.get(n.output[0], [])
    while len(users) == 1 and users[0].op_type == "Cast":
        out, users = users[0].output[0], cons.get(users[0].output[0], [])
    if len(users) == 1 and users[0].op_type == "Concat":
        others = [i for i in users[0].input if i != out]
        assert len(others) == 1, f"{n.name}: its Concat has {len(others)} other inputs"
        tar = others[0]
    elif len(users) == 1 and users[0].op_type == "Sigmoid":
        tar = inp.name
    else:
        sys.exit(f"{n.name}: its result goes to {[u.op_type for u in users]}; expected a Concat or a Sigmoid")
    if shapes.get(tar, [0, 0, 0, 0])[2:4] != hw:
        sys.exit(f"{n.name}: target {tar} is {shapes.get(tar)} at the declared size, the constant says {hw}")
    base = f"any_size/{rewired}"
    new_nodes += [
        helper.make_node("Shape", [tar], [base + "/shape"], name=base + "/Shape"),
        helper.make_node("Slice", [base + "/shape", base + "/starts", base + "/ends"], [base + "/hw"],
                         name=base + "/Slice"),
    ]
    g.initializer.extend([numpy_helper.from_array(np.array([2], np.int64), base + "/starts"),
                          numpy_helper.from_array(np.array([4], np.int64), base + "/ends")])
    if folded is not None:
        # sizes = Concat(Shape(x)[0:2], Shape(tar)[2:4]).
        new_nodes += [
            helper.make_node("Shape", [n.input[0]], [base + "/xshape"], name=base + "/ShapeX"),
            helper.make_node("Slice", [base + "/xshape", base + "/zero", base + "/starts"], [base + "/nc"],
                             name=base + "/SliceX"),
            helper.make_node("Concat", [base + "/nc", base + "/hw"], [base + "/sizes"], name=base + "/Sizes", axis=0),
        ]
        g.initializer.append(numpy_helper.from_array(np.array([0], np.int64), base + "/zero"))
        dropped.add(n.input[3])
        n.input[3] = base + "/sizes"
    else:
        dropped.add(sizes.input[1])
        sizes.input[1] = base + "/hw"
    rewired += 1

if rewired == 0:
    sys.exit(f"{src}: no Resize with traced constant sizes; this is not the ISNet export expected")

# Topological order again (a Resize now waits for its target), otherwise
# keeping the original order.
still_read = {i for n in g.node for i in n.input}
nodes = [n for n in g.node if not (n.op_type == "Constant" and n.output[0] in dropped and n.output[0] not in still_read)]
nodes += new_nodes
ready = {i.name for i in g.input} | {t.name for t in g.initializer} | {""}
order, pending = [], list(range(len(nodes)))
while pending:
    rest = []
    for k in pending:
        if all(i in ready for i in nodes[k].input):
            order.append(nodes[k])
            ready.update(nodes[k].output)
        else:
            rest.append(k)
    if len(rest) == len(pending):
        sys.exit("the rewritten graph has a cycle")
    pending = rest
del g.node[:]
g.node.extend(order)
# Folded sizes nothing reads any more.
read = {i for n in g.node for i in n.input}
keep = [t for t in g.initializer if t.name in read or t.name not in dropped]
del g.initializer[:]
g.initializer.extend(keep)
# The input's height and width become free ("height", "width"), so that
# ONNX Runtime, wgnn's InferenceSession and the CLI take any size; the
# outputs' heights and widths are left unset (each is the input's or a
# fraction of it). The metadata names the pre-processing, which the free
# size no longer tells: `wgnn remove-bg` feeds it ISNet's 1024x1024 unless
# --size says otherwise.
del g.value_info[:]
for d, name in zip(dims[2:], ("height", "width")):
    d.Clear()
    d.dim_param = name
for o in g.output:
    for d in o.type.tensor_type.shape.dim[2:]:
        d.Clear()
del m.metadata_props[:]
helper.set_model_props(m, {"wgnn.preprocess": "isnet"})
onnx.checker.check_model(m)
onnx.save(m, dst + ".part")
os.replace(dst + ".part", dst)
print(f"{dst}: {rewired} Resize nodes take their size from their target")
