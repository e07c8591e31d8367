#!/usr/bin/env python3
"""Differential graph fuzzer: random valid ONNX graphs, wgnn against ONNX Runtime CPU.

    graph_fuzz.py --seed 0 --count 300                 # graphs 0..299
    graph_fuzz.py --seed 0 --count 10000 --save DIR    # minimized failures into DIR
    graph_fuzz.py --replay tests/onnx/graph_fuzz_regressions
    graph_fuzz.py --dump 123 --out /tmp/g123.onnx      # write graph 123 (and its inputs)
    graph_fuzz.py --ort-only --count 1000              # the generator alone (ONNX Runtime only)

Each seed gives one graph (the same seed, the same graph and inputs): movement
and view ops (Slice, Concat, Split, Reshape, Expand, (Un)Squeeze, Transpose,
Gather, Pad, Tile, Identity, Flatten, Shape arithmetic), elementwise ops with
broadcasts, Where and Cast, reductions and Softmax, MatMul and Gemm, and the
chains that wgnn fuses written as exporters write them (attention with its
q/k/v cut from one projection, heads split by Reshape+Transpose, rotary
halves, grouped K/V heads widened, a key/value cache that grows; layer norms
whole and decomposed, RMSNorm, GELU in erf and tanh form, MatMul + bias,
MatMul + residual). Some input dims are symbolic: such a graph runs in one
session at two sizes. Outputs may alias inputs, be read by later nodes, or
appear twice.

wgnn runs in worker processes (a crash is a failure of that seed, the run
goes on); ONNX Runtime runs here, twice: on the model and on the same model
in float64, whose difference measures how much rounding each output carries.
A float output passes where every element is within
    atol + rtol * |ref| + NOISE_FACTOR * max|ref32 - ref64|
(the last term covers sums and products whose rounding depends on their
order); integer and bool outputs must be equal. `Unsupported` from wgnn is
counted, not a failure.

A failure is reduced (nodes removed or cut into new graph inputs, dims
shrunk, while it stays the same kind) and written to --save DIR as NAME.onnx
with NAME.npz (inputs of each run, ONNX Runtime's outputs and their noise).
--replay DIR runs every saved model against its saved outputs; DIR/expected.txt
pins each one as `pass NAME` or `fail NAME: reason` (a known open failure),
as tests/onnx/conformance_expected.txt does; --update rewrites it.

Exit status: 0 when every graph passed (or was unsupported), 1 otherwise.
"""
import argparse
import collections
import json
import math
import os
import pickle
import queue
import random
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
INT64_MAX = 2**63 - 1
INT64_MIN = -2**63
MAX_ELEMENTS = 4096     # per tensor, at the largest size of a symbolic dim
IR_VERSION = 9

ATOL = 1e-4
RTOL = 1e-3
NOISE_FACTOR = 16.0

F32, I64, I32, BOOL = "float32", "int64", "int32", "bool"

# Features the generator leaves out (--avoid): a known failure's trigger, so
# that a long run finds others. The graph of a seed is otherwise the same.
AVOIDABLE = {
    "dup-output": "a value listed twice among the graph's outputs",
    "input-output": "a graph input listed as a graph output",
    "concat-repeat": "a Concat listing one computed value more than once",
}
AVOID = set()
MAX_STEPS = 12          # ops and patterns in a graph, at most (--max-steps)


# ============================================================== dims
# A dim is a linear form c + a0*S0 + a1*S1 over the graph's symbols, as a
# tuple (c, a0, a1): what the graph's shapes are at every size it runs at.

def dc(n):
    return (int(n), 0, 0)


def is_c(d):
    return d[1] == 0 and d[2] == 0


def d_add(x, y):
    return (x[0] + y[0], x[1] + y[1], x[2] + y[2])


def d_scale(x, k):
    return (x[0] * k, x[1] * k, x[2] * k)


def d_mul(x, y):
    if is_c(x):
        return d_scale(y, x[0])
    if is_c(y):
        return d_scale(x, y[0])
    return None


def d_prod(dims):
    out = dc(1)
    for d in dims:
        out = d_mul(out, d)
        if out is None:
            return None
    return out


def d_eval(d, env):
    return d[0] + d[1] * env[0] + d[2] * env[1]


def d_name(d):
    if is_c(d):
        return str(d[0])
    parts = []
    for k, s in ((d[1], "S0"), (d[2], "S1")):
        if k:
            parts.append(s if k == 1 else f"{k}*{s}")
    if d[0]:
        parts.append(str(d[0]))
    return "+".join(parts).replace("+-", "-")


