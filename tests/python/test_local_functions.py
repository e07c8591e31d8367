"""Models with local functions (ModelProto.functions, as exporters write
modules and custom ops): inlined when the model loads, the results against
ONNX Runtime and numpy. (onnx.inliner is no reference here: it drops the
attribute defaults of IR 9, leaving a Constant without a value.)"""
import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime
import pytest
from onnx import TensorProto, helper

import wgnn

OPSET = 18


def fn_scaled_gelu():
    """y = x * sigmoid(1.702 x) * alpha, alpha an attribute of the call
    (Constant's value_float = @alpha) with a default of 0.5 (IR 9)."""
    alpha = helper.make_node("Constant", [], ["alpha_t"])
    alpha.attribute.append(helper.make_attribute_ref("value_float", onnx.AttributeProto.FLOAT))
    alpha.attribute[0].ref_attr_name = "alpha"
    nodes = [
        helper.make_node("Constant", [], ["a"], value_float=1.702),
        helper.make_node("Mul", ["x", "a"], ["ax"]),
        helper.make_node("Sigmoid", ["ax"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["g"]),
        alpha,
        helper.make_node("Mul", ["g", "alpha_t"], ["y"]),
    ]
    return helper.make_function("local", "ScaledGelu", ["x"], ["y"], nodes, [helper.make_opsetid("", OPSET)],
                                attributes=[], attribute_protos=[helper.make_attribute("alpha", 0.5)])


def fn_block():
    """A block calling ScaledGelu twice (nested calls), with an optional bias."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("ScaledGelu", ["hb"], ["g1"], domain="local", alpha=2.0),
        helper.make_node("ScaledGelu", ["g1"], ["y"], domain="local"),  # the default alpha
    ]
    return helper.make_function("local", "Block", ["x", "w", "b"], ["y"], nodes,
                                [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])


def model(functions, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, functions=functions, ir_version=9,
                          opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    return m


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_nested_local_functions_with_attribute_defaults_match_onnxruntime_and_the_inliner():
    rng = np.random.default_rng(0)
    w1 = helper.make_tensor("w1", TensorProto.FLOAT, [16, 16], rng.standard_normal(256).astype(np.float32))
    b1 = helper.make_tensor("b1", TensorProto.FLOAT, [16], rng.standard_normal(16).astype(np.float32))
    nodes = [helper.make_node("Block", ["x", "w1", "b1"], ["h"], domain="local", name="block0"),
             helper.make_node("Block", ["h", "w1", "b1"], ["y"], domain="local", name="block1")]
    m = model([fn_scaled_gelu(), fn_block()], nodes, [vi("x", [4, 16])], [vi("y", [4, 16])], [w1, b1])
    x = rng.standard_normal((4, 16)).astype(np.float32)
    data = m.SerializeToString()
    (y,) = wgnn.InferenceSession(data).run(None, {"x": x})
    (ref,) = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    # The same in numpy: the given alpha (2.0) and the default (0.5).
    w, b = rng_weights(w1), rng_weights(b1)
    sg = lambda v: v / (1 + np.exp(-1.702 * v))
    block = lambda v: sg(sg(v @ w + b) * 2.0) * 0.5
    np.testing.assert_allclose(y, block(block(x.astype(np.float64))), rtol=1e-4, atol=1e-5)


def rng_weights(t):
    return onnx.numpy_helper.to_array(t).astype(np.float64)


def test_a_function_calling_itself_is_an_error():
    f = helper.make_function("local", "Loop1", ["x"], ["y"],
                             [helper.make_node("Loop1", ["x"], ["y"], domain="local")],
                             [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    m = model([f], [helper.make_node("Loop1", ["x"], ["y"], domain="local")], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(wgnn.Error, match="nest more than 64 deep"):
        wgnn.InferenceSession(m.SerializeToString())


def test_a_function_of_another_opset_is_refused():
    f = helper.make_function("local", "Neg2", ["x"], ["y"], [helper.make_node("Neg", ["x"], ["y"])],
                             [helper.make_opsetid("", 13)])
    m = model([f], [helper.make_node("Neg2", ["x"], ["y"], domain="local")], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(wgnn.Unsupported, match="imports ONNX opset 13, the model 18"):
        wgnn.InferenceSession(m.SerializeToString())


def test_calls_inside_an_if_branch_are_inlined():
    then_g = helper.make_graph([helper.make_node("ScaledGelu", ["x"], ["t"], domain="local", alpha=3.0)], "then", [],
                               [vi("t", [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [3])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    m = model([fn_scaled_gelu()], nodes,
              [vi("x", [3]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [vi("y", [3])])
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    s = wgnn.InferenceSession(m.SerializeToString())
    (y,) = s.run(None, {"x": x, "c": np.array(True)})
    np.testing.assert_allclose(y, x / (1 + np.exp(-1.702 * x)) * 3.0, rtol=1e-5)
    (y,) = s.run(None, {"x": x, "c": np.array(False)})
    np.testing.assert_array_equal(y, -x)


def test_calls_that_multiply_without_end_are_an_error_not_a_hang():
    # F0 = Neg; Fk calls F(k-1) twice: F40 would make 2^40 nodes.
    fns = [helper.make_function("local", "F0", ["x"], ["y"], [helper.make_node("Neg", ["x"], ["y"])],
                                [helper.make_opsetid("", OPSET)])]
    for k in range(1, 41):
        fns.append(helper.make_function(
            "local", f"F{k}", ["x"], ["y"],
            [helper.make_node(f"F{k - 1}", ["x"], ["h"], domain="local"),
             helper.make_node(f"F{k - 1}", ["h"], ["y"], domain="local")],
            [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)]))
    m = model(fns, [helper.make_node("F40", ["x"], ["y"], domain="local")], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(wgnn.Error, match="more than 1000000 nodes"):
        wgnn.InferenceSession(m.SerializeToString())
