"""The ONNX backend test cases (Debian's libonnx-testdata) in float16 mode:
`wgnn conformance --fp16 --rtol 1e-2 --atol 1e-3` against the pinned list
tests/onnx/conformance_fp16_expected.txt, where the few cases whose data
float16 cannot hold are 'fail' lines with the reason. The test fails when
wgnn exits non-zero (a case off its line, an unlisted case, a listed case
absent, fewer than MIN_CASES cases), when the summary line is missing or
counts an unexpected failure, and when float16 mode skips other cases than
float32 (tests/onnx/conformance_expected.txt): every case that runs in
float32 must run in float16 mode too. scripts/conformance-expected rewrites
both lists.

usage: conformance_fp16.py WGNN TESTDATA_DIR FP16_EXPECTED F32_EXPECTED
"""
import os
import re
import subprocess
import sys

WGNN, DATA, F16_LIST, F32_LIST = sys.argv[1:5]
MIN_CASES = 1000


def pinned(path):
    out = {}
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            status, rest = line.rstrip("\n").split(" ", 1)
            out[rest.split(": ", 1)[0]] = status
    return out


problems = []
f16, f32 = pinned(F16_LIST), pinned(F32_LIST)
skip16 = {n for n, s in f16.items() if s == "skip"}
skip32 = {n for n, s in f32.items() if s == "skip"}
for n in sorted(skip16 - skip32):
    problems.append(f"{n}: skipped in float16 mode, runs in float32")
for n in sorted(skip32 - skip16):
    problems.append(f"{n}: runs in float16 mode, skipped in float32 (one list is stale)")
for n in sorted(n for n, s in f32.items() if s == "fail"):
    problems.append(f"{n}: float32's list expects a failure")

dirs = [os.path.join(DATA, d) for d in ("node", "pytorch-converted", "pytorch-operator", "simple")]
r = subprocess.run([WGNN, "conformance", "--quiet-unsupported", "--fp16", "--rtol", "1e-2", "--atol", "1e-3",
                    "--expected", F16_LIST, "--min-cases", str(MIN_CASES), *dirs], capture_output=True, text=True)
out = r.stdout + r.stderr
for m in re.finditer(r"^FAIL\s+(\S+) \(expected\)", out, re.M):
    print(f"expected FAIL {m.group(1)}")
summary = re.search(r"(\d+) passed, (\d+) failed, (\d+) skipped \((\d+) of the failures expected\)", out)
if not summary:
    problems.append(f"no summary line in wgnn's output (exit {r.returncode}):\n{out[-2000:]}")
else:
    print(f"float16 mode: {summary.group(0)}")
    if summary.group(2) != summary.group(4):
        problems.append(f"{int(summary.group(2)) - int(summary.group(4))} unexpected failures")
if r.returncode != 0:
    moved = out[out.find("cases differ from"):] if "cases differ from" in out else out[-3000:]
    problems.append(f"wgnn conformance exited {r.returncode}:\n{moved.strip()}")
for p in problems:
    print(p)
print("ok" if not problems else f"{len(problems)} problems")
sys.exit(1 if problems else 0)