def bcast_dims(a, b):
    """Numpy broadcast of two dim lists; None when incompatible."""
    r = max(len(a), len(b))
    a = [dc(1)] * (r - len(a)) + list(a)
    b = [dc(1)] * (r - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == y:
            out.append(x)
        elif x == dc(1):
            out.append(y)
        elif y == dc(1):
            out.append(x)
        else:
            return None
    return tuple(out)


# ============================================================== generator

# Dims now and then larger than the usual 1..8: past 16, 32, 64 and 256
# (tiles, subgroups, workgroups), odd or prime.
BIG_DIMS = [16, 17, 31, 33, 63, 65, 100, 129, 257]

class V:
    """A value of the graph being generated: its dims, dtype, an interval
    that holds its elements, and whether it is exact (every correct
    implementation gives the same bits: inputs, constants, movement)."""
    __slots__ = ("name", "dtype", "shape", "lo", "hi", "exact", "uses", "kind")

    def __init__(self, name, dtype, shape, lo, hi, exact, kind="node"):
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.lo, self.hi, self.exact, self.kind = float(lo), float(hi), exact, kind
        self.uses = 0

    @property
    def rank(self):
        return len(self.shape)

    @property
    def mag(self):
        return max(abs(self.lo), abs(self.hi))


class Skip(Exception):
    """An op generator found nothing it applies to."""


def _tp():
    from onnx import TensorProto
    return TensorProto


ELEM = {F32: 1, I64: 7, I32: 6, BOOL: 9}


class Gen:
    def __init__(self, seed):
        self.seed = seed
        self.rng = random.Random(seed * 7919 + 17)
        self.np = np.random.default_rng(seed)
        self.nodes = []
        self.inputs = []          # (V, maker(env_index, rng) -> array)
        self.inits = {}           # name -> array
        self.pool = []            # values later nodes may read
        self.forced_outputs = []
        self.names = collections.Counter()
        self.allv = []            # every value made (their use counts are restored on a Skip)
        self.notes = []           # what the graph has (patterns), for the report
        r = self.rng.random()
        self.opset = 13 if r < 0.25 else (17 if r < 0.6 else 18)
        r = self.rng.random()
        self.nsyms = 0 if r < 0.4 else (1 if r < 0.85 else 2)
        self.envs = [(1, 1)]
        if self.nsyms:
            a = self.rng.sample(range(2, 7), 2)
            b = self.rng.sample(range(2, 7), 2) if self.nsyms == 2 else [1, 1]
            self.envs = [(a[0], b[0]), (a[1], b[1])]
            if self.rng.random() < 0.2:
                self.envs.append(self.envs[0])      # back to the first size: its plan again
        elif self.rng.random() < 0.3:
            self.envs = [(1, 1), (1, 1)]            # a second run, new values, same shapes

    # ---------------------------------------------------------- helpers
    def nm(self, prefix):
        self.names[prefix] += 1
        return f"{prefix}{self.names[prefix]}"

    def mx(self, d):
        return max(d_eval(d, e) for e in self.envs)

    def mn(self, d):
        return min(d_eval(d, e) for e in self.envs)

    def numel_max(self, shape):
        n = 1
        for d in shape:
            n *= self.mx(d)
        return n

    def shape_ok(self, shape):
        return all(self.mn(d) >= 1 for d in shape) and self.numel_max(shape) <= MAX_ELEMENTS

    def chance(self, p):
        return self.rng.random() < p

    def pick(self, pred=lambda v: True, dtype=F32, recent=True):
        cands = [v for v in self.pool if (dtype is None or v.dtype == dtype) and pred(v)]
        if not cands:
            raise Skip()
        if recent:
            idx = {id(v): i for i, v in enumerate(self.pool)}
            w = [(idx[id(v)] + 1) ** 2 for v in cands]
            return self.rng.choices(cands, weights=w)[0]
        return self.rng.choice(cands)

    def rand_dims(self, rank, sym_p=0.35, maxel=1024):
        for _ in range(20):
            dims = []
            for _ in range(rank):
                if self.nsyms and self.chance(sym_p):
                    dims.append((0, 1, 0) if self.nsyms == 1 or self.chance(0.5) else (0, 0, 1))
                elif self.chance(0.06):
                    # past a workgroup or a tile: reductions and products in several parts
                    dims.append(dc(self.rng.choice(BIG_DIMS)))
                else:
                    dims.append(dc(self.rng.choice([1, 2, 2, 3, 4, 4, 5, 6, 8])))
            if self.numel_max(dims) <= maxel:
                return tuple(dims)
        return tuple(dc(2) for _ in range(rank))

    def add_pool(self, v):
        self.pool.append(v)
        if not self.allv or self.allv[-1] is not v:
            self.allv.append(v)
        return v

    # ---------------------------------------------------------- values
    def new_input(self, dtype, shape, lo=-2.0, hi=2.0, maker=None, prefix="x"):
        v = V(self.nm(prefix), dtype, shape, lo, hi, True, kind="input")
        if maker is None:
            maker = self._uniform_maker(v)
        self.inputs.append((v, maker))
        return self.add_pool(v)

    def _uniform_maker(self, v):
        def make(env, rng):
            shape = [d_eval(d, env) for d in v.shape]
            if v.dtype == F32:
                return rng.uniform(v.lo, v.hi, shape).astype(np.float32)
            if v.dtype == BOOL:
                return rng.random(shape) < 0.5
            return rng.integers(int(v.lo), int(v.hi) + 1, shape).astype(v.dtype)
        return make

    def const(self, arr, prefix="c", pool=False):
        arr = np.asarray(arr)
        name = self.nm(prefix)
        if self.chance(0.15):
            from onnx import helper, numpy_helper
            self.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr, name)))
        else:
            self.inits[name] = arr
        lo = float(arr.min()) if arr.size and arr.dtype != np.bool_ else 0.0
        hi = float(arr.max()) if arr.size and arr.dtype != np.bool_ else 1.0
        v = V(name, str(arr.dtype), tuple(dc(n) for n in arr.shape), lo, hi, True, kind="const")
        self.allv.append(v)
        if pool:
            self.add_pool(v)
        return v

    def ints(self, values, prefix="i"):
        """An int64 constant (shapes, axes, indices), always an initializer
        or Constant node."""
        return self.const(np.array(values, dtype=np.int64), prefix)

    def scalar(self, x, shape=()):
        return self.const(np.full(shape, x, dtype=np.float32), "s")

    def weight(self, shape, fan_in, as_input_p=0.25, lo=None, hi=None):
        """A weight: an initializer, or sometimes a graph input."""
        s = 1.0 / math.sqrt(max(fan_in, 1))
        lo = -s if lo is None else lo
        hi = s if hi is None else hi
        if self.chance(as_input_p):
            v = self.new_input(F32, tuple(dc(n) for n in shape), lo, hi, prefix="w")
            self.pool.remove(v)
            return v
        return self.const(self.np.uniform(lo, hi, shape).astype(np.float32), "w")

    def emit(self, op, ins, outs, **attrs):
        """A node; ins are V (or "" for an absent optional input), outs are
        (dtype, shape, lo, hi, exact) or V-like tuples; returns the new Vs."""
        from onnx import helper
        names = []
        for v in ins:
            if v is None or v == "":
                names.append("")
            else:
                v.uses += 1
                names.append(v.name)
        res = []
        for spec in outs:
            dtype, shape, lo, hi, exact = spec
            if not all(self.mn(d) >= 1 for d in shape) or self.numel_max(shape) > MAX_ELEMENTS:
                raise Skip()
            lo, hi = float(lo), float(hi)
            if not (math.isfinite(lo) and math.isfinite(hi)):
                lo, hi = -1e30, 1e30
            res.append(V(self.nm("t"), dtype, shape, lo, hi, exact))
        self.nodes.append(helper.make_node(op, names, [v.name for v in res], name=self.nm(op), **attrs))
        for v in res:
            self.add_pool(v)
        return res

    def emit1(self, op, ins, dtype, shape, lo, hi, exact=False, **attrs):
        return self.emit(op, ins, [(dtype, shape, lo, hi, exact)], **attrs)[0]

    def axes_arg(self, axes):
        """Axes as an int64 input (the opsets' later form)."""
        return self.ints(axes, "ax")

    # a float value with a given shape (from the pool when one fits, else new)
    def value_of_shape(self, shape, lo=-2.0, hi=2.0):
        cands = [v for v in self.pool if v.dtype == F32 and v.shape == tuple(shape)]
        if cands and self.chance(0.6):
            return self.rng.choice(cands)
        return self.new_input(F32, shape, lo, hi)

    def broadcast_partner_shape(self, shape):
        """A shape that broadcasts with `shape` to `shape`."""
        r = len(shape)
        k = self.rng.randint(0, r)            # how many trailing dims it has
        out = []
        for d in shape[r - k:]:
            out.append(d if self.chance(0.6) else dc(1))
        return tuple(out)

    # ============================================================ ops
    def op_unary(self):
        op = self.rng.choice(["Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Pow", "Erf", "Abs"])
        if op == "Exp":
            v = self.pick(lambda v: v.hi <= 6 and v.lo >= -60)
        else:
            v = self.pick(lambda v: v.mag <= 1e6)
        lo, hi = v.lo, v.hi
        if op == "Neg":
            return self.emit1(op, [v], F32, v.shape, -hi, -lo, v.exact)
        if op == "Relu":
            return self.emit1(op, [v], F32, v.shape, max(lo, 0), max(hi, 0), v.exact)
        if op == "Abs":
            return self.emit1(op, [v], F32, v.shape, 0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), v.mag, v.exact)
        if op == "Sigmoid":
            return self.emit1(op, [v], F32, v.shape, _sig(lo), _sig(hi))
        if op == "Tanh":
            return self.emit1(op, [v], F32, v.shape, math.tanh(lo), math.tanh(hi))
        if op == "Erf":
            return self.emit1(op, [v], F32, v.shape, math.erf(lo), math.erf(hi))
        if op == "Exp":
            return self.emit1(op, [v], F32, v.shape, math.exp(lo), math.exp(hi))
        if op == "Pow":
            if v.mag > 1e4:
                raise Skip()
            p = self.rng.choice([2.0, 2.0, 3.0]) if v.mag < 100 else 2.0
            e = self.scalar(p)
            m = v.mag ** p
            lo2 = 0.0 if p == 2.0 else -m
            return self.emit1(op, [v, e], F32, v.shape, lo2, m)
        # Sqrt of Abs (plus an offset where the value carries rounding: near 0
        # the square root would magnify it)
        a = self.emit1("Abs", [v], F32, v.shape, 0, v.mag, v.exact)
        if not v.exact or self.chance(0.3):
            a = self.emit1("Add", [a, self.scalar(0.25)], F32, v.shape, 0.25, a.hi + 0.25)
        return self.emit1("Sqrt", [a], F32, v.shape, math.sqrt(a.lo), math.sqrt(a.hi))

    def _partner(self, a, allow_pool=True):
        """Another float operand broadcast-compatible with a."""
        if allow_pool and self.chance(0.45):
            cands = [v for v in self.pool if v.dtype == F32 and v is not a and v.mag <= 1e6
                     and bcast_dims(a.shape, v.shape) is not None
                     and self.shape_ok(bcast_dims(a.shape, v.shape))]
            if cands:
                return self.rng.choice(cands)
        shape = self.broadcast_partner_shape(a.shape)
        r = self.rng.random()
        if r < 0.15:
            shape = ()
        if r < 0.75 or any(not is_c(d) for d in shape):
            if all(is_c(d) for d in shape):
                arr = self.np.uniform(-2, 2, [d[0] for d in shape]).astype(np.float32)
                return self.const(arr, "k")
        v = self.new_input(F32, shape)
        self.pool.remove(v)
        return v

    def op_binary(self):
        op = self.rng.choice(["Add", "Add", "Sub", "Mul", "Mul", "Div"])
        a = self.pick(lambda v: v.mag <= 1e6)
        if op == "Div":
            b = self.safe_divisor(a)
        else:
            b = self._partner(a)
        shape = bcast_dims(a.shape, b.shape)
        if shape is None or not self.shape_ok(shape):
            raise Skip()
        if op == "Add":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif op == "Sub":
            lo, hi = a.lo - b.hi, a.hi - b.lo
        elif op == "Mul":
            ps = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
            lo, hi = min(ps), max(ps)
        else:
            m = a.mag / min(abs(b.lo), abs(b.hi))
            lo, hi = -m, m
        ins = [a, b]
        if op in ("Add", "Mul") and self.chance(0.5):
            ins = [b, a]
        if op == "Div" and self.chance(0.15):
            ins = [self.scalar(1.0), b]                 # a reciprocal, as exporters write it
            m = 1.0 / min(abs(b.lo), abs(b.hi))
            lo, hi = -m, m
            shape = b.shape
        return self.emit1(op, ins, F32, shape, lo, hi)

    def safe_divisor(self, a):
        """A divisor broadcast-compatible with a, bounded away from zero."""
        cands = [v for v in self.pool if v.dtype == F32 and (v.lo >= 0.25 or v.hi <= -0.25)
                 and v.mag < 1e4 and bcast_dims(a.shape, v.shape) is not None
                 and self.shape_ok(bcast_dims(a.shape, v.shape))]
        if cands and self.chance(0.5):
            return self.rng.choice(cands)
        if self.chance(0.5):
            shape = self.broadcast_partner_shape(a.shape)
            if all(is_c(d) for d in shape):
                arr = self.np.uniform(0.5, 2, [d[0] for d in shape]) * self.np.choice([-1, 1], [d[0] for d in shape])
                return self.const(arr.astype(np.float32), "k")
        # Sigmoid(v) + 0.5, in [0.5, 1.5]
        cands = [v for v in self.pool if v.dtype == F32 and bcast_dims(a.shape, v.shape) is not None
                 and self.shape_ok(bcast_dims(a.shape, v.shape))]
        v = self.rng.choice(cands) if cands else a
        s = self.emit1("Sigmoid", [v], F32, v.shape, 0, 1)
        return self.emit1("Add", [s, self.scalar(0.5)], F32, v.shape, 0.5, 1.5)

    def make_bool(self, shape):
        """A bool value broadcastable to shape: an exact comparison or a bool input."""
        r = self.rng.random()
        pshape = self.broadcast_partner_shape(shape)
        if r < 0.3:
            v = self.new_input(BOOL, pshape, 0, 1, prefix="m")
            self.pool.remove(v)
            return v
        cands = [v for v in self.pool if v.exact and v.dtype in (F32, I64, I32)
                 and bcast_dims(shape, v.shape) == tuple(shape)]
        if cands:
            v = self.rng.choice(cands)
        else:
            v = self.new_input(F32, pshape)
            self.pool.remove(v)
        op = self.rng.choice(["Greater", "Less", "Equal"] if v.dtype != F32 else ["Greater", "Less"])
        if v.dtype == F32:
            # a threshold no element equals (inputs are random reals)
            t = self.scalar(round(self.rng.uniform(v.lo, v.hi), 3) + 1e-4)
        else:
            t = self.const(np.array(self.rng.randint(int(v.lo), int(v.hi)), dtype=v.dtype), "k")
        out = self.emit1(op, [v, t], BOOL, v.shape, 0, 1, True)
        self.pool.remove(out)
        return out

    def op_where(self):
        a = self.pick(lambda v: v.mag <= 1e6, dtype=None)
        if a.dtype == BOOL:
            raise Skip()
        if self.chance(0.5):
            b = self.pick(lambda v: v is not a and v.dtype == a.dtype and bcast_dims(a.shape, v.shape) is not None
                          and self.shape_ok(bcast_dims(a.shape, v.shape)), dtype=None)
        else:
            b = self.const(np.array(self.rng.choice([0, 1, -3]), dtype=a.dtype), "k")
        shape = bcast_dims(a.shape, b.shape)
        c = self.make_bool(shape)
        shape = bcast_dims(shape, c.shape)
        if shape is None or not self.shape_ok(shape):
            raise Skip()
        ins = [c, a, b] if self.chance(0.5) else [c, b, a]
        return self.emit1("Where", ins, a.dtype, shape, min(a.lo, b.lo), max(a.hi, b.hi), a.exact and b.exact)

    def op_cast(self):
        TP = _tp()
        v = self.pick(lambda v: v.mag <= 1e6, dtype=None)
        if v.dtype == F32:
            if v.exact and self.chance(0.7):
                to = self.rng.choice([I64, I32])
                out = self.emit1("Cast", [v], to, v.shape, math.trunc(v.lo), math.trunc(v.hi), True,
                                 to=ELEM[to])
                if self.chance(0.7):   # and back, most often
                    return self.emit1("Cast", [out], F32, v.shape, out.lo, out.hi, True, to=TP.FLOAT)
                return out
            return self.emit1("Cast", [v], F32, v.shape, v.lo, v.hi, v.exact, to=TP.FLOAT)
        if v.dtype == BOOL:
            return self.emit1("Cast", [v], F32, v.shape, 0, 1, True, to=TP.FLOAT)
        to = self.rng.choice([F32, F32, I64 if v.dtype == I32 else I32])
        return self.emit1("Cast", [v], to, v.shape, v.lo, v.hi, True, to=ELEM[to])

    def op_int_arith(self):
        v = self.pick(lambda v: v.mag <= 1000, dtype=None)
        if v.dtype not in (I64, I32):
            # integers to work on: a float input cast, or an int input
            if self.chance(0.5):
                v = self.new_input(self.rng.choice([I64, I32]), self.rand_dims(self.rng.randint(1, 3)), -5, 5, prefix="n")
            else:
                raise Skip()
        op = self.rng.choice(["Add", "Sub", "Mul"])
        shape = self.broadcast_partner_shape(v.shape)
        if not all(is_c(d) for d in shape):
            shape = ()
        b = self.const(self.np.integers(-4, 5, [d[0] for d in shape]).astype(v.dtype), "k")
        if op == "Add":
            lo, hi = v.lo - 4, v.hi + 4
        elif op == "Sub":
            lo, hi = v.lo - 4, v.hi + 4
        else:
            lo, hi = -4 * v.mag, 4 * v.mag
        return self.emit1(op, [v, b], v.dtype, v.shape, lo, hi, True)

    # ---------------------------------------------------------- movement
    def op_slice(self):
        v = self.pick(lambda v: v.rank >= 1, dtype=None)
        r = v.rank
        whole = self.chance(0.2)
        naxes = r if whole and self.chance(0.5) else self.rng.randint(1, r)
        axes = sorted(self.rng.sample(range(r), naxes))
        starts, ends, steps = [], [], []
        shape = list(v.shape)
        for ax in axes:
            d = v.shape[ax]
            if whole:
                s, e, st = 0, self.rng.choice([INT64_MAX, d[0]] if is_c(d) else [INT64_MAX]), 1
                if self.chance(0.3):
                    s, e, st = -1, INT64_MIN, -1     # reversed: all of it
            elif is_c(d):
                n = d[0]
                st = self.rng.choice([1, 1, 1, 2, -1, -2]) if n > 1 else 1
                if st > 0:
                    s = self.rng.randint(0, n - 1)
                    e = self.rng.randint(s + 1, n)
                    if self.chance(0.3):
                        s -= n               # negative start
                    if e == n and self.chance(0.4):
                        e = INT64_MAX
                    elif self.chance(0.3):
                        e -= n
                else:
                    s = self.rng.randint(1, n - 1)
                    e = self.rng.randint(-1, s - 1)
                    if e == -1:
                        e = INT64_MIN if self.chance(0.5) else -n - 1
                    elif self.chance(0.3):
                        s -= n
                size = len(range(n)[slice(s, e if e != INT64_MIN else None, st)])
                if size < 1:
                    raise Skip()
                shape[ax] = dc(size)
            else:
                k_max = self.mn(d) - 1
                kind = self.rng.choice(["whole", "from", "to", "last", "rev"])
                st = 1
                if kind == "whole":
                    s, e = 0, INT64_MAX
                elif kind == "rev":
                    s, e, st = -1, INT64_MIN, -1
                elif kind == "from" and k_max >= 1:
                    k = self.rng.randint(1, k_max)
                    s, e = k, INT64_MAX
                    shape[ax] = d_add(d, dc(-k))
                elif kind == "to" and k_max >= 1:
                    k = self.rng.randint(1, k_max)
                    s, e = 0, -k
                    shape[ax] = d_add(d, dc(-k))
                elif kind == "last":
                    k = self.rng.randint(1, k_max + 1)
                    s, e = -k, INT64_MAX
                    shape[ax] = dc(k)
                else:
                    s, e = 0, INT64_MAX
            starts.append(s)
            ends.append(e)
            steps.append(st)
        neg_axes = self.chance(0.3)
        axes_vals = [a - r if neg_axes else a for a in axes]
        ins = [v, self.ints(starts, "st"), self.ints(ends, "en")]
        all_axes = axes == list(range(r)) and not neg_axes
        if not all_axes or self.chance(0.6) or any(st != 1 for st in steps):
            ins.append(self.ints(axes_vals, "ax"))
            if any(st != 1 for st in steps) or self.chance(0.3):
                ins.append(self.ints(steps, "sp"))
        if not self.shape_ok(shape):
            raise Skip()
        return self.emit1("Slice", ins, v.dtype, tuple(shape), v.lo, v.hi, v.exact)

    def op_concat(self):
        v = self.pick(lambda v: v.rank >= 1, dtype=None)
        ax = self.rng.randrange(v.rank)
        def fits(u):
            return (u.dtype == v.dtype and u.rank == v.rank
                    and all(i == ax or u.shape[i] == v.shape[i] for i in range(v.rank)))
        parts = [v]
        r = self.rng.random()
        if r < 0.35:
            cands = [u for u in self.pool if fits(u) and u is not v]
            if cands:
                parts.append(self.rng.choice(cands))
        if len(parts) == 1 and r < 0.6 and v.dtype == F32:
            # a new graph input: a cache that grows along a symbolic dim
            d = self.rng.choice([(0, 1, 0), (0, 0, 1)][: self.nsyms] or [dc(self.rng.randint(1, 4))])
            shape = list(v.shape)
            shape[ax] = d
            past = self.new_input(F32, tuple(shape), prefix="past")
            self.pool.remove(past)
            parts = [past, v]
        if len(parts) == 1:
            parts.append(v if self.chance(0.5) else self.pick(fits, dtype=None))
        if self.chance(0.25):
            parts.append(self.rng.choice(parts))
        if parts[0].kind != "input":
            self.rng.shuffle(parts)
        if "concat-repeat" in AVOID:
            parts = list({id(p): p for p in parts if p.kind == "node"}.values()) + \
                [p for p in parts if p.kind != "node"]
        d = dc(0)
        for p in parts:
            d = d_add(d, p.shape[ax])
        shape = list(v.shape)
        shape[ax] = d
        if not self.shape_ok(shape):
            raise Skip()
        axis = ax - v.rank if self.chance(0.4) else ax
        out = self.emit1("Concat", parts, v.dtype, tuple(shape), min(p.lo for p in parts),
                         max(p.hi for p in parts), all(p.exact for p in parts), axis=axis)
        if parts[0].kind == "input" and parts[0].name.startswith("past") and self.chance(0.7):
            self.forced_outputs.append(out)   # present = Concat(past, new): an output
        return out

    def op_split(self):
        v = self.pick(lambda v: any(is_c(d) and d[0] >= 2 for d in v.shape), dtype=None)
        axs = [i for i, d in enumerate(v.shape) if is_c(d) and d[0] >= 2]
        ax = self.rng.choice(axs)
        n = v.shape[ax][0]
        k = self.rng.randint(2, min(n, 4))
        attrs = {"axis": ax - v.rank if self.chance(0.4) else ax}
        ins = [v]
        if self.opset >= 18 and self.chance(0.4):
            chunk = -(-n // k)
            sizes = [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])
            if len(sizes) < 2:
                raise Skip()
            attrs["num_outputs"] = len(sizes)
        elif n % k == 0 and self.chance(0.4) and self.opset < 18:
            sizes = [n // k] * k
        else:
            cuts = sorted(self.rng.sample(range(1, n), k - 1))
            sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
            ins.append(self.ints(sizes, "sz"))
        outs = []
        for s in sizes:
            shape = list(v.shape)
            shape[ax] = dc(s)
            outs.append((v.dtype, tuple(shape), v.lo, v.hi, v.exact))
        return self.emit("Split", ins, outs, **attrs)[0]

    def op_reshape(self):
        v = self.pick(lambda v: v.rank >= 1, dtype=None)
        r = v.rank
        dims = list(v.shape)
        kind = self.rng.choice(["merge", "split", "flat", "unit", "merge", "split"])
        groups = []     # output dims as lists of input indices (None: an inserted 1)
        if kind == "merge" and r >= 2:
            i = self.rng.randrange(r - 1)
            j = self.rng.randint(i + 1, r - 1)
            groups = [[k] for k in range(i)] + [list(range(i, j + 1))] + [[k] for k in range(j + 1, r)]
        elif kind == "flat":
            groups = [list(range(r))]
            if self.chance(0.3):
                groups = [None] + groups
        elif kind == "unit":
            groups = [[k] for k in range(r)]
            groups.insert(self.rng.randint(0, r), None)
        else:
            groups = [[k] for k in range(r)]
        split_at = None
        if kind == "split":
            cands = [i for i, d in enumerate(dims) if is_c(d) and d[0] >= 4 and _factors(d[0])]
            if not cands:
                raise Skip()
            split_at = self.rng.choice(cands)
        target, out_dims = [], []
        minus_one = False
        for pos, grp in enumerate(groups):
            if grp is None:
                target.append(1)
                out_dims.append(dc(1))
                continue
            if split_at is not None and grp == [split_at]:
                n = dims[split_at][0]
                a = self.rng.choice(_factors(n))
                for part in (a, n // a):
                    if not minus_one and self.chance(0.3):
                        target.append(-1)
                        minus_one = True
                    else:
                        target.append(part)
                    out_dims.append(dc(part))
                continue
            d = d_prod([dims[k] for k in grp])
            if d is None:
                raise Skip()
            same_pos = len(grp) == 1 and grp[0] == len(out_dims)
            choices = []
            if is_c(d):
                choices.append(d[0])
            if same_pos:
                choices.append(0)
            if not minus_one:
                choices.append(-1)
            if not choices:
                raise Skip()
            t = self.rng.choice(choices)
            minus_one |= t == -1
            target.append(t)
            out_dims.append(d)
        if not self.shape_ok(out_dims):
            raise Skip()
        shp = self.ints(target, "shape")
        return self.emit1("Reshape", [v, shp], v.dtype, tuple(out_dims), v.lo, v.hi, v.exact)

    def op_shape_reshape(self):
        """Reshape to a shape computed from Shape: Shape -> Gather -> Unsqueeze
        -> Concat(..., [-1]) (or Shape(start, end) at opset 15+)."""
        v = self.pick(lambda v: v.rank >= 2, dtype=None)
        k = self.rng.randint(1, v.rank - 1)
        rest = d_prod(v.shape[k:])
        if rest is None:
            raise Skip()
        shp = self.emit1("Shape", [v], I64, (dc(v.rank),), 0, 1e4, True)
        self.pool.remove(shp)
        if self.opset >= 15 and self.chance(0.4):
            head = self.emit1("Shape", [v], I64, (dc(k),), 0, 1e4, True, end=k)
            self.pool.remove(head)
            parts = [head]
        else:
            parts = []
            for i in range(k):
                g = self.emit1("Gather", [shp, self.const(np.array(i, dtype=np.int64), "i")], I64, (), 0, 1e4, True, axis=0)
                self.pool.remove(g)
                u = self.emit1("Unsqueeze", [g, self.axes_arg([0])], I64, (dc(1),), 0, 1e4, True)
                self.pool.remove(u)
                parts.append(u)
        parts.append(self.ints([-1], "m1"))
        cat = self.emit1("Concat", parts, I64, (dc(k + 1),), -1, 1e4, True, axis=0)
        self.pool.remove(cat)
        return self.emit1("Reshape", [v, cat], v.dtype, tuple(v.shape[:k]) + (rest,), v.lo, v.hi, v.exact)

    def op_constant_of_shape(self):
        v = self.pick(lambda v: v.rank >= 1, dtype=None)
        from onnx import helper
        shp = self.emit1("Shape", [v], I64, (dc(v.rank),), 0, 1e4, True)
        self.pool.remove(shp)
        c = self.rng.choice([0.0, 1.0, -2.5])
        out = self.emit1("ConstantOfShape", [shp], F32, v.shape, c, c, True,
                         value=helper.make_tensor("value", _tp().FLOAT, [1], [c]))
        return out

    def op_expand(self):
        v = self.pick(lambda v: True, dtype=None)
        r = v.rank
        extra = self.rng.choice([0, 0, 1, 2])
        target, out = [], []
        for _ in range(extra):
            n = self.rng.choice([1, 2, 3])
            target.append(n)
            out.append(dc(n))
        for d in v.shape:
            if d == dc(1) and self.chance(0.6):
                n = self.rng.choice([2, 3, 4])
                target.append(n)
                out.append(dc(n))
            elif is_c(d) and self.chance(0.5):
                target.append(d[0])
                out.append(d)
            else:
                target.append(1)
                out.append(d)
        if extra == 0 and r >= 2 and self.chance(0.2):
            # a shorter shape: broadcast from the right
            k = self.rng.randint(1, r - 1)
            target = target[-k:]
            out = list(v.shape[:r - k]) + out[-k:]
        if not self.shape_ok(out):
            raise Skip()
        return self.emit1("Expand", [v, self.ints(target, "shape")], v.dtype, tuple(out), v.lo, v.hi, v.exact)

    def op_unsqueeze(self):
        v = self.pick(lambda v: v.rank <= 4, dtype=None)
        k = self.rng.choice([1, 1, 2])
        ro = v.rank + k
        axes = sorted(self.rng.sample(range(ro), k))
        out = list(v.shape)
        for a in axes:
            out.insert(a, dc(1))
        vals = [a - ro if self.chance(0.3) else a for a in axes]
        return self.emit1("Unsqueeze", [v, self.axes_arg(vals)], v.dtype, tuple(out), v.lo, v.hi, v.exact)

    def op_squeeze(self):
        v = self.pick(lambda v: dc(1) in v.shape, dtype=None)
        ones = [i for i, d in enumerate(v.shape) if d == dc(1)]
        ins = [v]
        if self.chance(0.25) and all(self.mn(d) > 1 or d == dc(1) for d in v.shape):
            axes = ones
        else:
            axes = sorted(self.rng.sample(ones, self.rng.randint(1, len(ones))))
            ins.append(self.axes_arg([a - v.rank if self.chance(0.3) else a for a in axes]))
        out = [d for i, d in enumerate(v.shape) if i not in axes]
        return self.emit1("Squeeze", ins, v.dtype, tuple(out), v.lo, v.hi, v.exact)

    def op_transpose(self):
        v = self.pick(lambda v: v.rank >= 2, dtype=None)
        perm = list(range(v.rank))
        while perm == list(range(v.rank)):
            self.rng.shuffle(perm)
        attrs = {"perm": perm}
        if perm == list(reversed(range(v.rank))) and self.chance(0.5):
            attrs = {}
        return self.emit1("Transpose", [v], v.dtype, tuple(v.shape[p] for p in perm), v.lo, v.hi, v.exact, **attrs)

    def op_gather(self):
        v = self.pick(lambda v: v.rank >= 1, dtype=None)
        ax = self.rng.randrange(v.rank)
        n = self.mn(v.shape[ax])
        ishape = self.rng.choice([(), (1,), (2,), (3,), (2, 2)])
        idt = np.int64 if self.chance(0.8) else np.int32
        if self.chance(0.2) and n >= 1:
            d = v.shape[ax]
            idx = self.new_input(str(np.dtype(idt)), tuple(dc(k) for k in ishape), 0, 0, prefix="idx",
                                 maker=lambda env, rng, d=d, ishape=ishape, idt=idt:
                                 rng.integers(-d_eval(d, env), d_eval(d, env), ishape).astype(idt))
            self.pool.remove(idx)
        else:
            idx = self.const(self.np.integers(-n, n, ishape).astype(idt), "g")
        out = list(v.shape[:ax]) + [dc(k) for k in ishape] + list(v.shape[ax + 1:])
        if not self.shape_ok(out):
            raise Skip()
        axis = ax - v.rank if self.chance(0.3) else ax
        return self.emit1("Gather", [v, idx], v.dtype, tuple(out), v.lo, v.hi, v.exact, axis=axis)

    def op_pad(self):
        v = self.pick(lambda v: v.rank >= 1 and v.dtype != BOOL, dtype=None)
        r = v.rank
        mode = self.rng.choice(["constant", "constant", "reflect", "edge"])
        pads = [0] * (2 * r)
        axes = sorted(self.rng.sample(range(r), self.rng.randint(1, r)))
        out = list(v.shape)
        for a in axes:
            d = v.shape[a]
            lim = 2
            if mode == "reflect":
                lim = min(2, self.mn(d) - 1)
            if lim <= 0:
                continue
            b, e = self.rng.randint(0, lim), self.rng.randint(0, lim)
            if mode == "constant" and is_c(d) and d[0] >= 3 and self.chance(0.15):
                b = -1                      # a negative pad crops
            pads[a], pads[a + r] = b, e
            out[a] = d_add(d, dc(b + e))
        if not self.shape_ok(out):
            raise Skip()
        ins = [v]
        use_axes = self.opset >= 18 and self.chance(0.4)
        if use_axes:
            ins.append(self.ints([pads[a] for a in axes] + [pads[a + r] for a in axes], "pads"))
        else:
            ins.append(self.ints(pads, "pads"))
        lo, hi = v.lo, v.hi
        if mode == "constant" and self.chance(0.6):
            c = self.rng.choice([0, 1, -1])
            ins.append(self.const(np.array(c, dtype=v.dtype), "pv"))
            lo, hi = min(lo, c), max(hi, c)
        else:
            lo, hi = min(lo, 0), max(hi, 0)
        if use_axes:
            if len(ins) == 2:
                ins.append("")
            ins.append(self.ints(axes, "ax"))
        return self.emit1("Pad", ins, v.dtype, tuple(out), lo, hi, v.exact, mode=mode)

    def op_tile(self):
        v = self.pick(lambda v: v.rank >= 1, dtype=None)
        reps = [self.rng.choice([1, 1, 2, 3]) for _ in range(v.rank)]
        out = [d_scale(d, k) for d, k in zip(v.shape, reps)]
        if not self.shape_ok(out):
            raise Skip()
        return self.emit1("Tile", [v, self.ints(reps, "rep")], v.dtype, tuple(out), v.lo, v.hi, v.exact)

    def op_identity(self):
        v = self.pick(lambda v: True, dtype=None)
        return self.emit1("Identity", [v], v.dtype, v.shape, v.lo, v.hi, v.exact)

    def op_flatten(self):
        v = self.pick(lambda v: v.rank >= 1, dtype=None)
        a = self.rng.randint(0, v.rank)
        left, right = d_prod(v.shape[:a]), d_prod(v.shape[a:])
        if left is None or right is None:
            raise Skip()
        return self.emit1("Flatten", [v], v.dtype, (left, right), v.lo, v.hi, v.exact, axis=a)

    # ---------------------------------------------------------- reductions
    def reduce(self, op, v, axes, keepdims, lo, hi):
        r = v.rank
        out = [dc(1) if i in axes else d for i, d in enumerate(v.shape)] if keepdims else \
              [d for i, d in enumerate(v.shape) if i not in axes]
        vals = [a - r if self.chance(0.3) else a for a in axes]
        ins = [v]
        attrs = {"keepdims": int(keepdims)}
        if op == "ReduceSum" or self.opset >= 18:
            ins.append(self.axes_arg(vals))
        else:
            attrs["axes"] = vals
        return self.emit1(op, ins, F32, tuple(out), lo, hi, op == "ReduceMax" and v.exact, **attrs)

    def op_reduce(self):
        op = self.rng.choice(["ReduceMean", "ReduceSum", "ReduceMax"])
        v = self.pick(lambda v: v.rank >= 1 and v.mag < 1e5)
        axes = sorted(self.rng.sample(range(v.rank), self.rng.randint(1, v.rank)))
        keep = self.chance(0.5)
        if op == "ReduceSum":
            k = 1
            for a in axes:
                k *= self.mx(v.shape[a])
            lo, hi = min(v.lo * k, v.lo), max(v.hi * k, v.hi)
        else:
            lo, hi = v.lo, v.hi
        if not keep and self.chance(0.15) and op != "ReduceSum" and self.opset < 18:
            # no axes: all of them
            out = self.emit1(op, [v], F32, (), lo, hi, op == "ReduceMax" and v.exact, keepdims=0)
            return out
        return self.reduce(op, v, axes, keep, lo, hi)

    def op_softmax(self):
        v = self.pick(lambda v: v.rank >= 1)
        ax = self.rng.randrange(v.rank)
        attrs = {}
        if ax != v.rank - 1 or self.chance(0.5):
            attrs["axis"] = ax - v.rank if self.chance(0.5) else ax
        return self.emit1("Softmax", [v], F32, v.shape, 0, 1, **attrs)

    # ---------------------------------------------------------- products
    def matmul_weight_for(self, x, n_out=None):
        k = x.shape[-1]
        if not is_c(k):
            raise Skip()
        n = n_out or self.rng.choice([1, 2, 3, 4, 6, 8, 16] + ([self.rng.choice(BIG_DIMS)] if self.chance(0.1) else []))
        return self.weight((k[0], n), k[0]), n

    def op_matmul(self):
        kind = self.rng.choice(["weight", "weight", "batched", "pool", "vec"])
        if kind == "weight":
            a = self.pick(lambda v: v.rank >= 1 and is_c(v.shape[-1]) and v.mag < 1e4)
            w, n = self.matmul_weight_for(a)
            out = tuple(a.shape[:-1]) + (dc(n),)
            k = a.shape[-1][0]
            m = k * a.mag * w.mag
        elif kind == "batched":
            a = self.pick(lambda v: v.rank >= 3 and is_c(v.shape[-1]) and v.mag < 1e4)
            k = a.shape[-1][0]
            n = self.rng.choice([1, 2, 4, 5, 8])
            batch = [d if self.chance(0.7) or not is_c(d) else dc(1) for d in a.shape[:-2]]
            if self.chance(0.3):
                batch = batch[1:]
            if not all(is_c(d) for d in batch):
                w = self.new_input(F32, tuple(batch) + (dc(k), dc(n)), -0.5, 0.5, prefix="b")
                self.pool.remove(w)
            else:
                w = self.weight(tuple(d[0] for d in batch) + (k, n), k)
            out = bcast_dims(a.shape[:-2], w.shape[:-2])
            if out is None:
                raise Skip()
            out = out + (a.shape[-2], dc(n))
            m = k * a.mag * w.mag
        elif kind == "pool":
            # two computed values: x @ y^T style (a symbolic inner dim is fine)
            a = self.pick(lambda v: v.rank >= 2 and v.mag < 1e4)
            cands = [u for u in self.pool if u.dtype == F32 and u.rank >= 2 and u.mag < 1e4
                     and u.shape[-2] == a.shape[-1] and bcast_dims(a.shape[:-2], u.shape[:-2]) is not None]
            if not cands:
                raise Skip()
            w = self.rng.choice(cands)
            out = bcast_dims(a.shape[:-2], w.shape[:-2]) + (a.shape[-2], w.shape[-1])
            m = self.mx(a.shape[-1]) * a.mag * w.mag
        else:
            # a vector on one side
            a = self.pick(lambda v: v.rank >= 2 and is_c(v.shape[-1]) and v.mag < 1e4)
            k = a.shape[-1][0]
            w = self.weight((k,), k)
            out = tuple(a.shape[:-1])
            m = k * a.mag * w.mag
            if self.chance(0.3) and a.rank == 2 and is_c(a.shape[0]):
                # vector first: [K0] @ [K0, N]
                vec = self.weight((a.shape[0][0],), a.shape[0][0])
                return self.emit1("MatMul", [vec, a], F32, (a.shape[1],), -m, m)
        if not self.shape_ok(out):
            raise Skip()
        return self.emit1("MatMul", [a, w], F32, out, -m, m)

    def op_gemm(self):
        a = self.pick(lambda v: v.rank == 2 and all(is_c(d) for d in v.shape) and v.mag < 1e4)
        trans_a = self.chance(0.25)
        m_, k = a.shape[0][0], a.shape[1][0]
        if trans_a:
            m_, k = k, m_
        n = self.rng.choice([1, 2, 3, 4, 8] + ([self.rng.choice(BIG_DIMS)] if self.chance(0.1) else []))
        if m_ * n > MAX_ELEMENTS:
            raise Skip()
        trans_b = self.chance(0.5)
        w = self.weight((n, k) if trans_b else (k, n), k)
        ins = [a, w]
        alpha = self.rng.choice([1.0, 1.0, 0.5, 2.0])
        beta = self.rng.choice([1.0, 1.0, 0.5])
        attrs = {}
        if trans_a:
            attrs["transA"] = 1
        if trans_b:
            attrs["transB"] = 1
        if alpha != 1.0:
            attrs["alpha"] = alpha
        bound = abs(alpha) * k * a.mag * w.mag
        if self.chance(0.8):
            cshape = self.rng.choice([(n,), (1, n), (m_, n), (m_, 1), ()])
            ins.append(self.const(self.np.uniform(-1, 1, cshape).astype(np.float32), "bias"))
            if beta != 1.0:
                attrs["beta"] = beta
            bound += abs(beta)
        return self.emit1("Gemm", ins, F32, (dc(m_), dc(n)), -bound, bound, **attrs)

    # ---------------------------------------------------------- fused patterns
    def x3d(self, e_max=32):
        """A [B, S, E] float value (from the pool, else a new input)."""
        cands = [v for v in self.pool if v.dtype == F32 and v.rank == 3 and is_c(v.shape[2])
                 and 2 <= v.shape[2][0] <= e_max and v.mag < 100]
        if cands and self.chance(0.6):
            return self.rng.choice(cands)
        s = self.rng.choice([(0, 1, 0)] * 2 + [dc(self.rng.randint(1, 6))]) if self.nsyms else dc(self.rng.randint(1, 6))
        b = dc(self.rng.choice([1, 1, 2]))
        return self.new_input(F32, (b, s, dc(self.rng.choice([4, 6, 8, 12, 16]))), -1, 1)

    def linear(self, x, n, bias_p=0.8):
        """MatMul(x, W) + bias, as exporters write a linear layer."""
        k = x.shape[-1][0]
        w = self.weight((k, n), k)
        m = k * x.mag * w.mag
        y = self.emit1("MatMul", [x, w], F32, tuple(x.shape[:-1]) + (dc(n),), -m, m)
        if self.chance(bias_p):
            b = self.const(self.np.uniform(-0.5, 0.5, (n,)).astype(np.float32), "bias")
            self.pool.remove(y)
            y = self.emit1("Add", [y, b] if self.chance(0.7) else [b, y], F32, y.shape, y.lo - 0.5, y.hi + 0.5)
        return y

    def pat_linear(self):
        self.notes.append("linear")
        x = self.pick(lambda v: v.rank >= 2 and is_c(v.shape[-1]) and v.mag < 1e4)
        y = self.linear(x, self.rng.choice([2, 4, 8, 16]), bias_p=1.0)
        return y

    def pat_residual(self):
        self.notes.append("matmul+residual")
        x = self.pick(lambda v: v.rank >= 2 and is_c(v.shape[-1]) and v.mag < 1e4)
        y = self.linear(x, x.shape[-1][0], bias_p=0.5)
        self.pool.remove(y)
        return self.emit1("Add", [y, x] if self.chance(0.5) else [x, y], F32, x.shape, y.lo + x.lo, y.hi + x.hi)

    def pat_matmul_scale(self):
        """MatMul of a transposed operand, times a scalar (fuse_matmul_scale)."""
        self.notes.append("matmul_scale")
        a = self.pick(lambda v: v.rank >= 2 and is_c(v.shape[-1]) and v.mag < 1e4)
        k = a.shape[-1][0]
        n = self.rng.choice([2, 3, 4])
        w = self.weight((n, k), k)
        wt = self.emit1("Transpose", [w], F32, (dc(k), dc(n)), w.lo, w.hi, True, perm=[1, 0])
        self.pool.remove(wt)
        m = k * a.mag * w.mag
        y = self.emit1("MatMul", [a, wt], F32, tuple(a.shape[:-1]) + (dc(n),), -m, m)
        self.pool.remove(y)
        s = self.rng.choice([0.5, 0.125, 2.0])
        return self.emit1("Mul", [y, self.scalar(s)], F32, y.shape, -m * s, m * s)

    def pat_gelu(self):
        self.notes.append("gelu")
        x = self.pick(lambda v: v.mag < 1e3)
        if self.chance(0.5):
            x = self.pat_linear_from(x)
        sh = x.shape
        m = x.mag
        if self.chance(0.6):
            # erf form: x * 0.5 * (1 + erf(x / sqrt2)), as torch exports it
            d = self.emit1("Div", [x, self.scalar(1.4142135381698608)], F32, sh, -m, m)
            e = self.emit1("Erf", [d], F32, sh, -1, 1)
            a = self.emit1("Add", [e, self.scalar(1.0)], F32, sh, 0, 2)
            y = self.emit1("Mul", [x, a], F32, sh, -2 * m, 2 * m)
            o = self.emit1("Mul", [y, self.scalar(0.5)], F32, sh, -m, m)
            for v in (d, e, a, y):
                self.pool.remove(v)
            return o
        # tanh form
        p = self.emit1("Pow", [x, self.scalar(3.0)], F32, sh, -m ** 3, m ** 3)
        c = self.emit1("Mul", [p, self.scalar(0.044714998453855515)], F32, sh, -m ** 3, m ** 3)
        s = self.emit1("Add", [x, c], F32, sh, -2 * m ** 3 - m, 2 * m ** 3 + m)
        k = self.emit1("Mul", [s, self.scalar(0.7978845834732056)], F32, sh, -2 * m ** 3 - m, 2 * m ** 3 + m)
        t = self.emit1("Tanh", [k], F32, sh, -1, 1)
        a = self.emit1("Add", [t, self.scalar(1.0)], F32, sh, 0, 2)
        if self.chance(0.5):
            h = self.emit1("Mul", [x, self.scalar(0.5)], F32, sh, -m, m)
            o = self.emit1("Mul", [h, a], F32, sh, -2 * m, 2 * m)
            inner = (p, c, s, k, t, a, h)
        else:
            y = self.emit1("Mul", [x, a], F32, sh, -2 * m, 2 * m)
            o = self.emit1("Mul", [y, self.scalar(0.5)], F32, sh, -m, m)
            inner = (p, c, s, k, t, a, y)
        for v in inner:
            self.pool.remove(v)
        return o

    def pat_linear_from(self, x):
        if x.rank >= 2 and is_c(x.shape[-1]) and x.shape[-1][0] <= 64:
            y = self.linear(x, self.rng.choice([4, 8, 16]))
            return y
        return x

    def pat_mlp(self):
        self.notes.append("mlp")
        x = self.pick(lambda v: v.rank >= 2 and is_c(v.shape[-1]) and v.shape[-1][0] <= 32 and v.mag < 100)
        e = x.shape[-1][0]
        h = self.linear(x, self.rng.choice([2 * e, 4 * e]) if 4 * e <= 64 else e)
        self.pool.remove(h)
        self.pool.append(h)
        g = self.pat_gelu_on(h)
        y = self.linear(g, e)
        self.pool.remove(y)
        return self.emit1("Add", [x, y], F32, x.shape, x.lo + y.lo, x.hi + y.hi)

    def pat_gelu_on(self, x):
        if self.chance(0.7):
            return self.pat_gelu_erf_only(x)
        return self.emit1("Relu", [x], F32, x.shape, 0, x.hi)

    def pat_gelu_erf_only(self, x):
        sh, m = x.shape, x.mag
        d = self.emit1("Div", [x, self.scalar(1.4142135381698608)], F32, sh, -m, m)
        e = self.emit1("Erf", [d], F32, sh, -1, 1)
        a = self.emit1("Add", [e, self.scalar(1.0)], F32, sh, 0, 2)
        y = self.emit1("Mul", [x, a], F32, sh, -2 * m, 2 * m)
        o = self.emit1("Mul", [y, self.scalar(0.5)], F32, sh, -m, m)
        for v in (d, e, a, y):
            self.pool.remove(v)
        return o

    def norm_input(self):
        x = self.pick(lambda v: v.rank >= 1 and is_c(v.shape[-1]) and v.shape[-1][0] >= 2 and v.mag < 1e3)
        if self.chance(0.3):
            # an Add right before the norm (fuse_add_layer_norm)
            y = self._partner(x)
            sh = bcast_dims(x.shape, y.shape)
            if sh == x.shape:
                x = self.emit1("Add", [x, y], F32, sh, x.lo + y.lo, x.hi + y.hi)
                self.pool.remove(x)
        return x

    def pat_layernorm(self):
        self.notes.append("LayerNormalization")
        if self.opset < 17:
            return self.pat_layernorm_decomposed()
        x = self.norm_input()
        naxes = 1
        if x.rank >= 2 and is_c(x.shape[-2]) and self.chance(0.2):
            naxes = 2
        nshape = tuple(d[0] for d in x.shape[x.rank - naxes:])
        g = self.weight(nshape, 1, lo=0.5, hi=1.5)
        ins = [x, g]
        if self.chance(0.8):
            ins.append(self.weight(nshape, 1, lo=-0.5, hi=0.5))
        attrs = {"epsilon": self.rng.choice([1e-5, 1e-5, 1e-6, 1e-3])}   # not smaller: pat_layernorm_decomposed
        if naxes == 2 or self.chance(0.3):
            attrs["axis"] = -naxes if naxes == 2 or self.chance(0.5) else x.rank - 1
        n = math.prod(nshape)
        m = 1.5 * math.sqrt(n) + 0.5
        return self.emit1("LayerNormalization", ins, F32, x.shape, -m, m, **attrs)

    def pat_layernorm_decomposed(self):
        self.notes.append("layernorm-decomposed")
        x = self.norm_input()
        sh = x.shape
        red = tuple(sh[:-1]) + (dc(1),)
        m = x.mag
        mean = self.reduce("ReduceMean", x, [x.rank - 1], True, x.lo, x.hi)
        d = self.emit1("Sub", [x, mean], F32, sh, -2 * m, 2 * m)
        p = self.emit1("Pow", [d, self.scalar(2.0)], F32, sh, 0, 4 * m * m)
        var = self.reduce("ReduceMean", p, [x.rank - 1], True, 0, 4 * m * m)
        # eps 1e-5 or 1e-6: a smaller one (BERT's 1e-12) turns the rounding of
        # values equal in exact arithmetic (x / s * s) into differences of
        # order 1, which no tolerance can tell from a bug
        ve = self.emit1("Add", [var, self.scalar(self.rng.choice([1e-5, 1e-6, 1e-6]))], F32, red, 0, 4 * m * m + 1)
        s = self.emit1("Sqrt", [ve], F32, red, 0, 2 * m + 1)
        n = sh[-1][0]
        bound = math.sqrt(n)
        nrm = self.emit1("Div", [d, s], F32, sh, -bound, bound)
        g = self.weight((n,), 1, lo=0.5, hi=1.5)
        y = self.emit1("Mul", [nrm, g], F32, sh, -1.5 * bound, 1.5 * bound)
        b = self.weight((n,), 1, lo=-0.5, hi=0.5)
        o = self.emit1("Add", [y, b], F32, sh, -1.5 * bound - 0.5, 1.5 * bound + 0.5)
        for v in (mean, d, p, var, ve, s, nrm, y):
            self.pool.remove(v)
        return o

    def pat_rmsnorm(self):
        self.notes.append("rmsnorm")
        x = self.norm_input()
        sh = x.shape
        red = tuple(sh[:-1]) + (dc(1),)
        m = x.mag
        if self.chance(0.5):
            sq = self.emit1("Mul", [x, x], F32, sh, 0, m * m)
        else:
            sq = self.emit1("Pow", [x, self.scalar(2.0)], F32, sh, 0, m * m)
        ms = self.reduce("ReduceMean", sq, [x.rank - 1], True, 0, m * m)
        a = self.emit1("Add", [ms, self.scalar(self.rng.choice([1e-5, 1e-6]))], F32, red, 1e-6, m * m + 1)
        r = self.emit1("Sqrt", [a], F32, red, 1e-3, m + 1)
        if self.chance(0.5):
            inv = self.emit1("Div", [self.scalar(1.0), r], F32, red, 0, 1e3)
        else:
            inv = self.emit1("Reciprocal", [r], F32, red, 0, 1e3)
        n = sh[-1][0]
        bound = math.sqrt(n)
        y = self.emit1("Mul", [x, inv], F32, sh, -bound, bound)
        w = self.weight((n,), 1, lo=0.5, hi=1.5)
        o = self.emit1("Mul", [y, w] if self.chance(0.7) else [w, y], F32, sh, -1.5 * bound, 1.5 * bound)
        for v in (sq, ms, a, r, inv, y):
            self.pool.remove(v)
        return o

    def heads(self, t, h, d, b, s):
        """[B, S, h*d] -> [B, S, h, d] by Reshape."""
        r = self.rng.random()
        if r < 0.4:
            target = [0, 0, h, d]
        elif r < 0.7 and is_c(b):
            target = [b[0], -1, h, d]
        else:
            target = [0, -1, h, d] if not is_c(s) or self.chance(0.5) else [0, s[0], h, d]
        out = self.emit1("Reshape", [t, self.ints(target, "shape")], F32, (b, s, dc(h), dc(d)), t.lo, t.hi, t.exact)
        self.pool.remove(out)
        return out

    def tr(self, t, perm):
        out = self.emit1("Transpose", [t], F32, tuple(t.shape[p] for p in perm), t.lo, t.hi, t.exact, perm=perm)
        self.pool.remove(out)
        return out

    def rotary(self, t, s):
        """t [B, h, S, D]: t * cos + Concat(-t2, t1) * sin (t1, t2 its halves)."""
        dd = t.shape[3][0]
        half = dd // 2
        b, h = t.shape[0], t.shape[1]
        ax = self.rng.choice([[-1], [3]])
        hs = (b, h, s, dc(half))
        x1 = self.emit1("Slice", [t, self.ints([0], "st"), self.ints([half], "en"), self.ints(ax, "ax")],
                        F32, hs, t.lo, t.hi, t.exact)
        x2 = self.emit1("Slice", [t, self.ints([half], "st"), self.ints([self.rng.choice([INT64_MAX, dd])], "en"),
                                  self.ints(ax, "ax")], F32, hs, t.lo, t.hi, t.exact)
        n2 = self.emit1("Neg", [x2], F32, hs, -t.hi, -t.lo, t.exact)
        rot = self.emit1("Concat", [n2, x1], F32, t.shape, -t.mag, t.mag, t.exact, axis=-1)
        if is_c(s) and self.chance(0.6):
            cos = self.const(np.cos(self.np.uniform(0, 6, (s[0], dd))).astype(np.float32), "cos")
            sin = self.const(np.sin(self.np.uniform(0, 6, (s[0], dd))).astype(np.float32), "sin")
        else:
            shp = (s, dc(dd)) if self.chance(0.5) else (dc(1), dc(1), s, dc(dd))
            cos = self.new_input(F32, shp, -1, 1, prefix="cos")
            sin = self.new_input(F32, shp, -1, 1, prefix="sin")
            self.pool.remove(cos)
            self.pool.remove(sin)
        a = self.emit1("Mul", [t, cos], F32, t.shape, -t.mag, t.mag)
        c = self.emit1("Mul", [rot, sin], F32, t.shape, -t.mag, t.mag)
        o = self.emit1("Add", [a, c], F32, t.shape, -2 * t.mag, 2 * t.mag)
        for v in (x1, x2, n2, rot, a, c, o):
            self.pool.remove(v)
        return o

    def pat_attention(self):
        self.notes.append("attention")
        x = self.x3d()
        b, s, e0 = x.shape
        h = self.rng.choice([1, 2, 2, 3, 4])
        dd = self.rng.choice([2, 4, 4, 6, 8])
        if h * dd > 32:
            dd = 4
        hkv = h
        if h >= 2 and self.chance(0.35):
            hkv = self.rng.choice([k for k in range(1, h) if h % k == 0])
        e, ekv = h * dd, hkv * dd
        cache = self.chance(0.4)
        rot = dd % 2 == 0 and self.chance(0.35)
        notes = [f"h={h}", f"hkv={hkv}", f"d={dd}"] + (["cache"] if cache else []) + (["rotary"] if rot else [])
        self.notes.append("attention(" + ",".join(notes) + ")")
        # q, k, v from one projection (cut by Split or Slice) or three
        if self.chance(0.65):
            qkv = self.linear(x, e + 2 * ekv)
            self.pool.remove(qkv)
            sizes = [e, ekv, ekv]
            if self.chance(0.5):
                shapes = [(b, s, dc(n)) for n in sizes]
                attrs = {"axis": self.rng.choice([-1, 2])}
                ins = [qkv]
                if self.opset >= 18 and hkv == h and self.chance(0.5):
                    attrs["num_outputs"] = 3
                elif hkv == h and self.opset < 18 and self.chance(0.5):
                    pass
                else:
                    ins.append(self.ints(sizes, "sz"))
                q, k, v = self.emit("Split", ins, [(F32, sh, qkv.lo, qkv.hi, False) for sh in shapes], **attrs)
            else:
                outs = []
                bounds = [0, e, e + ekv, e + 2 * ekv]
                for i in range(3):
                    end = bounds[i + 1] if i < 2 or self.chance(0.5) else INT64_MAX
                    outs.append(self.emit1("Slice", [qkv, self.ints([bounds[i]], "st"), self.ints([end], "en"),
                                                     self.ints([self.rng.choice([-1, 2])], "ax")],
                                           F32, (b, s, dc(sizes[i])), qkv.lo, qkv.hi))
                q, k, v = outs
            for t in (q, k, v):
                self.pool.remove(t)
        else:
            q = self.linear(x, e)
            k = self.linear(x, ekv)
            v = self.linear(x, ekv)
            for t in (q, k, v):
                self.pool.remove(t)
        q4 = self.tr(self.heads(q, h, dd, b, s), [0, 2, 1, 3])          # [B, H, S, D]
        v4 = self.tr(self.heads(v, hkv, dd, b, s), [0, 2, 1, 3])
        k_direct = not (cache or rot or hkv != h) and self.chance(0.5)
        kh = self.heads(k, hkv, dd, b, s)
        if k_direct:
            kt = self.tr(kh, [0, 2, 3, 1])                               # [B, H, D, S]
            t_len = s
        else:
            k4 = self.tr(kh, [0, 2, 1, 3])
            if rot:
                q4 = self.rotary(q4, s)
                k4 = self.rotary(k4, s)
            t_len = s
            if cache:
                p = (0, 1, 0) if self.nsyms and self.chance(0.7) else dc(self.rng.randint(1, 5))
                if self.nsyms == 2 and self.chance(0.5):
                    p = (0, 0, 1)
                pk = self.new_input(F32, (b, dc(hkv), p, dc(dd)), -1, 1, prefix="past_key")
                pv = self.new_input(F32, (b, dc(hkv), p, dc(dd)), -1, 1, prefix="past_value")
                self.pool.remove(pk)
                self.pool.remove(pv)
                t_len = d_add(p, s)
                k4 = self.emit1("Concat", [pk, k4], F32, (b, dc(hkv), t_len, dc(dd)), min(pk.lo, k4.lo),
                                max(pk.hi, k4.hi), axis=2)
                v4 = self.emit1("Concat", [pv, v4], F32, (b, dc(hkv), t_len, dc(dd)), min(pv.lo, v4.lo),
                                max(pv.hi, v4.hi), axis=2)
                self.forced_outputs += [k4, v4]
                self.pool.remove(k4)
                self.pool.remove(v4)
            if hkv != h:
                rep = h // hkv
                def widen(t):
                    u = self.emit1("Unsqueeze", [t, self.axes_arg([2])], F32, (b, dc(hkv), dc(1), t_len, dc(dd)),
                                   t.lo, t.hi, t.exact)
                    tgt = [b[0] if is_c(b) else 1, hkv, rep, t_len[0] if is_c(t_len) else 1, dd]
                    ex = self.emit1("Expand", [u, self.ints(tgt, "shape")], F32, (b, dc(hkv), dc(rep), t_len, dc(dd)),
                                    t.lo, t.hi, t.exact)
                    r = self.emit1("Reshape", [ex, self.ints([0, h, -1, dd], "shape")], F32, (b, dc(h), t_len, dc(dd)),
                                   t.lo, t.hi, t.exact)
                    for z in (u, ex, r):
                        self.pool.remove(z)
                    return r
                k4, v4 = widen(k4), widen(v4)
            kt = self.tr(k4, [0, 1, 3, 2])
        scale = self.rng.choice(["div", "mul", "qk", "none"])
        m = q4.mag * kt.mag * dd
        if scale == "qk":
            c = self.scalar(dd ** -0.25)
            q4 = self.emit1("Mul", [q4, c], F32, q4.shape, q4.lo, q4.hi)
            kt = self.emit1("Mul", [kt, c], F32, kt.shape, kt.lo, kt.hi)
            self.pool.remove(q4)
            self.pool.remove(kt)
        sc = self.emit1("MatMul", [q4, kt], F32, (b, dc(h), s, t_len), -m, m)
        self.pool.remove(sc)
        if scale == "div":
            sc = self.emit1("Div", [sc, self.scalar(math.sqrt(dd))], F32, sc.shape, -m, m)
            self.pool.remove(sc)
        elif scale == "mul":
            sc = self.emit1("Mul", [sc, self.scalar(1 / math.sqrt(dd))], F32, sc.shape, -m, m)
            self.pool.remove(sc)
        mask = self.rng.choice(["none", "const", "input", "input", "where"])
        neg = self.rng.choice([-1e9, -10000.0, float(np.finfo(np.float32).min)])
        if mask == "const" and is_c(s) and is_c(t_len):
            sn, tn = s[0], t_len[0]
            mk = np.where(np.arange(tn)[None, :] <= np.arange(sn)[:, None] + (tn - sn), 0, neg).astype(np.float32)
            mv = self.const(mk, "mask")
            sc = self.emit1("Add", [sc, mv], F32, sc.shape, neg, m)
            self.pool.remove(sc)
        elif mask in ("input", "const"):
            mshape = (self.rng.choice([b, dc(1)]), dc(1), s, t_len)
            def make_mask(env, rng, mshape=mshape, neg=neg):
                dims = [d_eval(d, env) for d in mshape]
                sn, tn = dims[2], dims[3]
                causal = np.arange(tn)[None, :] <= np.arange(sn)[:, None] + (tn - sn)
                keep = causal | (rng.random((sn, tn)) < 0.3)
                return np.broadcast_to(np.where(keep, 0, neg).astype(np.float32), dims).copy()
            mv = self.new_input(F32, mshape, neg, 0, maker=make_mask, prefix="mask")
            self.pool.remove(mv)
            sc = self.emit1("Add", [sc, mv], F32, sc.shape, neg, m)
            self.pool.remove(sc)
        elif mask == "where":
            mshape = (dc(1), dc(1), s, t_len)
            def make_bool_mask(env, rng, mshape=mshape):
                dims = [d_eval(d, env) for d in mshape]
                sn, tn = dims[2], dims[3]
                return np.broadcast_to(np.arange(tn)[None, :] <= np.arange(sn)[:, None] + (tn - sn), dims).copy()
            mv = self.new_input(BOOL, mshape, 0, 1, maker=make_bool_mask, prefix="mask")
            self.pool.remove(mv)
            sc = self.emit1("Where", [mv, sc, self.scalar(float(np.finfo(np.float32).min))], F32, sc.shape, -3.4e38, m)
            self.pool.remove(sc)
        pr = self.emit1("Softmax", [sc], F32, sc.shape, 0, 1, axis=self.rng.choice([-1, 3]))
        self.pool.remove(pr)
        o = self.emit1("MatMul", [pr, v4], F32, (b, dc(h), s, dc(dd)), v4.lo, v4.hi)
        self.pool.remove(o)
        o = self.tr(o, [0, 2, 1, 3])
        target = self.rng.choice([[0, 0, e], [0, -1, e]] + ([[b[0], -1, e]] if is_c(b) else []))
        o = self.emit1("Reshape", [o, self.ints(target, "shape")], F32, (b, s, dc(e)), o.lo, o.hi)
        if self.chance(0.6):
            self.pool.remove(o)
            o = self.linear(o, e0[0])
            if self.chance(0.6):
                self.pool.remove(o)
                o = self.emit1("Add", [o, x], F32, x.shape, o.lo + x.lo, o.hi + x.hi)
        return o

    def pat_kv_cache(self):
        """present = Concat(past, new) along a symbolic dim, an output."""
        self.notes.append("cache-concat")
        v = self.pick(lambda v: v.rank >= 2 and v.rank <= 4)
        ax = self.rng.randrange(v.rank) if self.chance(0.3) else v.rank - 2
        d = (0, 1, 0) if self.nsyms else dc(self.rng.randint(1, 4))
        shape = list(v.shape)
        shape[ax] = d
        past = self.new_input(F32, tuple(shape), prefix="past")
        self.pool.remove(past)
        shape[ax] = d_add(d, v.shape[ax])
        if not self.shape_ok(shape):
            raise Skip()
        out = self.emit1("Concat", [past, v], F32, tuple(shape), min(past.lo, v.lo), max(past.hi, v.hi),
                         v.exact, axis=ax if self.chance(0.5) else ax - v.rank)
        self.forced_outputs.append(out)
        return out

    def pat_view_chain(self):
        """Views of views: each step a movement op (or now and then an
        elementwise one) on a value of the chain, so that slices, transposes,
        reshapes and concatenations of one storage meet (a Concat of two
        slices of one tensor, an Add of two views of it); some of the chain
        are outputs."""
        self.notes.append("view-chain")
        base = self.pick(lambda v: v.rank >= 1 and v.kind != "const", dtype=None)
        outer = self.pool
        chain = [base]
        steps = [self.op_slice] * 4 + [self.op_transpose] * 2 + [self.op_reshape] * 2 + [self.op_concat] * 3 + \
            [self.op_split, self.op_unsqueeze, self.op_squeeze, self.op_identity, self.op_flatten, self.op_expand,
             self.op_gather, self.op_binary, self.op_unary, self.op_pad]
        try:
            for _ in range(self.rng.randint(3, 8)):
                self.pool = list(chain)
                state = self._state()
                try:
                    self.rng.choice(steps)()
                except Skip:
                    self._restore(state)
                    continue
                chain += [v for v in self.pool if all(v is not c for c in chain)]
        finally:
            self.pool = outer + [c for c in chain if all(c is not o for o in outer)]
        made = chain[1:]
        if not made:
            raise Skip()
        for v in self.rng.sample(made, min(len(made), self.rng.randint(0, 2))):
            self.forced_outputs.append(v)
        return made[-1]

    # ---------------------------------------------------------- the graph
    OPS = [
        ("op_unary", 10), ("op_binary", 14), ("op_where", 3), ("op_cast", 3), ("op_int_arith", 1),
        ("op_slice", 8), ("op_concat", 6), ("op_split", 4), ("op_reshape", 6), ("op_shape_reshape", 2),
        ("op_constant_of_shape", 1), ("op_expand", 3), ("op_unsqueeze", 3), ("op_squeeze", 2),
        ("op_transpose", 5), ("op_gather", 4), ("op_pad", 3), ("op_tile", 2), ("op_identity", 2),
        ("op_flatten", 2), ("op_reduce", 6), ("op_softmax", 3), ("op_matmul", 7), ("op_gemm", 3),
        ("pat_attention", 5), ("pat_layernorm", 3), ("pat_layernorm_decomposed", 2), ("pat_rmsnorm", 2),
        ("pat_gelu", 3), ("pat_mlp", 2), ("pat_linear", 3), ("pat_residual", 2), ("pat_matmul_scale", 1),
        ("pat_kv_cache", 2), ("pat_view_chain", 6),
    ]

    def build(self):
        from onnx import helper
        for _ in range(self.rng.randint(1, 2)):
            self.new_input(F32, self.rand_dims(self.rng.randint(1, 4)))
        steps = self.rng.randint(2, MAX_STEPS)
        names, weights = zip(*self.OPS)
        done = 0
        tries = 0
        while done < steps and tries < steps * 8:
            tries += 1
            fn = self.rng.choices(names, weights=weights)[0]
            state = self._state()
            try:
                getattr(self, fn)()
                done += 1
            except Skip:
                self._restore(state)
        return self.finish(helper)

    def _state(self):
        return (len(self.nodes), list(self.pool), len(self.inputs), dict(self.inits),
                len(self.forced_outputs), list(self.notes), collections.Counter(self.names),
                len(self.allv), [v.uses for v in self.allv])

    def _restore(self, state):
        nn, pool, ninp, inits, nforced, notes, names, nall, uses = state
        del self.nodes[nn:]
        del self.inputs[ninp:]
        del self.forced_outputs[nforced:]
        del self.allv[nall:]
        self.pool, self.inits, self.notes, self.names = pool, inits, notes, names
        for v, u in zip(self.allv, uses):
            v.uses = u

    def finish(self, helper):
        produced = {o for n in self.nodes for o in n.output}
        consumed = collections.Counter(i for n in self.nodes for i in n.input if i)
        vals = {}
        for v in self.pool:
            vals[v.name] = v
        for v in self.forced_outputs:
            vals[v.name] = v
        computed = [v for v in vals.values() if v.name in produced]
        leaves = [v for v in computed if consumed[v.name] == 0]
        if len(leaves) > 8:
            leaves = self.rng.sample(leaves, 8)
        outs = list(dict.fromkeys([v.name for v in leaves] + [v.name for v in self.forced_outputs]))
        if not outs:
            # nothing computed: the graph is an Identity at least
            v = self.pool[-1]
            outs.append(self.emit1("Identity", [v], v.dtype, v.shape, v.lo, v.hi, v.exact).name)
        allv = {v.name: v for v in self.pool}
        allv.update({v.name: v for v in self.forced_outputs})
        for v, _ in self.inputs:
            allv[v.name] = v
        inner = [v for v in computed if consumed[v.name] > 0 and v.name not in outs]
        if inner and self.chance(0.3):
            outs.append(self.rng.choice(inner).name)          # an output also read later
        inputs = [v for v, _ in self.inputs]
        if self.chance(0.1):
            v = self.rng.choice(inputs)
            u = self.emit1("Identity", [v], v.dtype, v.shape, v.lo, v.hi, True)
            outs.append(u.name)
            allv[u.name] = u
        if self.chance(0.05):
            name = self.rng.choice(inputs).name              # an input is an output
            if "input-output" not in AVOID:
                outs.append(name)
        if self.chance(0.1):
            v = self.rng.choice(inputs)
            r = v.rank
            if r:
                u = self.emit1("Slice", [v, self.ints([0] * r, "st"), self.ints([INT64_MAX] * r, "en")],
                               v.dtype, v.shape, v.lo, v.hi, True)
                outs.append(u.name)
                allv[u.name] = u
        if self.chance(0.08):
            name = self.rng.choice(outs)                      # the same value twice
            if "dup-output" not in AVOID:
                outs.append(name)
        sym_declared = self.chance(0.5)

        def vi(v, declare_shape=True):
            if not declare_shape:       # the rank only
                return helper.make_tensor_value_info(v.name, ELEM[v.dtype], [None] * v.rank)
            dims = [d[0] if is_c(d) else d_name(d) for d in v.shape]
            return helper.make_tensor_value_info(v.name, ELEM[v.dtype], dims)
        g_inputs = []
        for v in inputs:
            info = vi(v)
            if self.chance(0.08) and v.rank:
                # a constant dim declared symbolic
                i = self.rng.randrange(v.rank)
                info.type.tensor_type.shape.dim[i].ClearField("dim_value")
                info.type.tensor_type.shape.dim[i].dim_param = f"{v.name}_d{i}"   # its own name: one size
            g_inputs.append(info)
        g_outputs = [vi(allv[n], sym_declared) for n in outs]
        inits = [_numpy_helper().from_array(a, name) for name, a in self.inits.items()]
        graph = helper.make_graph(self.nodes, f"fuzz{self.seed}", g_inputs, g_outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  ir_version=IR_VERSION, producer_name="graph_fuzz")
        runs = []
        for ri, env in enumerate(self.envs):
            rng = np.random.default_rng([self.seed, ri])
            runs.append({v.name: np.asarray(mk(env, rng)) for v, mk in self.inputs})
        return model, runs


def _numpy_helper():
    from onnx import numpy_helper
    return numpy_helper


def _sig(x):
    return 1 / (1 + math.exp(-max(min(x, 80), -80)))


def _factors(n):
    return [a for a in range(2, n) if n % a == 0]


def generate(seed):
    """The graph of `seed`: (ModelProto, runs: [ {input name: array} ], notes)."""
    g = Gen(seed)
    model, runs = g.build()
    return model, runs, g


# ============================================================== references

def _ort():
    import onnxruntime as ort
    return ort


_ORT_OPTS = None


def ort_session(model_bytes):
    global _ORT_OPTS
    ort = _ort()
    if _ORT_OPTS is None:
        _ORT_OPTS = ort.SessionOptions()
        _ORT_OPTS.intra_op_num_threads = 1
        _ORT_OPTS.inter_op_num_threads = 1
        _ORT_OPTS.log_severity_level = 4
        # No graph rewrites: the reference computes node by node. ONNX
        # Runtime's fusions compute otherwise, and in onnxruntime 1.31 some
        # are wrong here: at ENABLE_EXTENDED the RMSNorm fusion breaks a
        # graph with Mul(w, x * inv) ("Node input ... is not a graph input"),
        # at ENABLE_ALL MatMul(Transpose(x), w) with a 1-D w gives other
        # values, and even at ENABLE_BASIC the LayerNorm fusion takes in the
        # Casts around Erf of the float64 model.
        _ORT_OPTS.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model_bytes, _ORT_OPTS, providers=["CPUExecutionProvider"])


# ORT's CPU provider has no float64 kernel for these: they run in float32
# between Casts in the float64 model.
NO_DOUBLE = {"Erf"}


def to_double(model):
    """The same model with float32 replaced by float64 (inputs, outputs,
    initializers, constants, Casts)."""
    import onnx
    from onnx import helper, numpy_helper
    TP = onnx.TensorProto
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph

    def fix_vi(v):
        if v.type.tensor_type.elem_type == TP.FLOAT:
            v.type.tensor_type.elem_type = TP.DOUBLE
    for v in list(g.input) + list(g.output) + list(g.value_info):
        fix_vi(v)
    for i, t in enumerate(g.initializer):
        if t.data_type == TP.FLOAT:
            a = numpy_helper.to_array(t).astype(np.float64)
            g.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
    new_nodes = []
    k = 0
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TP.FLOAT:
                arr = numpy_helper.to_array(a.t).astype(np.float64)
                a.t.CopyFrom(numpy_helper.from_array(arr, a.t.name))
            if n.op_type == "Cast" and a.name == "to" and a.i == TP.FLOAT:
                a.i = TP.DOUBLE
        if n.op_type in NO_DOUBLE:
            ins, outs = [], []
            for x in n.input:
                k += 1
                new_nodes.append(helper.make_node("Cast", [x], [f"__f32_{k}"], to=TP.FLOAT))
                ins.append(f"__f32_{k}")
            for y in n.output:
                k += 1
                outs.append(f"__f32_{k}")
            nn = onnx.NodeProto()
            nn.CopyFrom(n)
            del nn.input[:]
            nn.input.extend(ins)
            del nn.output[:]
            nn.output.extend(outs)
            new_nodes.append(nn)
            for y, t in zip(n.output, outs):
                new_nodes.append(helper.make_node("Cast", [t], [y], to=TP.DOUBLE))
        else:
            new_nodes.append(n)
    del g.node[:]
    g.node.extend(new_nodes)
    return m


class RefError(Exception):
    """ONNX Runtime refused the graph or gave non-finite values: the
    generator's bug (or ONNX Runtime's), not wgnn's."""


PERTURB = 2.0 ** -22      # 2 ulp of float32, relative


def perturbed(model, rng):
    """The float64 model with its float weights (not scalars, not Pow's
    exponents) moved by PERTURB, relative, each element its own sign."""
    import onnx
    from onnx import numpy_helper
    TP = onnx.TensorProto
    m = onnx.ModelProto()
    m.CopyFrom(model)
    exponents = {n.input[1] for n in m.graph.node if n.op_type == "Pow" and len(n.input) > 1}

    def move(t):
        a = numpy_helper.to_array(t)
        if a.ndim == 0 or t.name in exponents:
            return None
        return numpy_helper.from_array(a * (1 + PERTURB * rng.choice([-1.0, 1.0], a.shape)), t.name)
    for i, t in enumerate(m.graph.initializer):
        if t.data_type == TP.DOUBLE:
            new = move(t)
            if new is not None:
                m.graph.initializer[i].CopyFrom(new)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] not in exponents:
            for a in n.attribute:
                if a.name == "value" and a.t.data_type == TP.DOUBLE:
                    a.t.name = n.output[0]
                    new = move(a.t)
                    if new is not None:
                        a.t.CopyFrom(new)
    return m


