"""`wgnn bench` and `wgnn profile` as a person runs them, on a small model
built with onnx.helper (Conv, Relu, MatMul, and a Gather of an embedding by
int64 token ids with a dynamic length): bench's JSON, profile's JSON and
Chrome trace against each other and against the model's known sizes and
FLOPs, random integer inputs within --int-range, and the errors.

usage: bench_profile_cli.py WGNN WORKDIR
"""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


# The profiler's figures are checked per op of the model as written: the
# importer's fusion (the Relu into the Conv) is off here.
ENV = dict(os.environ, WGNN_NO_FUSION="1")


def run(*args):
    p = subprocess.run([WGNN, *args], cwd=WORK, capture_output=True, text=True, timeout=300, env=ENV)
    return p.returncode, p.stdout, p.stderr


rng = np.random.default_rng(0)
W = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
B = rng.standard_normal((8,)).astype(np.float32)
M = rng.standard_normal((16, 16)).astype(np.float32)
E = rng.standard_normal((100, 16)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
     helper.make_node("Relu", ["c"], ["r"]),
     helper.make_node("MatMul", ["r", "M"], ["y"]),
     helper.make_node("Gather", ["E", "ids"], ["e"]),
     helper.make_node("MatMul", ["e", "M"], ["z"])],
    "small",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16]),
     helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "seq"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (B, "B"), (M, "M"), (E, "E"))])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, os.path.join(WORK, "small.onnx"))
SEQ = 8
# The model's work: conv 8x3x3x3 over 16x16, relu over 8x16x16, two matmuls.
FLOPS = {"conv": 2 * 8 * 16 * 16 * 27, "matmul_r": 2 * (8 * 16) * 16 * 16, "matmul_e": 2 * SEQ * 16 * 16}
RELU_BYTES = 2 * 8 * 16 * 16 * 4

# --- bench ---------------------------------------------------------------
rc, out, err = run("bench", "small.onnx", "--shape", f"ids=1x{SEQ}", "--int-range", "0:100", "--runs", "5",
                   "--warmup", "1", "--json")
check(rc == 0, f"bench --json runs (rc {rc}: {err.strip()[-300:]})")
bench = {}
try:
    bench = json.loads(out)
except ValueError as e:
    check(False, f"bench --json prints one JSON object ({e}: {out!r})")
if bench:
    for k in ("load_ms", "first_run_ms", "median_ms", "min_ms", "max_ms", "gpu_ms", "gpu_min_ms", "encode_us",
              "wait_us", "queued_ms"):
        v = bench.get(k)
        check(isinstance(v, (int, float)) and v > 0 and math.isfinite(v), f"bench {k} is a positive number: {v}")
    check(bench.get("min_ms", 0) <= bench.get("median_ms", 0) <= bench.get("max_ms", 0),
          "bench min <= median <= max")
    check(bench.get("runs") == 5 and bench.get("warmup") == 1, "bench reports its runs and warm-up")
    check(bench.get("dispatches") == 5, f"bench counts 5 dispatches (conv, relu, 2 matmul, gather): "
                                        f"{bench.get('dispatches')}")
    check(bench.get("model") == "small.onnx" and bench.get("adapter"), "bench names the model and adapter")
    check(bench.get("inputs") == {"x": {"dtype": "float32", "shape": [1, 3, 16, 16]},
                                  "ids": {"dtype": "int64", "shape": [1, SEQ]}},
          f"bench lists the inputs it made: {bench.get('inputs')}")

# --outputs: only z (Gather, MatMul) runs; y's conv, relu and matmul are left out.
rc, out, err = run("bench", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "3", "--json", "--outputs", "z")
j = json.loads(out) if rc == 0 else {}
check(j.get("outputs") == ["z"] and j.get("dispatches") == 2 and bench.get("outputs") == "all",
      f"bench --outputs z runs z's 2 dispatches alone and says so (rc {rc}: {j.get('outputs')}, "
      f"{j.get('dispatches')}; {err.strip()[-200:]})")
