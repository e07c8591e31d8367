"""ExecuTorch's own WebGPU op tests, run through wgnn.

ExecuTorch ships its WebGPU backend's op-test cases with the executorch
wheel (executorch/backends/webgpu/test/op_tests/cases.py) and a generator
that exports each case to a .pte (lowered with the Vulkan partitioner, as
the WebGPU backend is) and writes its inputs and a float64 PyTorch golden as
raw little-endian files, listed in manifest.json. scripts/models/
pte_fixtures.py runs that generator; its output is committed in
tests/data/pte/op_tests/.

Each case's .pte is loaded by wgnn.InferenceSession (wgnn's .pte front end),
run on the given inputs, and compared with the golden within the case's own
atol/rtol (|wgnn - golden| <= atol + rtol * |golden|, as
torch.testing.assert_close). Every case has the result tests/pte/
op_tests_expected.txt gives it: pass, fail or unsupported (with the reason,
the error wgnn gave); a case whose result differs fails the test, so a fix
or a regression shows. docs/CONFORMANCE.md lists the cases that do not pass.

    .venv/bin/python tests/pte/executorch_op_tests.py DATA_DIR [--expected F] [--write-expected F]
    python3 tests/pte/executorch_op_tests.py DATA_DIR --cli build/wgnn ...   # through `wgnn run`, no package

--cli runs each case through the CLI instead of the Python package (on a
machine where only the CLI is, the GPU machine).
"""

import argparse
import json
import os
import sys

import subprocess
import tempfile

import numpy as np

wgnn = None  # the package, imported unless --cli is given

DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.int8, "int8": np.int8, "int64": np.int64}


def load_raw(path, dtype, shape):
    a = np.fromfile(path, dtype=np.dtype(DTYPES[dtype]).newbyteorder("<"))
    a = a.reshape(shape)
    if dtype == "bool":
        a = a.astype(bool)
    return a


def one_line(msg):
    msg = " ".join(str(msg).split())
    return msg if len(msg) < 400 else msg[:397] + "..."


def run_case(data, pte, entries, sessions):
    """The outcome of every entry of one .pte: (status, detail) by case name."""
    r = _run_case(data, pte, entries, sessions)
    # The reasons name the file without the data folder.
    return {k: (st, why.replace(os.path.join(data, ""), "")) for k, (st, why) in r.items()}


class _Input:
    def __init__(self, name, type_):
        self.name, self.type = name, type_


class CliSession:
    """wgnn.InferenceSession's calls this script makes, through `wgnn run`."""

    TYPES = {"float32": "tensor(float)", "int32": "tensor(int32)", "int64": "tensor(int64)", "bool": "tensor(bool)",
             "int8": "tensor(int8)", "uint8": "tensor(uint8)", "float16": "tensor(float16)"}

    def __init__(self, cli, path, n_inputs, dtypes):
        self.cli, self.path = cli, path
        self._inputs = [_Input(f"input_{i}", self.TYPES.get(dtypes[i], "tensor(float)")) for i in range(n_inputs)]

    def get_inputs(self):
        return self._inputs

    def run(self, _names, feeds):
        with tempfile.TemporaryDirectory() as d:
            args = [self.cli, "run", self.path, "--output-dir", d]
            for name, a in feeds.items():
                np.save(os.path.join(d, f"in_{name}.npy"), a)
                args += ["--input", f"{name}={os.path.join(d, f'in_{name}.npy')}"]
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode != 0:
                msg = (r.stderr.strip().splitlines() or ["wgnn run failed"])[-1]
                kind = "Unsupported" if "without a mapping" in msg or "not supported" in msg else "Error"
                raise type(kind, (Exception,), {})(msg)
            outs, k = [], 0
            while os.path.exists(os.path.join(d, f"output_{k}.npy")):
                outs.append(np.load(os.path.join(d, f"output_{k}.npy")))
                k += 1
            return outs


CLI = None