# Operators whose float results are rounded (what moves, selects or
# compares values is exact).
ROUNDING = {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Sigmoid", "Tanh", "Reciprocal", "ReduceMean",
            "ReduceSum", "Softmax", "MatMul", "Gemm", "LayerNormalization"}


def with_rounding(m64):
    """The float64 model with a float32-sized rounding error put on every
    rounded result: y + y * u * 2^-23, u uniform in [-1, 1] per element
    (RandomUniformLike). Its outputs move as much as the graph magnifies
    the rounding of its steps: a mean of equal values that comes out one
    ulp off, then divided by sqrt(eps), moves here too."""
    import onnx
    from onnx import helper, numpy_helper
    TP = onnx.TensorProto
    try:
        types = {v.name: v.type.tensor_type.elem_type
                 for v in list(onnx.shape_inference.infer_shapes(m64).graph.value_info) + list(m64.graph.output)}
    except Exception:  # noqa: BLE001
        types = {}
    m = onnx.ModelProto()
    m.CopyFrom(m64)
    eps = "__ulp"
    m.graph.initializer.append(numpy_helper.from_array(np.array(2.0 ** -23), eps))
    nodes = []
    for k, n in enumerate(m.graph.node):
        nodes.append(n)
        if n.op_type not in ROUNDING or not n.output or types.get(n.output[0]) != TP.DOUBLE:
            continue
        y = n.output[0]
        x = f"{y}__exact"
        n.output[0] = x
        nodes += [helper.make_node("RandomUniformLike", [x], [f"{y}__u"], dtype=TP.DOUBLE, low=-1.0, high=1.0,
                                   seed=float(k + 1)),
                  helper.make_node("Mul", [x, f"{y}__u"], [f"{y}__xu"]),
                  helper.make_node("Mul", [f"{y}__xu", eps], [f"{y}__e"]),
                  helper.make_node("Add", [x, f"{y}__e"], [y])]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def declared_shapes_wrong(model, runs, outs):
    """What the model declares of its input and output shapes that the
    values contradict: a dim_value, a rank, or a dim_param standing for two
    sizes in one run (ONNX: one name, one size). None when all hold."""
    for ri, (feeds, o) in enumerate(zip(runs, outs)):
        sizes = {}
        vals = [(v, feeds.get(v.name)) for v in model.graph.input] + list(zip(model.graph.output, o))
        for v, a in vals:
            if a is None or not v.type.tensor_type.HasField("shape"):
                continue
            dims = v.type.tensor_type.shape.dim
            if len(dims) != np.ndim(a):
                return f"run {ri}: {v.name} declared of rank {len(dims)}, is {list(np.shape(a))}"
            for k, d in enumerate(dims):
                n = np.shape(a)[k]
                if d.HasField("dim_value") and d.dim_value != n:
                    return f"run {ri}: {v.name} dim {k} declared {d.dim_value}, is {n}"
                if d.HasField("dim_param") and sizes.setdefault(d.dim_param, n) != n:
                    return f"run {ri}: dim_param {d.dim_param!r} is {sizes[d.dim_param]} and {n}"
    return None


