"""The ONNX backend node test suite of the installed `onnx` wheel (every
opset up to the newest it knows; the cases are built in memory by
onnx.backend.test.loader) through wgnn.backend and through
onnxruntime.backend, on the same cases, with the suite's own comparison
(onnx.backend.test.runner.Runner.assert_similar_outputs, the cases' rtol and
atol). One process and one device for all cases.

A wgnn case ends as pass, skip (wgnn.Unsupported: an op, dtype or opset
wgnn does not implement; the reason is its message) or fail (any other
error, or outputs unlike the reference). ONNX Runtime's cases: skip on its
NOT_IMPLEMENTED errors, on an opset or IR version newer than it knows and
on dtypes its Python binding cannot take; fail otherwise. Numpy scalars
among the inputs are given as 0-d arrays to both (ONNX Runtime takes
arrays only).

Every wgnn case's result is pinned in tests/python/backend_expected.txt
(`pass NAME`, `skip NAME: reason`, `fail NAME: reason` for a known failure):
the job fails when a case ends otherwise than pinned, when a case is not
listed or a listed case is gone, and when wgnn fails a case not pinned as a
known failure. `--write` rewrites the file from this run (review the diff):
a case still failing keeps its pinned reason, and with --only the other
cases keep theirs.

usage: backend_suite.py [--expected FILE] [--write] [--only SUBSTRING] [--no-ort] [--json OUT]
"""
import argparse
import collections
import json
import os
import re
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_EXPECTED = os.path.join(HERE, "backend_expected.txt")


def load_cases():
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators' own overflow warnings
        cases = load_model_tests(kind="node")
    return sorted(cases, key=lambda c: c.name)


def normalize(value):
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)  # a numpy scalar as the 0-d array it stands for (ONNX Runtime takes arrays only)
    return value


def one_line(text):
    return " ".join(str(text).split())


def run_case(backend, case, is_skip):
    """('pass' | 'skip' | 'fail', reason)."""
    from onnx.backend.test.runner import Runner

    try:
        rep = backend.prepare(case.model, "CPU")
        for inputs, ref_outputs in case.data_sets:
            outputs = rep.run([normalize(x) for x in inputs])
            Runner.assert_similar_outputs([normalize(y) for y in ref_outputs], list(outputs), case.rtol, case.atol)
    except AssertionError as e:
        return "fail", "outputs differ: " + one_line(e)[:300]
    except Exception as e:  # noqa: BLE001 (every error is reported, none is hidden)
        if is_skip(e):
            return "skip", one_line(e)
        return "fail", f"{type(e).__name__}: {one_line(e)[:300]}"
    return "pass", ""


def category(reason):
    """A skip's reason, grouped: opset, dtype, value kind, op, other."""
    m = re.search(r"uses ONNX opset (\d+); supported: (\d+) to (\d+)", reason)
    if m:
        return f"opset {m.group(1)} (wgnn takes {m.group(2)} to {m.group(3)})"
    if "imports no ONNX-domain opset" in reason:
        m = re.search(r"only '([^']+)'", reason)
        return f"domain {m.group(1) if m else '?'} only"
    m = re.search(r"element type (\w+) \(\d+\) is not supported", reason)
    if m:
        return f"dtype {m.group(1)}"
    m = re.search(r"input dtype (\w+) is not supported", reason)
    if m:
        return f"dtype {m.group(1)} (an op's input)"
    if "is not a tensor" in reason:
        return "sequence, map or optional values"
    ops = re.findall(r"\((\w+), opset \d+\): operator not supported", reason)
    if ops:
        return "op " + ", ".join(sorted(set(ops)))
    m = re.search(r"\((\w+), opset \d+\): (.*)", reason)
    if m:
        return f"{m.group(1)}: {m.group(2)[:80]}"
    return reason[:100]