rc, out, err = run("bench", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "3", "--outputs", "w")
check(rc == 1 and "'w' is not an output of the model" in err, f"bench --outputs w: an error naming it ({err.strip()})")
rc, out, err = run("bench", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "3")
check(rc == 0 and "steady" in out and "median" in out and "GPU" in out and "encode" in out,
      f"bench prints a readable summary (rc {rc}): {out!r} {err[-300:]!r}")

# A fixed declared size overridden by --shape: the model runs at that size.
rc, out, err = run("bench", "small.onnx", "--shape", "ids=1x4", "--shape", "x=1x3x24x16", "--runs", "2", "--json")
j = json.loads(out) if rc == 0 else {}
check(rc == 0 and j.get("inputs", {}).get("x", {}).get("shape") == [1, 3, 24, 16],
      f"--shape runs a model declared at 16x16 at 24x16 (rc {rc}: {err.strip()[-300:]})")

# --- random integer inputs stay in --int-range ----------------------------
# All ids 7: z is row 7 of E times M (numpy reference).
rc, out, err = run("run", "small.onnx", "--shape", f"ids=1x{SEQ}", "--int-range", "7:8", "--output-dir", "out")
check(rc == 0, f"run --int-range 7:8 (rc {rc}: {err.strip()[-300:]})")
if rc == 0:
    z = np.load(os.path.join(WORK, "out", "z.npy"))
    want = np.tile(E[7] @ M, (1, SEQ, 1))
    check(z.shape == (1, SEQ, 16) and np.allclose(z, want, rtol=1e-4, atol=1e-4),
          f"ids drawn from [7, 8) gather row 7: max error {np.abs(z - want).max() if z.shape == want.shape else z.shape}")

# --- run-time checks ----------------------------------------------------------
# ids 100..101 are out of range for E's 100 rows: checked (the default) the run
# fails naming the node; --unchecked clamps to row 99, as before the checks.
rc, out, err = run("run", "small.onnx", "--shape", f"ids=1x{SEQ}", "--int-range", "100:101", "--output-dir", "oob")
check(rc != 0 and "index 100 is out of range" in err, f"run with ids out of range fails (rc {rc}: {err.strip()[-300:]})")
rc, out, err = run("run", "small.onnx", "--shape", f"ids=1x{SEQ}", "--int-range", "100:101", "--output-dir", "oob",
                   "--unchecked")
check(rc == 0, f"run --unchecked (rc {rc}: {err.strip()[-300:]})")
if rc == 0:
    z = np.load(os.path.join(WORK, "oob", "z.npy"))
    check(np.allclose(z, np.tile(E[99] @ M, (1, SEQ, 1)), rtol=1e-4, atol=1e-4), "--unchecked clamps to the last row")
rc, out, err = run("bench", "small.onnx", "--shape", f"ids=1x{SEQ}", "--int-range", "0:100", "--runs", "2",
                   "--warmup", "1", "--json", "--unchecked")
check(rc == 0 and json.loads(out.strip().splitlines()[-1]).get("checked") is False,
      f"bench --unchecked says so in its JSON (rc {rc}: {err.strip()[-300:]})")

# --- float16 mode ------------------------------------------------------------
# run --fp16: the same outputs (float32, as the model declares) within float16
# accuracy; bench and profile --fp16 count the entry and exit casts.
rc, out, err = run("run", "small.onnx", "--shape", f"ids=1x{SEQ}", "--int-range", "7:8", "--output-dir", "out16",
                   "--fp16")