def reference(model, runs):
    """ONNX Runtime's outputs for each run, and each output's noise: the
    larger of max |float32 - float64| and how far the float64 outputs move
    when every float input and weight moves by 2 ulp and every rounded
    result by up to one (with_rounding); None for integer outputs."""
    mb = model.SerializeToString()
    try:
        s32 = ort_session(mb)
        names = [o.name for o in s32.get_outputs()]
        outs32 = [s32.run(None, feeds) for feeds in runs]
    except Exception as e:  # noqa: BLE001
        raise RefError(f"onnxruntime: {str(e).splitlines()[0][:300]}")
    for outs in outs32:
        for n, a in zip(names, outs):
            if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
                raise RefError(f"onnxruntime: output {n} is not finite")
    bad = declared_shapes_wrong(model, runs, outs32)
    if bad:
        raise RefError(f"declared shapes: {bad}")
    noise = []
    try:
        m64 = to_double(model)
        s64 = ort_session(m64.SerializeToString())
        rng = np.random.default_rng(12345)
        s64p = ort_session(with_rounding(perturbed(m64, rng)).SerializeToString())
        for feeds, o32 in zip(runs, outs32):
            f64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}
            o64 = s64.run(None, f64)
            fp = {k: (np.asarray(v * (1 + PERTURB * rng.choice([-1.0, 1.0], v.shape))) if v.dtype == np.float64 else v)
                  for k, v in f64.items()}
            o64p = s64p.run(None, fp)
            noise.append([max(float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0)),
                              float(np.max(np.abs(c - b), initial=0.0)))
                          if a.dtype == np.float32 else None
                          for a, b, c in zip(o32, o64, o64p)])
    except Exception as e:  # noqa: BLE001
        raise RefError(f"onnxruntime (float64 model): {str(e).splitlines()[0][:300]}")
    for row in noise:
        for i, v in enumerate(row):
            if v is not None and not math.isfinite(v):
                raise RefError(f"onnxruntime (float64 model): output {names[i]} is not finite when its inputs move")
    return names, outs32, noise