def _run_case(data, pte, entries, sessions):
    try:
        s = sessions.get(pte)
        if s is None and CLI:
            s = CliSession(CLI, os.path.join(data, pte), len(entries[0]["inputs"]),
                           [i["dtype"] for i in entries[0]["inputs"]])
        elif s is None:
            s = wgnn.InferenceSession(os.path.join(data, pte))
            sessions.clear()  # one at a time: the GPU memory of the last one goes
            sessions[pte] = s
    except Exception as e:  # the error wgnn gives is the reason listed
        kind = "unsupported" if type(e).__name__ == "Unsupported" else "fail"
        return {e_["case"]: (kind, one_line(f"{type(e).__name__}: {e}")) for e_ in entries}
    first = entries[0]
    names = [i.name for i in s.get_inputs()]
    if len(names) != len(first["inputs"]):
        return {e_["case"]: ("fail", f"the .pte takes {len(names)} inputs, the manifest gives {len(first['inputs'])}")
                for e_ in entries}
    feeds = {}
    for name, spec, meta in zip(names, first["inputs"], s.get_inputs()):
        a = load_raw(os.path.join(data, spec["path"]), spec["dtype"], spec["shape"])
        want = {"tensor(float)": np.float32, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
                "tensor(bool)": bool, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
                "tensor(float16)": np.float16}.get(meta.type)
        feeds[name] = a.astype(want) if want is not None else a
    try:
        outs = s.run(None, feeds)
    except Exception as e:
        kind = "unsupported" if type(e).__name__ == "Unsupported" else "fail"
        prefix = "" if kind == "unsupported" else "run: "
        return {e_["case"]: (kind, one_line(f"{prefix}{type(e).__name__}: {e}")) for e_ in entries}
    result = {}
    for e_ in entries:
        g = e_["golden"]
        want = load_raw(os.path.join(data, g["path"]), g["dtype"], g["shape"])
        k = g.get("output_index", 0)
        if k >= len(outs):
            result[e_["case"]] = ("fail", f"output {k} missing: wgnn returned {len(outs)}")
            continue
        got = np.asarray(outs[k])
        if tuple(got.shape) != tuple(want.shape):
            result[e_["case"]] = ("fail", f"shape {list(got.shape)}, golden {list(want.shape)}")
            continue
        if g["dtype"] in ("bool", "int8", "int64"):
            bad = int(np.count_nonzero(got.astype(np.int64) != want.astype(np.int64)))
            result[e_["case"]] = ("pass", "") if bad == 0 else ("fail", f"{bad} of {want.size} values differ")
            continue
        got = got.astype(np.float64)
        ref = want.astype(np.float64)
        tol = e_["atol"] + e_["rtol"] * np.abs(ref)
        err = np.abs(got - ref)
        nan_ok = np.isnan(got) == np.isnan(ref)
        ok = bool(np.all(nan_ok) and np.all((err <= tol) | (np.isnan(got) & np.isnan(ref))))
        if ok:
            result[e_["case"]] = ("pass", "")
        else:
            worst = float(np.nanmax(err - tol)) if err.size else 0.0
            n_bad = int(np.count_nonzero(~((err <= tol) | (np.isnan(got) & np.isnan(ref)))))
            result[e_["case"]] = ("fail", f"{n_bad} of {ref.size} values outside atol {e_['atol']} rtol "
                                          f"{e_['rtol']} (worst by {worst:.3g})")
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--expected")
    ap.add_argument("--write-expected")
    ap.add_argument("--min-cases", type=int, default=1)
    ap.add_argument("--cli", help="run through this wgnn CLI instead of the Python package")
    args = ap.parse_args()
    global wgnn, CLI
    if args.cli:
        CLI = args.cli
    else:
        import wgnn as package

        wgnn = package
    with open(os.path.join(args.data, "manifest.json")) as f:
        manifest = json.load(f)
    # The entries of one run: one .pte, one set of inputs (a model with
    # several outputs has an entry per output; a dynamic-shape program has
    # runs at several sizes, through one session). Runs go in the
    # manifest's order, so a program with state (mutable buffers: a KV
    # cache) takes its steps in order through one session (not with --cli,
    # where every run is a process of its own and starts from the initial
    # state).
    by_run = {}
    for e in manifest:
        by_run.setdefault((e["pte"], tuple(i["path"] for i in e["inputs"])), []).append(e)
    results = {}
    sessions = {}
    for (pte, _), entries in by_run.items():
        for case, r in run_case(args.data, pte, entries, sessions).items():
            results[f"{entries[0]['op']}/{case}"] = r
    counts = {}
    for st, _ in results.values():
        counts[st] = counts.get(st, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"executorch op tests: {len(results)} cases: {summary}")
    if len(results) < args.min_cases:
        print(f"error: {len(results)} cases, at least {args.min_cases} expected", file=sys.stderr)
        return 1
    if args.write_expected:
        with open(args.write_expected, "w") as f:
            f.write("# ExecuTorch's WebGPU op tests through wgnn: the result each case must have.\n")
            f.write(f"# {summary}. Regenerate with tests/pte/executorch_op_tests.py --write-expected.\n")
            for name in sorted(results):
                st, why = results[name]
                f.write(f"{st} {name}" + (f": {why}" if why else "") + "\n")
    if not args.expected:
        return 0
    expected = {}
    with open(args.expected) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            st, rest = line.rstrip("\n").split(" ", 1)
            name = rest.split(": ", 1)[0]
            expected[name] = st
    bad = []
    for name, (st, why) in sorted(results.items()):
        want = expected.get(name)
        if want is None:
            bad.append(f"{name}: {st} ({why}), not in the expected list")
        elif want != st:
            bad.append(f"{name}: {st} ({why}), expected {want}")
    for name in sorted(set(expected) - set(results)):
        bad.append(f"{name}: expected {expected[name]}, not in the manifest")
    for b in bad:
        print("MISMATCH " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
