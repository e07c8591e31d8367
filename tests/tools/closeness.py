"""The one rule every script that checks wgnn against ONNX Runtime uses
(scripts/models/compare.py, tests/onnx/*_vs_ort.py, tests/tools/*.py):

    every element: |got - ref| <= atol + rtol * |ref|

with ref's dtype and shape, integers and booleans equal, +-inf only where
the reference has the same infinity, and NaN only where the reference has
NaN (never elsewhere). A tolerance is a pair (atol, rtol); each caller keeps
its per-model pairs next to the error it measured.
"""
import numpy as np


class Result:
    """ok, and what to print: the elements off, the worst one, and `used`,
    the largest |got - ref| / (atol + rtol * |ref|) over the finite
    elements (1 is the edge of the tolerance)."""

    def __init__(self, ok, text, used=0.0, max_abs=0.0, atol_needed=0.0):
        self.ok, self.text, self.used, self.max_abs = ok, text, used, max_abs
        self.atol_needed = atol_needed  # the smallest atol that passes with this rtol (finite elements)

    def __str__(self):
        return self.text


def check(got, want, atol, rtol):
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return Result(False, f"{got.dtype}{list(got.shape)} vs reference {want.dtype}{list(want.shape)}",
                      float("inf"), float("inf"))
    if not np.issubdtype(want.dtype, np.floating):
        bad = got != want
        n = int(bad.sum())
        if n:
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            return Result(False, f"{n} of {got.size} values differ (first at {list(i)}: {got[i]} vs {want[i]})",
                          float("inf"), float("inf"))
        return Result(True, "exact", 0.0, 0.0)
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    d = np.where(finite, np.abs(g - np.where(finite, w, 0)), 0.0)
    tol = atol + rtol * np.abs(np.where(finite, w, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(finite, d / np.where(tol > 0, tol, 1e-300), 0.0)
    ok = np.where(finite, np.isfinite(g) & (d <= tol),
                  np.where(np.isnan(w), np.isnan(g), g == w))
    n_bad = int(ok.size - ok.sum())
    used = float(np.nanmax(np.where(np.isnan(ratio), np.inf, ratio))) if ratio.size else 0.0
    max_abs = float(np.max(np.where(np.isnan(d), np.inf, d))) if d.size else 0.0
    slack = d - rtol * np.abs(np.where(finite, w, 0))
    needed = max(0.0, float(np.max(np.where(np.isnan(slack), np.inf, slack)))) if d.size else 0.0
    where = (f"max |err| {max_abs:.2e}, {used:.2f} of the tolerance (atol {atol:g}, rtol {rtol:g}; "
             f"atol {needed:.1e} would do)")
    if n_bad:
        i = np.unravel_index(int(np.argmin(ok)), ok.shape)
        j = np.unravel_index(int(np.argmax(np.where(np.isnan(ratio), np.inf, ratio))), ratio.shape)
        return Result(False, f"{n_bad} of {ok.size} elements off (first at {list(i)}: {g[i]:.7g} vs {w[i]:.7g}; "
                             f"worst at {list(j)}: {g[j]:.7g} vs {w[j]:.7g}); {where}", used, max_abs, needed)
    return Result(True, where, used, max_abs, needed)