check(rc == 0, f"run --fp16 (rc {rc}: {err.strip()[-300:]})")
if rc == 0:
    z = np.load(os.path.join(WORK, "out16", "z.npy"))
    want = np.tile(E[7] @ M, (1, SEQ, 1))
    err16 = np.abs(z.astype(np.float64) - want).max() if z.shape == want.shape else float("inf")
    check(z.dtype == np.float32 and err16 <= 1e-2 * np.abs(want).max() + 1e-3,
          f"run --fp16 writes float32 within float16 accuracy: dtype {z.dtype}, max error {err16:.3g}")
    y16 = np.load(os.path.join(WORK, "out16", "y.npy"))
    y32 = np.load(os.path.join(WORK, "out", "y.npy"))
    e = np.abs(y16.astype(np.float64) - y32).max()
    check(y16.dtype == np.float32 and 0 < e <= 1e-2 * np.abs(y32).max() + 1e-3,
          f"run --fp16: conv, relu, matmul within float16 accuracy of float32 (and not equal): {e:.3g}")
rc, out, err = run("bench", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "2", "--warmup", "0", "--json",
                   "--fp16")
j = json.loads(out) if rc == 0 else {}
check(rc == 0 and j.get("precision") == "fp16" and j.get("dispatches") == 8,
      f"bench --fp16 runs: precision fp16, 5 dispatches + 1 input cast + 2 output casts: {j.get('dispatches')} "
      f"(rc {rc}: {err.strip()[-300:]})")
rc, out, err = run("profile", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "1", "--json", "--fp16")
j = json.loads(out) if rc == 0 else {}
casts = {g["op"]: g["count"] for g in j.get("by_op", [])}.get("aten._to_copy.default")
check(rc == 0 and casts == 3, f"profile --fp16 shows the 3 casts: {casts} (rc {rc}: {err.strip()[-300:]})")

# --- profile -----------------------------------------------------------------
trace_path = os.path.join(WORK, "trace.json")
rc, out, err = run("profile", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "3", "--trace", "trace.json",
                   "--json")
check(rc == 0, f"profile --trace --json runs (rc {rc}: {err.strip()[-300:]})")
prof, trace = {}, {}
try:
    prof = json.loads(out)
    with open(trace_path) as f:
        trace = json.load(f)
except (ValueError, OSError) as e:
    check(False, f"profile writes valid JSON and a valid trace ({e})")
if prof and trace:
    events = trace.get("traceEvents", [])
    n = prof["dispatches"]
    check(n == 5 and len(events) == n, f"one trace event per dispatch: {len(events)} events, {n} dispatches")
    check(all(e.get("ph") == "X" and e.get("dur", -1) >= 0 and "ts" in e for e in events),
          "every event is a complete ('X') event with ts and dur")
    check(all({"op", "kernel", "bytes"} <= set(e.get("args", {})) for e in events),
          "every event carries op, kernel and bytes")
    total = prof["total_ms"]
    check(total > 0 and prof["one_pass_gpu_ms"] > 0, f"profile totals are positive: {total}, "
                                                     f"one pass {prof['one_pass_gpu_ms']}")
    check(math.isclose(sum(e["dur"] for e in events) / 1000, total, rel_tol=1e-9),
          "the trace's durations sum to the total")
    per_op = {}
    for e in events:
        per_op[e["args"]["op"]] = per_op.get(e["args"]["op"], 0) + e["dur"] / 1000
    by_op = {g["op"]: g for g in prof["by_op"]}
    check(set(per_op) == set(by_op) and all(math.isclose(per_op[k], by_op[k]["ms"], rel_tol=1e-9) for k in per_op),
          f"the trace's per-op sums equal profile's by_op: {per_op} vs { {k: g['ms'] for k, g in by_op.items()} }")
    check(math.isclose(sum(g["ms"] for g in prof["by_op"]), total, rel_tol=1e-9) and
          math.isclose(sum(g["ms"] for g in prof["by_kernel"]), total, rel_tol=1e-9),
          "by_op and by_kernel each sum to the total")
    check(math.isclose(sum(g["percent"] for g in prof["by_op"]), 100, rel_tol=1e-9), "percentages sum to 100")
    check(sum(g["count"] for g in prof["by_op"]) == n, "dispatch counts sum to the dispatches")
    ms = [g["ms"] for g in prof["by_op"]]
    check(ms == sorted(ms, reverse=True), "ops are sorted by time, descending")
    check(by_op.get("aten.matmul.default", {}).get("count") == 2, "the two MatMuls are one op with 2 dispatches")
    check(by_op.get("aten.convolution.default", {}).get("flops") == FLOPS["conv"],
          f"convolution FLOPs are 2 x outputs x taps: {by_op.get('aten.convolution.default', {}).get('flops')}")
    check(by_op.get("aten.matmul.default", {}).get("flops") == FLOPS["matmul_r"] + FLOPS["matmul_e"],
          f"matmul FLOPs are 2MNK: {by_op.get('aten.matmul.default', {}).get('flops')}")
    relu = by_op.get("aten.relu.default", {})
    check(relu.get("bytes") == RELU_BYTES and relu.get("tflops") is None,
          f"relu binds its input and output ({RELU_BYTES} bytes) and has no FLOP figure: {relu}")
    g = by_op.get("aten.convolution.default", {})
    check(g.get("ms", 0) > 0 and math.isclose(g["gbps"], g["bytes"] / (g["ms"] * 1e6), rel_tol=1e-9) and
          math.isclose(g["tflops"], g["flops"] / (g["ms"] * 1e9), rel_tol=1e-9), "GB/s and TFLOP/s follow from ms")
    check(any(e["args"].get("flops") for e in events), "dispatches that know their FLOPs carry them in the trace")

