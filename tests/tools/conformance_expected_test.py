"""`wgnn conformance --expected / --write-expected / --min-cases` on three
small cases written here: a passing Relu, an unsupported op, and a Relu
whose data set lacks its output file. The run must fail for a case off its
line (naming it, its line and its new result), an unlisted case, a listed
case that did not run, too few cases, and the missing output file; and pass
with the list --write-expected writes.

usage: conformance_expected_test.py WGNN WORKDIR"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WGNN, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
shutil.rmtree(WORK, ignore_errors=True)
CASES = os.path.join(WORK, "cases")
failures = []


def case(name, op, outputs=True):
    d = os.path.join(CASES, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(d, "model.onnx"))
    x = np.array([-1, 0, 2, -3], np.float32)
    with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    if outputs:
        with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.maximum(x, 0), "y").SerializeToString())


case("test_relu", "Relu")
case("test_unsupported", "StringNormalizer")  # an op wgnn does not have
case("test_no_output_file", "Relu", outputs=False)


def run(*args):
    r = subprocess.run([WGNN, "conformance", *args, CASES], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(rc_want, says, *args, what):
    rc, out = run(*args)
    if rc != rc_want or any(s not in out for s in says):
        failures.append(f"{what}: exit {rc} (expected {rc_want}), output lacks one of {says}:\n{out}")


def listing(lines):
    path = os.path.join(WORK, "expected.txt")
    with open(path, "w") as f:
        f.write("# a comment\n" + "\n".join(lines) + "\n")
    return path


# A data set with fewer output files than model outputs is a failure.
expect(1, ["FAIL        cases/test_no_output_file: test_data_set_0: 0 output files for 1 model outputs",
           "1 passed, 1 failed, 1 skipped"], what="the missing output file")
# --write-expected writes every case's line, and the run passes against it.
written = os.path.join(WORK, "written.txt")
rc, out = run("--write-expected", written)
lines = [l for l in open(written).read().splitlines() if not l.startswith("#")] if os.path.exists(written) else []
want = ["fail cases/test_no_output_file: test_data_set_0: 0 output files for 1 model outputs",
        "pass cases/test_relu"]
if lines[:2] != want or len(lines) != 3 or not lines[2].startswith("skip cases/test_unsupported: "):
    failures.append(f"--write-expected wrote {lines}")
expect(0, ["1 passed, 1 failed, 1 skipped (1 of the failures expected)"], "--expected", written,
       what="the list --write-expected wrote")
skip = lines[2] if len(lines) == 3 else "skip cases/test_unsupported: ?"
fail = want[0]
# A pass that became a skip (or any other move) is named with its line.
expect(1, ["cases/test_unsupported: expected pass, now skip"], "--expected",
       listing([fail, "pass cases/test_relu", "pass cases/test_unsupported"]), what="a case that moved")
# An unlisted case, and a listed case that did not run.
expect(1, ["cases/test_relu: not listed, now pass", "cases/test_gone: expected pass, but no such case ran",
           "scripts/conformance-expected"], "--expected", listing([fail, skip, "pass cases/test_gone"]),
       what="unlisted and absent cases")
# Too few cases.
expect(1, ["only 3 cases ran, fewer than --min-cases 4"], "--expected", written, "--min-cases", "4",
       what="--min-cases")
# A malformed line.
expect(1, ["expected 'pass NAME'"], "--expected", listing(["passes cases/test_relu"]), what="a malformed line")
# --write-expected with --filter would drop the other cases' lines.
expect(1, ["without --filter"], "--write-expected", written, "--filter", "relu", what="--write-expected --filter")

for f in failures:
    print("FAIL", f)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
