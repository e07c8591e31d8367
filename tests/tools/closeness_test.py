"""closeness.check, the comparison rule of every script that checks wgnn
against ONNX Runtime: elementwise atol + rtol * |ref|, infinities exact,
NaN only where the reference has NaN, integers exact, dtype and shape."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import closeness  # noqa: E402

f, inf, nan = np.float32, np.inf, np.nan
failures = []


def expect(ok, got, want, atol=1e-5, rtol=1e-4, dtype=f):
    r = closeness.check(np.array(got, dtype), np.array(want, dtype), atol, rtol)
    if r.ok != ok:
        failures.append(f"{got} vs {want} (atol {atol}, rtol {rtol}): {'passed' if r.ok else 'failed'}: {r}")
    return r


expect(True, [1, 2, inf, -inf, nan], [1, 2, inf, -inf, nan])
expect(False, [1, 2, -inf], [1, 2, inf])           # the wrong infinity
expect(False, [1, 2, 3e38], [1, 2, inf])           # finite where the reference is infinite
expect(False, [1, 2, inf], [1, 2, 3e38])           # infinite where it is finite
expect(False, [1, 1], [1, nan])                    # a number where the reference has NaN
expect(False, [nan, 1], [1, 1])                    # NaN where it has a number
expect(True, [2 * (1 + 0.9e-4)], [2])              # within rtol
expect(False, [2 * (1 + 1.1e-4) + 1e-5], [2])      # past atol + rtol * |ref|
# A small element is held to its own tolerance, not to the largest one's.
expect(False, [100, 1e-3], [100, 1.1e-3])
r = expect(True, [1e-3 + 9e-6], [1e-3], atol=1e-5, rtol=0)
if not 0.85 < r.used < 0.95 or not 8.9e-6 < r.atol_needed < 9.1e-6:
    failures.append(f"used {r.used}, atol_needed {r.atol_needed} for an error of 9e-6 at atol 1e-5")
expect(False, [1, 2], [1, 3], dtype=np.int64)
expect(True, [True, False], [True, False], dtype=bool)
if closeness.check(np.zeros(3, f), np.zeros(3, np.float16), 1, 1).ok:
    failures.append("another dtype passed")
if closeness.check(np.zeros((3, 1), f), np.zeros(3, f), 1, 1).ok:
    failures.append("another shape passed")
for x in failures:
    print("FAIL", x)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