rc, out, err = run("profile", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "2", "--top", "2")
# Which two ops lead depends on timing (lavapipe shares the CPU with the
# rest of the suite): check the cut, not the order.
op_rows = [l.split()[0] for l in out.splitlines() if l.startswith("aten.")]
check(rc == 0 and len(op_rows) == 2 and set(op_rows) <= {"aten.convolution.default", "aten.relu.default",
                                                          "aten.matmul.default", "aten.index_select.default"}
      and "(2 more)" in out and "gpu_ms" in out,
      f"profile prints tables cut at --top and says totals differ from bench's gpu_ms: {out!r} {err[-300:]!r}")

# --- errors -----------------------------------------------------------------
# --- the first run and the pipeline cache on disk ---------------------------
# bench --json breaks the first run down; a second process with the cache the
# first one wrote compiles nothing new; damaged entries are ignored.
CACHE = os.path.join(WORK, "cache")


def bench_cached(*extra, env=None):
    e = dict(ENV, WGNN_CACHE_DIR=CACHE, **(env or {}))
    p = subprocess.run([WGNN, "bench", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "2", "--warmup", "0",
                        "--json", *extra], cwd=WORK, capture_output=True, text=True, timeout=300, env=e)
    j = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
    bench_cached.last = j
    return p.returncode, j.get("first_run", {}), p.stderr


rc, f1, err = bench_cached()
check(bench_cached.last.get("prefetched_pipelines") == 0, "a first process has no pipeline list to ask for")
check(rc == 0, f"bench with a cold pipeline cache (rc {rc}: {err.strip()[-300:]})")
for k in ("ms", "build_ms", "wgsl_ms", "shader_module_ms", "pipeline_ms", "bind_group_ms", "run_ms", "wait_ms"):
    check(isinstance(f1.get(k), (int, float)) and f1.get(k) >= 0, f"first_run.{k} is a number: {f1.get(k)}")
d1 = f1.get("disk_cache", {})
check(f1.get("pipelines_created", 0) > 0 and f1.get("pipelines_from_disk") == 0 and d1.get("stores", 0) > 0,
      f"cold: pipelines compiled and stored: {f1.get('pipelines_created')} created, "
      f"{f1.get('pipelines_from_disk')} from disk, {d1.get('stores')} blobs stored")
check(f1.get("pipeline_requests") == f1.get("pipelines_created", 0) + f1.get("pipelines_reused", 0),
      f"pipeline requests = created + reused: {f1.get('pipeline_requests')}")