def compare(names, ref_runs, noise_runs, got_runs):
    """None when wgnn's outputs match, else (kind, detail)."""
    for ri, (ref, noise, got) in enumerate(zip(ref_runs, noise_runs, got_runs)):
        if len(got) != len(ref):
            return "count", f"run {ri}: {len(got)} outputs, expected {len(ref)}"
        for name, r, nz, g in zip(names, ref, noise, got):
            g = np.asarray(g)
            if g.shape != r.shape:
                return "shape", f"run {ri}: output {name}: shape {list(g.shape)}, expected {list(r.shape)}"
            if g.dtype != r.dtype:
                return "dtype", f"run {ri}: output {name}: dtype {g.dtype}, expected {r.dtype}"
            if r.dtype.kind in "iub":
                if not np.array_equal(g, r):
                    bad = int(np.sum(g != r))
                    return "mismatch", f"run {ri}: output {name} {list(r.shape)} {r.dtype}: {bad} of {r.size} differ"
                continue
            if not np.all(np.isfinite(g)):
                return "mismatch", f"run {ri}: output {name} {list(r.shape)}: non-finite values"
            err = np.abs(g.astype(np.float64) - r.astype(np.float64))
            tol = ATOL + RTOL * np.abs(r.astype(np.float64)) + NOISE_FACTOR * (nz or 0.0)
            if np.any(err > tol):
                i = int(np.argmax(err - tol))
                idx = np.unravel_index(i, r.shape) if r.ndim else ()
                return "mismatch", (f"run {ri}: output {name} {list(r.shape)}: max diff {err.max():.3g} "
                                    f"at {list(map(int, idx))} (got {g.flat[i]:.6g}, expected {r.flat[i]:.6g}, "
                                    f"tolerance {tol.flat[i]:.3g}; {int(np.sum(err > tol))} of {r.size} over)")
    return None