def read_expected(path):
    expected = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            status, rest = line.split(" ", 1)
            name, _, reason = rest.partition(": ")
            expected[name] = (status, reason)
    return expected


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--expected", default=DEFAULT_EXPECTED)
    ap.add_argument("--write", action="store_true", help="rewrite the expected file from this run")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime's run")
    ap.add_argument("--json", help="write every case's results to this file")
    args = ap.parse_args()

    import onnx

    import wgnn
    import wgnn.backend

    cases = load_cases()
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    info = wgnn.get_device_info()
    print(f"onnx {onnx.__version__}: {len(cases)} node cases; wgnn {wgnn.__version__} on {info['adapter']} "
          f"({info['driver_source']})", flush=True)

    results = {"wgnn": {}, "onnxruntime": {}}
    t0 = time.monotonic()
    for c in cases:
        results["wgnn"][c.name] = run_case(wgnn.backend, c, lambda e: isinstance(e, wgnn.Unsupported))
    wgnn_s = time.monotonic() - t0
    ort_s = 0.0
    if not args.no_ort:
        import onnxruntime
        import onnxruntime.backend

        onnxruntime.set_default_logger_severity(3)  # errors only: its warnings are about the test models

        def ort_skip(e):
            # What ONNX Runtime does not implement: an op or kernel, an opset
            # or IR version newer than it knows, a dtype its Python binding
            # cannot take.
            text = str(e)
            return (type(e).__name__ == "NotImplemented" or "NOT_IMPLEMENTED" in text
                    or "Unsupported model IR version" in text or "ValidateOpsetForDomain" in text
                    or "can't be converted to MLDataType" in text)

        t0 = time.monotonic()
        for c in cases:
            results["onnxruntime"][c.name] = run_case(onnxruntime.backend, c, ort_skip)
        ort_s = time.monotonic() - t0

    def counts(r):
        n = collections.Counter(s for s, _ in r.values())
        return f"{n['pass']} passed, {n['fail']} failed, {n['skip']} skipped"

    w = results["wgnn"]
    skips = collections.defaultdict(list)
    for name, (s, reason) in w.items():
        if s == "skip":
            skips[category(reason)].append(name)
    print("\nwgnn's skips by reason (cases):")
    for reason, names in sorted(skips.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(names):4d}  {reason}")
    # The operators the suite's models use (their main graphs, the default
    # domain) that wgnn does not map at all, whatever the case's opset.
    known_ops = set(wgnn.supported_ops())
    missing = collections.defaultdict(list)
    for c in cases:
        for op in sorted({n.op_type for n in c.model.graph.node if n.domain in ("", "ai.onnx")} - known_ops):
            missing[op].append(c.name)
    print(f"\noperators of the suite wgnn does not map ({len(missing)}; cases using each):")
    print("  " + ", ".join(f"{op} ({len(names)})" for op, names in sorted(missing.items())))
    fails = [(n, r) for n, (s, r) in w.items() if s == "fail"]
    if fails:
        print("\nwgnn's failures:")
        for n, r in fails:
            print(f"  {n}: {r}")
    if results["onnxruntime"]:
        both = [n for n in w if w[n][0] == "pass" and results["onnxruntime"][n][0] == "pass"]
        only_ort = [n for n in w if w[n][0] != "pass" and results["onnxruntime"][n][0] == "pass"]
        only_wgnn = [n for n in w if w[n][0] == "pass" and results["onnxruntime"][n][0] != "pass"]
        print(f"\npassed by both: {len(both)}; by ONNX Runtime only: {len(only_ort)}; by wgnn only: {len(only_wgnn)}")
        for n in only_wgnn:
            print(f"  wgnn only: {n} (onnxruntime: {results['onnxruntime'][n][0]}: {results['onnxruntime'][n][1][:160]})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)

    problems = []
    pinned = read_expected(args.expected) if os.path.exists(args.expected) else {}
    if args.write:
        # A case that still fails keeps its pinned reason (why it cannot
        # pass, written by hand); with --only, the other cases keep their lines.
        old = read_expected(args.expected) if os.path.exists(args.expected) else {}
        rows = dict(old) if args.only else {}
        for name, (s, reason) in w.items():
            if s == "fail" and old.get(name, ("",))[0] == "fail":
                reason = old[name][1]
            rows[name] = (s, reason)
        with open(args.expected, "w") as f:
            f.write(f"# wgnn's result on each ONNX backend node case of onnx {onnx.__version__} "
                    "(tests/python/backend_suite.py --write)\n")
            for name, (s, reason) in sorted(rows.items()):
                f.write(f"{s} {name}: {reason}\n" if reason else f"{s} {name}\n")
        print(f"\nwrote {args.expected}")
    else:
        expected = read_expected(args.expected)
        for name, (s, reason) in sorted(w.items()):
            if name not in expected:
                problems.append(f"{name}: not in {os.path.basename(args.expected)} (now {s}: {reason})")
            elif expected[name][0] != s:
                problems.append(f"{name}: expected {expected[name][0]}, now {s}{': ' + reason if reason else ''}")
        if not args.only:
            for name in sorted(set(expected) - set(w)):
                problems.append(f"{name}: listed but no longer in the suite")
    for n, r in fails:
        if pinned.get(n, ("",))[0] == "fail":  # a known failure, with its reason
            continue
        problems.append(f"{n}: fails and is not pinned as a known failure")

    print(f"\ntime: wgnn {wgnn_s:.0f} s, onnxruntime {ort_s:.0f} s")
    for p in problems:
        print(f"PROBLEM {p}")
    # ONNX Runtime's counts first: the last line is wgnn's, the job's own.
    if results["onnxruntime"]:
        print(f"onnxruntime: {counts(results['onnxruntime'])}")
    known = sum(1 for s, _ in w.values() if s == "fail")
    print(f"wgnn: {counts(w)}" + (f" ({known} known failures, pinned)" if known else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