# The blobs alone: the pipelines asked for as the first run reaches them.
rc, f2, err = bench_cached(env={"WGNN_PREFETCH_PIPELINES": "0"})
d2 = f2.get("disk_cache", {})
check(rc == 0 and f2.get("pipelines_created", 0) > 0 and f2.get("pipelines_from_disk") == f2.get("pipelines_created")
      and d2.get("stores") == 0 and d2.get("misses") == 0,
      f"warm: a second process compiles nothing new: {f2.get('pipelines_from_disk')} of "
      f"{f2.get('pipelines_created')} from disk, {d2.get('stores')} stored, {d2.get('misses')} missed")
check(bench_cached.last.get("prefetched_pipelines") == 0, "WGNN_PREFETCH_PIPELINES=0 asks for none at load")
# By default the list the first process left is asked for at load: the first
# run then creates no pipeline, and every one came from the disk.
rc, f2b, err = bench_cached()
d2b = f2b.get("disk_cache", {})
asked = bench_cached.last.get("prefetched_pipelines", 0)
check(rc == 0 and asked == f1.get("pipelines_created") and f2b.get("pipelines_created") == 0
      and f2b.get("pipelines_from_disk") == asked and d2b.get("stores") == 0 and d2b.get("misses") == 0,
      f"warm with the list: {asked} pipelines asked for at load (the first process compiled "
      f"{f1.get('pipelines_created')}), {f2b.get('pipelines_created')} created by the first run, "
      f"{f2b.get('pipelines_from_disk')} from disk, {d2b.get('stores')} stored, {d2b.get('misses')} missed")
blobs = [os.path.join(r, n) for r, _, ns in os.walk(CACHE) for n in ns if n.endswith(".blob")]
for b in blobs:
    with open(b, "r+b") as fh:
        fh.truncate(os.path.getsize(b) // 2)
rc, f3, err = bench_cached()
d3 = f3.get("disk_cache", {})
# (The folder also holds the blobs of Dawn's own timestamp pipeline, which
# bench's timed runs make after the first run: not among the first run's.)
check(rc == 0 and len(blobs) >= d1.get("stores", 0) > 0 and d3.get("corrupt", 0) >= d1.get("stores", 0)
      and d3.get("stores", 0) > 0 and err.count("damaged") == 1,
      f"truncated entries are ignored (warned once), compiled again and replaced: rc {rc}, "
      f"{d3.get('corrupt')} damaged ({len(blobs)} truncated), {d3.get('stores')} stored")
rc, f4, err = bench_cached(env={"WGNN_PIPELINE_CACHE": "0"})
check(rc == 0 and f4.get("disk_cache", {}).get("enabled") is False and f4.get("pipelines_from_disk") == 0,
      f"WGNN_PIPELINE_CACHE=0: no disk cache ({f4.get('disk_cache')})")
rc, out, err = run("profile", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "2", "--json")
check(rc == 0 and "pipeline_ms" in json.loads(out).get("first_run", {}), "profile --json has the first-run breakdown")
rc, out, err = run("profile", "small.onnx", "--shape", f"ids=1x{SEQ}", "--runs", "2")
check(rc == 0 and "first run" in out and "pipelines" in out and "disk cache" in out,
      f"profile prints the first-run breakdown: {out[:400]!r}")

for args, says in (
        (["bench", "small.onnx"], "--shape ids="),
        (["bench", "small.onnx", "--shape", "ids=8"], "the model declares rank 2"),
        (["bench", "small.onnx", "--shape", "tokens=1x8"], "no input 'tokens'"),
        (["bench", "small.onnx", "--shape", "ids=1x8", "--int-range", "9:3"], "LO must be below HI"),
        (["bench", "small.onnx", "--shape", "ids=1x8", "--runs", "0"], "--runs 0"),
        (["bench", "missing.onnx"], "no such file"),
        (["profile", "small.onnx", "--shape", "ids=1x8", "--trace", "nowhere/t.json"], "does not exist"),
):
    rc, out, err = run(*args)
    check(rc != 0 and says in err and "wgnn: error:" in err, f"{' '.join(args[1:])} fails saying '{says}': "
                                                            f"rc {rc}, {err.strip()!r}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