# ============================================================== wgnn workers

def worker_main():
    """Runs models in wgnn: requests on stdin, answers on the real stdout (the
    process's fd 1 goes to stderr, so that nothing else lands in the pipe)."""
    out_fd = os.dup(1)
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    out = os.fdopen(out_fd, "wb")
    import wgnn

    def send(obj):
        data = pickle.dumps(obj, protocol=4)
        out.write(struct.pack("<Q", len(data)) + data)
        out.flush()
    send({"ready": True, "ops": wgnn.supported_ops(), "version": wgnn.__version__,
          "path": os.path.dirname(wgnn.__file__)})
    while True:
        hdr = inp.read(8)
        if len(hdr) < 8:
            return
        req = pickle.loads(inp.read(struct.unpack("<Q", hdr)[0]))
        try:
            opts = wgnn.SessionOptions()
            if req.get("no_fusion"):
                opts.fusion = False
            sess = wgnn.InferenceSession(req["model"], opts)
            results = []
            for feeds in req["runs"]:
                results.append([np.asarray(a) for a in sess.run(None, feeds)])
            del sess
            send({"ok": results})
        except Exception as e:  # noqa: BLE001
            kind = type(e).__name__
            unsupported = isinstance(e, wgnn.Unsupported)
            send({"error": kind, "message": str(e), "unsupported": unsupported})


class Worker:
    """One wgnn worker process, restarted after a crash or a timeout."""

    def __init__(self, env=None, log_dir=None, index=0, fresh=False):
        self.env = env
        self.fresh = fresh        # a new process for every model
        self.history = []         # what this process ran before (labels)
        self.log_dir = log_dir or tempfile.gettempdir()
        self.index = index
        self.proc = None
        self.ops = None
        self.started = 0

    def start(self):
        self.started += 1
        self.history = []
        self.log = os.path.join(self.log_dir, f"graph_fuzz_{os.getpid()}_worker{self.index}.log")
        self.logf = open(self.log, "ab")
        pos = os.path.getsize(self.log)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.logf,
                                     env=self.env, start_new_session=True)
        msg = self._recv(timeout=300)
        if msg is None or not msg.get("ready"):
            rc = self.proc.poll()
            raise RuntimeError(f"the wgnn worker did not start (exit {rc}; {self.log}): {self._log_since(pos)}")
        self.ops = msg["ops"]
        self.version = f"wgnn {msg['version']} ({msg['path']})"

    def _recv(self, timeout):
        res = {}

        def read():
            try:
                hdr = self.proc.stdout.read(8)
                if len(hdr) == 8:
                    res["msg"] = pickle.loads(self.proc.stdout.read(struct.unpack("<Q", hdr)[0]))
            except Exception as e:  # noqa: BLE001
                res["exc"] = e
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            res["timeout"] = True
            self.kill()
            t.join(5)
        return res.get("msg") if "msg" in res else ({"timeout": True} if res.get("timeout") else None)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                self.kill()
        self.proc = None

    def run(self, model_bytes, runs, timeout, no_fusion=False, label=None):
        """('ok', outputs) | ('unsupported', msg) | ('error', sig, msg) |
        ('crash', sig, msg) | ('timeout', sig, msg). `last_before`: what the
        process ran before this model."""
        if self.fresh:
            self.stop()
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.last_before = list(self.history)
        self.history.append(label)
        pos = os.path.getsize(self.log)
        data = pickle.dumps({"model": model_bytes, "runs": runs, "no_fusion": no_fusion}, protocol=4)
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        msg = self._recv(timeout)
        if msg is None or msg.get("timeout"):
            rc = self.proc.wait()
            tail = self._log_since(pos)
            self.proc = None
            if msg and msg.get("timeout"):
                return ("timeout", "timeout", f"no answer in {timeout} s; {tail}")
            name = signal.Signals(-rc).name if rc < 0 and -rc in signal.Signals._value2member_map_ else f"exit {rc}"
            return ("crash", "crash", f"the worker died ({name}); {tail}")
        if "ok" in msg:
            return ("ok", msg["ok"])
        if msg["unsupported"]:
            return ("unsupported", msg["message"])
        if msg["error"] in ("GpuError", "DeviceLost"):
            self.stop()                      # a fresh device for what follows
        return ("error", f"{msg['error']}: {normalize(msg['message'])}", f"{msg['error']}: {msg['message']}")

    def _log_since(self, pos):
        try:
            with open(self.log, "rb") as f:
                f.seek(pos)
                text = f.read().decode(errors="replace").strip()
            return " | ".join(text.splitlines()[-8:])[-1500:]
        except OSError:
            return ""


# Every operator the generator may write (checked against wgnn.supported_ops()).
GEN_OPS = sorted(set("""Abs Add Cast Concat Constant ConstantOfShape Div Equal Erf Exp Expand Flatten Gather
    Gemm Greater Identity LayerNormalization Less MatMul Mul Neg Pad Pow Reciprocal ReduceMax ReduceMean
    ReduceSum Relu Reshape Shape Sigmoid Slice Softmax Split Sqrt Squeeze Sub Tanh Tile Transpose Unsqueeze
    Where""".split()))


class OrtAllWorker:
    """ONNX Runtime with all its graph optimizations as the implementation
    under test (--target ort-all): its fusions against its basic level."""
    ops = None

    def run(self, model_bytes, runs, timeout, no_fusion=False, label=None):
        ort = _ort()
        o = ort.SessionOptions()
        o.intra_op_num_threads = 1
        o.log_severity_level = 3
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            s = ort.InferenceSession(model_bytes, o, providers=["CPUExecutionProvider"])
            return ("ok", [s.run(None, feeds) for feeds in runs])
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            return ("error", f"{type(e).__name__}: {normalize(msg)}", msg)

    def stop(self):
        pass


class CliWorker:
    """wgnn's CLI as the implementation (--target cli): `wgnn run` in a process
    for each set of inputs, so no two sizes in one session; what a build
    tree has before its Python package is installed again."""
    ops = None

    def __init__(self, cli):
        self.cli = cli

    def run(self, model_bytes, runs, timeout, no_fusion=False, label=None):
        import onnx
        m = onnx.ModelProto()
        m.ParseFromString(model_bytes)
        names = [o.name for o in m.graph.output]
        env = dict(os.environ)
        if no_fusion:
            env["WGNN_NO_FUSION"] = "1"
        results = []
        with tempfile.TemporaryDirectory(prefix="graph_fuzz_cli") as d:
            path = os.path.join(d, "model.onnx")
            with open(path, "wb") as f:
                f.write(model_bytes)
            for ri, feeds in enumerate(runs):
                od = os.path.join(d, f"out{ri}")
                cmd = [self.cli, "run", path, "--output-dir", od]
                for k, (n, a) in enumerate(feeds.items()):
                    ip = os.path.join(d, f"in{ri}_{k}.npy")
                    np.save(ip, a)
                    cmd += ["--input", f"{n}={ip}"]
                try:
                    p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
                except subprocess.TimeoutExpired:
                    return ("timeout", "timeout", f"no answer in {timeout} s")
                err = p.stderr.decode(errors="replace").strip()
                if p.returncode < 0:
                    name = signal.Signals(-p.returncode).name
                    return ("crash", "crash", f"wgnn run died ({name}); {' | '.join(err.splitlines()[-6:])}")
                if p.returncode != 0:
                    msg = err.removeprefix("wgnn: error: ")
                    if "unsupported node" in msg or "is not supported" in msg:
                        return ("unsupported", msg)
                    return ("error", f"Error: {normalize(msg)}", msg)
                results.append([np.load(os.path.join(od, n + ".npy")) for n in names])
        return ("ok", results)

    def stop(self):
        pass


def normalize(msg):
    """An error's kind: its first line with names and numbers taken out."""
    line = msg.strip().splitlines()[0] if msg.strip() else ""
    line = re.sub(r"'[^']*'", "'?'", line)
    line = re.sub(r"\"[^\"]*\"", "'?'", line)
    line = re.sub(r"\[[-0-9, ]*\]", "[..]", line)
    line = re.sub(r"\d+", "N", line)
    return line[:160]


# ============================================================== one case

class Outcome:
    def __init__(self, status, sig="", detail=""):
        self.status = status      # pass | unsupported | fail | invalid
        self.sig = sig            # the failure's kind (what the shrinker keeps)
        self.detail = detail


def check(worker, model, runs, ref=None, timeout=120, no_fusion=False, label=None):
    """Runs one model through both; the Outcome (and the reference used)."""
    if ref is None:
        try:
            ref = reference(model, runs)
        except RefError as e:
            return Outcome("invalid", "invalid", str(e)), None
    names, ref_runs, noise_runs = ref
    res = worker.run(model.SerializeToString(), runs, timeout, no_fusion=no_fusion, label=label)
    if res[0] == "unsupported":
        return Outcome("unsupported", "unsupported", res[1]), ref
    if res[0] in ("error", "crash", "timeout"):
        return Outcome("fail", res[1], res[2]), ref
    bad = compare(names, ref_runs, noise_runs, res[1])
    if bad:
        return Outcome("fail", bad[0], bad[1]), ref
    return Outcome("pass"), ref


# ============================================================== shrinking

def _graph_values(model):
    import onnx
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        types[v.name] = v.type.tensor_type.elem_type
    for t in model.graph.initializer:
        types[t.name] = t.data_type
    return types


def _dce(model, runs):
    """Drops nodes nobody reads, unused initializers and inputs."""
    g = model.graph
    need = {o.name for o in g.output}
    keep = []
    for n in reversed(list(g.node)):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(i for i in n.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [t for t in g.initializer if t.name in need]
    del g.initializer[:]
    g.initializer.extend(inits)
    ins = [i for i in g.input if i.name in need]
    del g.input[:]
    g.input.extend(ins)
    names = {i.name for i in g.input}
    return model, [{k: v for k, v in r.items() if k in names} for r in runs]


def _input_info(name, arrays):
    from onnx import helper
    a0 = arrays[0]
    dims = []
    for i, n in enumerate(a0.shape):
        dims.append(n if all(a.shape[i] == n for a in arrays) else f"d_{name}_{i}"[:40])
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a0.dtype), dims)


def _declare_outputs(model, runs):
    """The graph outputs' shapes as ONNX Runtime computes them (a dim that
    differs between runs symbolic): a cut or a smaller dim changes them."""
    s = ort_session(model.SerializeToString())
    names = [o.name for o in s.get_outputs()]
    outs = [s.run(None, feeds) for feeds in runs]
    infos = {n: _input_info(n, [np.asarray(o[i]) for o in outs]) for i, n in enumerate(names)}
    for k, o in enumerate(model.graph.output):
        if o.name in infos:
            model.graph.output[k].CopyFrom(infos[o.name])


def _intermediates(model, runs):
    """Every value of the model at each run (ONNX Runtime's)."""
    import onnx
    from onnx import helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    types = _graph_values(m)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have and o in types:
                m.graph.output.append(helper.make_tensor_value_info(o, types[o], None))
                have.add(o)
    s = ort_session(m.SerializeToString())
    names = [o.name for o in s.get_outputs()]
    vals = []
    for feeds in runs:
        out = s.run(None, feeds)
        d = dict(zip(names, out))
        d.update(feeds)
        vals.append(d)
    return vals


class Shrinker:
    """Removes what the failure does not need. A candidate is kept when it
    fails with one of the kinds the original showed (`sigs`: a failure of
    memory may show as a crash one time and a wrong shape the next)."""

    def __init__(self, worker, model, runs, sig, timeout, budget_s, budget_runs, log=None):
        self.worker, self.sig, self.timeout = worker, {sig}, timeout
        self.model, self.runs = model, runs
        self.deadline = time.time() + budget_s
        self.left = budget_runs
        self.log = log or (lambda s: None)
        self.trace = bool(os.environ.get("GRAPH_FUZZ_TRACE"))
        self.detail = ""

    def still_fails(self, model, runs):
        if self.left <= 0 or time.time() > self.deadline:
            return False
        import onnx
        try:
            onnx.checker.check_model(model)
        except Exception:  # noqa: BLE001
            return False
        self.left -= 1
        out, _ = check(self.worker, model, runs, timeout=self.timeout)
        if self.trace:
            self.log(f"    try {len(model.graph.node)} nodes: {out.status} {out.sig} {out.detail[:120]}")
        if out.status == "fail" and out.sig in self.sig:
            self.detail = out.detail
            return True
        return False

    def learn_kinds(self, tries=2):
        """Runs the original again: the kinds it fails with."""
        for _ in range(tries):
            out, _ = check(self.worker, self.model, self.runs, timeout=self.timeout)
            if out.status == "fail":
                self.sig.add(out.sig)
        if self.trace:
            self.log(f"    kinds: {sorted(self.sig)}")

    def attempt(self, model, runs):
        model, runs = _dce(model, runs)
        if len(model.graph.output) == 0:
            return False
        try:
            _declare_outputs(model, runs)
        except Exception:  # noqa: BLE001
            return False
        if self.still_fails(model, runs):
            self.model, self.runs = model, runs
            return True
        return False

    def copy(self):
        import onnx
        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        return m, [dict(r) for r in self.runs]

    def shrink(self):
        self.learn_kinds()
        progress = True
        while progress and self.left > 0 and time.time() < self.deadline:
            progress = False
            # fewer runs
            if len(self.runs) > 1:
                for keep in ([self.runs[-1]], [self.runs[0]], self.runs[-2:]):
                    if len(keep) < len(self.runs):
                        m, _ = self.copy()
                        if self.attempt(m, [dict(r) for r in keep]):
                            progress = True
                            break
            # fewer outputs
            i = 0
            while len(self.model.graph.output) > 1 and i < len(self.model.graph.output):
                m, r = self.copy()
                del m.graph.output[i]
                if self.attempt(m, r):
                    progress = True
                else:
                    i += 1
            # nodes: each one cut (its outputs new inputs), or bypassed
            progress |= self.cut_nodes()
            progress |= self.bypass_nodes()
            progress |= self.shrink_dims()
        return self.model, self.runs

    def cut_nodes(self):
        progress = False
        i = 0
        while i < len(self.model.graph.node) and self.left > 0:
            try:
                vals = _intermediates(self.model, self.runs)
            except Exception:  # noqa: BLE001
                return progress
            n = self.model.graph.node[i]
            if n.op_type == "Constant" or not all(o in vals[0] for o in n.output if o):
                i += 1
                continue
            m, r = self.copy()
            node = m.graph.node[i]
            outs = [o for o in node.output if o]
            del m.graph.node[i]
            for o in outs:
                arrays = [np.asarray(v[o]) for v in vals]
                m.graph.input.append(_input_info(o, arrays))
                for rr, a in zip(r, arrays):
                    rr[o] = a
            # an output that is now an input is kept (an alias): the failure decides
            if self.attempt(m, r):
                progress = True
                self.log(f"  cut {n.op_type}: {len(self.model.graph.node)} nodes")
            else:
                i += 1
        return progress

    def bypass_nodes(self):
        progress = False
        i = len(self.model.graph.node) - 1
        while i >= 0 and self.left > 0:
            if i >= len(self.model.graph.node):
                i -= 1
                continue
            try:
                vals = _intermediates(self.model, self.runs)
            except Exception:  # noqa: BLE001
                return progress
            n = self.model.graph.node[i]
            outs = [o for o in n.output if o]
            if len(outs) == 1 and outs[0] in vals[0]:
                o = outs[0]
                for src in [x for x in n.input if x and x in vals[0]]:
                    if all(np.asarray(v[src]).shape == np.asarray(v[o]).shape and
                           np.asarray(v[src]).dtype == np.asarray(v[o]).dtype for v in vals):
                        m, r = self.copy()
                        del m.graph.node[i]
                        for nn in m.graph.node:
                            for k, x in enumerate(nn.input):
                                if x == o:
                                    nn.input[k] = src
                        for k, go in enumerate(m.graph.output):
                            if go.name == o:
                                go.name = src
                        if self.attempt(m, r):
                            progress = True
                            self.log(f"  bypassed {n.op_type}: {len(self.model.graph.node)} nodes")
                            break
            i -= 1
        return progress

    def shrink_dims(self):
        """Each graph input's (and initializer's) dims made smaller, its
        values cut to the first elements, while ONNX Runtime still runs it."""
        from onnx import numpy_helper
        progress = False
        for kind in ("input", "init"):
            names = [i.name for i in self.model.graph.input] if kind == "input" else \
                    [t.name for t in self.model.graph.initializer]
            for name in names:
                axis = 0
                while self.left > 0:
                    if kind == "input":
                        if name not in self.runs[0]:
                            break
                        shape = self.runs[0][name].shape
                    else:
                        ts = [t for t in self.model.graph.initializer if t.name == name]
                        if not ts:
                            break
                        shape = tuple(ts[0].dims)
                    if axis >= len(shape):
                        break
                    n = shape[axis]
                    shrunk = False
                    for new in sorted({1, n // 2, n - 1}):
                        if new < 1 or new >= n:
                            continue
                        m, r = self.copy()
                        sl = (slice(None),) * axis + (slice(0, new),)
                        if kind == "input":
                            for rr in r:
                                rr[name] = np.ascontiguousarray(rr[name][sl])
                            for k, gi in enumerate(m.graph.input):
                                if gi.name == name:
                                    m.graph.input[k].CopyFrom(_input_info(name, [rr[name] for rr in r]))
                        else:
                            for t in m.graph.initializer:
                                if t.name == name:
                                    a = numpy_helper.to_array(t)[sl]
                                    t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(a), name))
                        try:
                            reference(m, r)
                        except RefError:
                            continue
                        if self.attempt(m, r):
                            progress = shrunk = True
                            self.log(f"  {name} axis {axis}: {n} -> {new}")
                            break
                    if not shrunk:
                        axis += 1
        return progress


# ============================================================== saving, replay

def save_case(dirname, name, model, runs, ref, meta):
    os.makedirs(dirname, exist_ok=True)
    names, outs, noise = ref
    arrays = {}
    manifest = {"inputs": [], "outputs": names, "noise": noise, "meta": meta}
    k = 0
    for ri, feeds in enumerate(runs):
        entry = {}
        for n, a in feeds.items():
            arrays[f"a{k}"] = a
            entry[n] = f"a{k}"
            k += 1
        manifest["inputs"].append(entry)
    manifest["refs"] = []
    for ri, o in enumerate(outs):
        keys = []
        for a in o:
            arrays[f"a{k}"] = a
            keys.append(f"a{k}")
            k += 1
        manifest["refs"].append(keys)
    arrays["manifest"] = np.array(json.dumps(manifest))
    with open(os.path.join(dirname, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())
    np.savez_compressed(os.path.join(dirname, name + ".npz"), **arrays)


def load_case(dirname, name):
    import onnx
    model = onnx.load(os.path.join(dirname, name + ".onnx"))
    z = np.load(os.path.join(dirname, name + ".npz"))
    manifest = json.loads(str(z["manifest"]))
    runs = [{n: z[k] for n, k in entry.items()} for entry in manifest["inputs"]]
    outs = [[z[k] for k in keys] for keys in manifest["refs"]]
    return model, runs, (manifest["outputs"], outs, manifest["noise"]), manifest.get("meta", {})


def read_expected(dirname):
    path = os.path.join(dirname, "expected.txt")
    exp = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            status, _, rest = line.partition(" ")
            name, _, reason = rest.partition(":")
            exp[name.strip()] = (status, reason.strip())
    return exp


def replay(args):
    d = args.replay
    names = sorted(f[:-5] for f in os.listdir(d) if f.endswith(".onnx") and os.path.exists(os.path.join(d, f[:-5] + ".npz")))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    exp = read_expected(d)
    # a process for each model: one that corrupts memory cannot touch the next
    worker = OrtAllWorker() if args.target == "ort-all" else \
        CliWorker(args.cli) if args.target == "cli" else Worker(log_dir=args.log_dir, fresh=True)
    problems, lines = [], []
    counts = collections.Counter()
    for name in names:
        model, runs, ref, meta = load_case(d, name)
        out, _ = check(worker, model, runs, ref=ref, timeout=args.timeout, no_fusion=args.no_fusion)
        result = "pass" if out.status == "pass" else ("skip" if out.status == "unsupported" else "fail")
        counts[result] += 1
        want, reason = exp.get(name, (None, ""))
        text = f"{result} {name}" + (f": {out.sig}" if result != "pass" else "")
        detail = " ".join(out.detail.split())[:300]
        print(f"  {text}" + (f"  [{detail}]" if result != "pass" else ""), flush=True)
        if want is None:
            problems.append(f"{name}: not in expected.txt (now {result})")
            lines.append(f"{result} {name}" + (f": {out.sig}" if result != "pass" else ""))
        elif want != result:
            problems.append(f"{name}: expected {want}, now {result}" + (f" ({out.sig})" if result != "pass" else ""))
            lines.append(f"{result} {name}" + (f": {reason or out.sig}" if result != "pass" else ""))
        else:
            lines.append(f"{want} {name}" + (f": {reason}" if want != "pass" else ""))
    worker.stop()
    missing = [n for n in exp if n not in names]
    if not args.only:
        problems += [f"{n}: in expected.txt, no such model" for n in missing]
    print(f"graph_fuzz replay {d}: {len(names)} models, {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} unsupported; {len(problems)} not as expected.txt says")
    for p in problems:
        print(f"  {p}")
    if args.update and not args.only:
        with open(os.path.join(d, "expected.txt"), "w") as f:
            f.write("# graph_fuzz.py --replay: `pass NAME` or `fail NAME: why` (a known open failure).\n")
            f.write("# Rewrite with --replay DIR --update, then review the diff.\n")
            for line in lines:
                f.write(line + "\n")
        print(f"  wrote {os.path.join(d, 'expected.txt')}")
        return 0
    return 1 if problems else 0


# ============================================================== the run

def _ranges(seeds):
    """[1, 2, 3, 7] -> '1-3, 7'."""
    out, start, prev = [], None, None
    for s in seeds:
        if start is None:
            start = prev = s
        elif s == prev + 1:
            prev = s
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = s
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(out)


def describe(model):
    ops = collections.Counter(n.op_type for n in model.graph.node)
    return ", ".join(f"{k}x{v}" if v > 1 else k for k, v in sorted(ops.items()))


def fuzz(args):
    seeds = list(range(args.seed, args.seed + args.count))
    q = queue.Queue()
    for s in seeds:
        q.put(s)
    lock = threading.Lock()
    stats = collections.Counter()
    fails = collections.defaultdict(list)    # sig -> [seed]
    unsupported = collections.Counter()
    invalid = collections.defaultdict(list)
    shrunk = collections.Counter()
    saved = []
    t0 = time.time()
    done = [0]

    def log(msg):
        with lock:
            print(msg, flush=True)

    info = {}

    def work(wi):
        if args.ort_only:
            worker = None
        elif args.target == "ort-all":
            worker = OrtAllWorker()
        elif args.target == "cli":
            worker = CliWorker(args.cli)
        else:
            worker = Worker(log_dir=args.log_dir, index=wi)
        fresh = Worker(log_dir=args.log_dir, index=f"{wi}f", fresh=True) if worker and not args.ort_only else None
        while True:
            try:
                seed = q.get_nowait()
            except queue.Empty:
                break
            try:
                model, runs, g = generate(seed)
            except Exception:  # noqa: BLE001
                with lock:
                    stats["invalid"] += 1
                    invalid["generator exception"].append(seed)
                log(f"seed {seed}: generator exception\n{traceback.format_exc()}")
                continue
            if args.ort_only:
                try:
                    import onnx
                    onnx.checker.check_model(model)
                    reference(model, runs)
                    st = Outcome("pass")
                except Exception as e:  # noqa: BLE001
                    st = Outcome("invalid", "invalid", str(e)[:300])
            else:
                st, ref = check(worker, model, runs, timeout=args.timeout, no_fusion=args.no_fusion, label=seed)
                before = getattr(worker, "last_before", [])
                if getattr(worker, "ops", None) and "version" not in info:
                    info["version"] = worker.version
                    missing = [o for o in GEN_OPS if o not in worker.ops]
                    if missing:
                        log(f"warning: the generator writes operators wgnn does not map: {', '.join(missing)}")
                if st.status == "fail" and fresh is not None:
                    # again in a process of its own: is it this graph's?
                    st2, _ = check(fresh, model, runs, ref=ref, timeout=args.timeout, no_fusion=args.no_fusion)
                    if st2.status != "fail" and before:
                        st = Outcome("fail", f"history: {st.sig}",
                                     f"{st.detail} -- passes in a fresh process; this process ran seeds "
                                     f"{_ranges(before)} before")
            with lock:
                done[0] += 1
                stats[st.status] += 1
                if st.status == "unsupported":
                    unsupported[normalize(st.detail)] += 1
                elif st.status == "invalid":
                    invalid[normalize(st.detail)].append(seed)
                elif st.status == "fail":
                    fails[st.sig].append(seed)
                n_done = done[0]
            if st.status in ("fail", "invalid") or (args.verbose and st.status != "pass"):
                log(f"seed {seed}: {st.status} {st.sig}: {' '.join(st.detail.split())[:400]}  [{describe(model)}]")
            if args.progress and n_done % args.progress == 0:
                log(f"... {n_done}/{len(seeds)} graphs, {time.time() - t0:.0f} s: "
                    + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
            if st.status == "fail" and args.save and not args.no_shrink and not st.sig.startswith("history"):
                with lock:
                    take = shrunk[st.sig] < args.shrink_per_kind
                    if take:
                        shrunk[st.sig] += 1
                if take:
                    log(f"seed {seed}: shrinking ({len(model.graph.node)} nodes)")
                    sh = Shrinker(fresh or worker, model, runs, st.sig, args.timeout, args.shrink_time, args.shrink_runs,
                                  log=log if args.verbose else None)
                    try:
                        m2, r2 = sh.shrink()
                        ref2 = reference(m2, r2)
                    except Exception as e:  # noqa: BLE001
                        log(f"seed {seed}: shrinking failed: {e}")
                        m2, r2, ref2 = model, runs, ref
                    kind = re.sub(r"[^a-z0-9]+", "-", st.sig.lower())[:40].strip("-")
                    name = f"seed{seed}-{kind}"
                    meta = {"seed": seed, "sig": st.sig, "detail": sh.detail or st.detail,
                            "ops": describe(m2), "nodes_before": len(model.graph.node)}
                    save_case(args.save, name, m2, r2, ref2, meta)
                    me = os.path.relpath(os.path.abspath(__file__))
                    with lock:
                        saved.append((name, st.sig, describe(m2), sh.detail or st.detail))
                    log(f"seed {seed}: saved {os.path.join(args.save, name)}.onnx ({len(m2.graph.node)} nodes: "
                        f"{describe(m2)})\n  reproduce: {sys.executable} {me} --replay {args.save} --only {name}\n"
                        f"  or:        {sys.executable} {me} --seed {seed} --count 1")
        if worker:
            worker.stop()
        if fresh:
            fresh.stop()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    if "version" in info:
        print(f"graph_fuzz: {info['version']}" + (f", --avoid {args.avoid}" if args.avoid else "")
              + (", fusion off" if args.no_fusion else "")
              + "".join(f", {k}={os.environ[k]}" for k in ("WGNN_NO_VIEWS", "WGNN_NO_FUSION") if k in os.environ))
    nf = sum(len(v) for v in fails.values())
    print(f"graph_fuzz: {done[0]} graphs (seeds {args.seed}..{args.seed + args.count - 1}) in {dt:.0f} s: "
          f"{stats['pass']} passed, {nf} failed, {stats['unsupported']} unsupported, {stats['invalid']} invalid")
    for sig, ss in sorted(fails.items(), key=lambda kv: -len(kv[1])):
        print(f"  fail {len(ss)}x {sig}: seeds {', '.join(map(str, ss[:12]))}{' ...' if len(ss) > 12 else ''}")
    for msg, n in unsupported.most_common():
        print(f"  unsupported {n}x: {msg}")
    for msg, ss in invalid.items():
        print(f"  invalid {len(ss)}x (the generator's bug): {msg}: seeds {', '.join(map(str, ss[:12]))}")
    for name, sig, ops, detail in saved:
        print(f"  saved {name}: {ops}")
    return 1 if nf or stats["invalid"] else 0


def dump(args):
    import onnx
    model, runs, g = generate(args.dump)
    out = args.out or f"graph_fuzz_{args.dump}.onnx"
    onnx.save(model, out)
    np.savez(out[:-5] + ".npz", **{f"run{i}.{k}": v for i, r in enumerate(runs) for k, v in r.items()})
    print(f"wrote {out} (opset {g.opset}, {len(model.graph.node)} nodes, {len(runs)} runs, "
          f"sizes {g.envs}): {describe(model)}; {'; '.join(g.notes)}")
    print(onnx.helper.printable_graph(model.graph))
    return 0


def main():
    global MAX_STEPS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=1, help="wgnn worker processes")
    ap.add_argument("--save", help="write minimized failures here")
    ap.add_argument("--replay", help="run every saved model in this folder")
    ap.add_argument("--only", help="--replay: these names only (comma-separated)")
    ap.add_argument("--update", action="store_true", help="--replay: rewrite expected.txt")
    ap.add_argument("--timeout", type=int, default=180, help="seconds for one model in wgnn")
    ap.add_argument("--no-fusion", action="store_true", help="wgnn with SessionOptions.fusion off")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--shrink-per-kind", type=int, default=2, help="failures of one kind to minimize")
    ap.add_argument("--shrink-time", type=float, default=300, help="seconds for one minimization")
    ap.add_argument("--shrink-runs", type=int, default=400, help="wgnn runs for one minimization")
    ap.add_argument("--ort-only", action="store_true", help="check the generator against ONNX Runtime alone")
    ap.add_argument("--target", choices=["wgnn", "cli", "ort-all"], default="wgnn",
                    help="what is checked: wgnn's Python package (default), wgnn's CLI (--cli; one process "
                    "per set of inputs), or ONNX Runtime with all its graph optimizations")
    ap.add_argument("--cli", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "wgnn"),
                    help="--target cli: the wgnn executable (default: build/wgnn)")
    ap.add_argument("--dump", type=int, help="write this seed's graph (--out) and print it")
    ap.add_argument("--out")
    ap.add_argument("--progress", type=int, default=0, help="a progress line every N graphs")
    ap.add_argument("--log-dir", default=tempfile.gettempdir(), help="the workers' stderr logs")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--avoid", default="", help="generator features to leave out (comma-separated): "
                    + "; ".join(f"{k}: {v}" for k, v in AVOIDABLE.items()))
    ap.add_argument("--max-steps", type=int, default=MAX_STEPS,
                    help=f"ops and fused patterns in a graph, at most (default {MAX_STEPS}; another value, other graphs)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    MAX_STEPS = args.max_steps
    for a in filter(None, args.avoid.split(",")):
        if a not in AVOIDABLE:
            ap.error(f"--avoid: no feature {a!r} (known: {', '.join(AVOIDABLE)})")
        AVOID.add(a)
    if args.worker:
        return worker_main()
    if args.dump is not None:
        return dump(args)
    if args.replay:
        return replay(args)
    return fuzz(args)


if __name__ == "__main__":
    sys.exit(main())
