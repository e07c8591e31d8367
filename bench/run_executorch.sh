#!/usr/bin/env bash
# wgnn beside ExecuTorch's own WebGPU runtime, on the same .pte files and the
# same Dawn, in one run on one GPU:
#   1. each program run once by each runtime with the same inputs; their
#      outputs compared with each other and, where the folder holds them,
#      with eager PyTorch's (max |diff| / max |ref|);
#   2. the steady median host to host (inputs written, the program run,
#      every output read back), ROUNDS rounds alternating the two runtimes,
#      and each one's first run.
# Prepare on the set-up machine (the GPU machine reaches no registry):
#   .venv-executorch/bin/python bench/pte_prepare.py DIR [--two-level] modnet davit_base ...
#   bash bench/executorch/build.sh OUT    (ExecuTorch's runtime: OUT/et_webgpu_run)
# then on the GPU machine:
#   ET=OUT/et_webgpu_run [WGNN=build/wgnn] [RUNS=50] [ROUNDS=2] [JSONL=FILE] bash bench/run_executorch.sh DIR NAME...
set -uo pipefail
DIR=$1; shift
WGNN=${WGNN:-build/wgnn}
ET=${ET:?ET=FILE: the ExecuTorch runner that bench/executorch/build.sh makes}
RUNS=${RUNS:-50}
ROUNDS=${ROUNDS:-2}
JSONL=${JSONL:-/dev/null}
PY=${PYTHON:-python3}
for m in "$@"; do
  ins=()
  for f in "$DIR/$m".input_*.npy; do
    i=${f##*.input_}; i=${i%.npy}
    ins+=(--input "input_$i=$f")
  done
  rm -rf "$DIR/wgnn_$m" "$DIR/et_$m"
  if ! "$WGNN" run "$DIR/$m.pte" "${ins[@]}" --output-dir "$DIR/wgnn_$m" > "$DIR/wgnn_$m.log" 2>&1; then
    echo "$m: wgnn failed: $(tail -n 3 "$DIR/wgnn_$m.log")"
  fi
  if ! "$ET" "$DIR/$m.pte" "${ins[@]}" --output-dir "$DIR/et_$m" --runs 1 --warmup 0 > "$DIR/et_$m.log" 2>&1; then
    echo "$m: ExecuTorch failed: $(tail -n 3 "$DIR/et_$m.log")"
  fi
  "$PY" - "$DIR" "$m" <<'PY'
import glob, os, sys
import numpy as np
d, m = sys.argv[1], sys.argv[2]
def rel(got, want):
    got, want = got.astype(np.float64), want.astype(np.float64)
    if got.shape != want.shape or not np.isfinite(got).all() or not np.isfinite(want).all():
        return float("nan")  # shown as nan: never hidden by a max
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-12)) if want.size else 0.0
parts = []
outs = sorted(glob.glob(f"{d}/wgnn_{m}/output_*.npy"))
for name, a, b in (("wgnn vs ExecuTorch", "wgnn", "et"), ("wgnn vs eager", "wgnn", None), ("ExecuTorch vs eager", "et", None)):
    worst, n = 0.0, 0
    for f in outs:
        k = os.path.basename(f)[len("output_"):-4]
        fa = f"{d}/{a}_{m}/output_{k}.npy"
        fb = f"{d}/{b}_{m}/output_{k}.npy" if b else f"{d}/{m}.output_{k}.npy"
        if os.path.exists(fa) and os.path.exists(fb):
            r = rel(np.load(fa), np.load(fb))
            worst, n = (r if r != r or worst != worst else max(worst, r)), n + 1
    if n:
        parts.append(f"{name} {worst:.2e}" if worst == worst else f"{name} nan (a shape differs or a value is not finite)")
print(f"{m}: outputs, max |diff| / max |ref|: " + (", ".join(parts) if parts else "nothing to compare"))
PY
  for r in $(seq "$ROUNDS"); do
    w=$("$WGNN" bench "$DIR/$m.pte" "${ins[@]}" --runs "$RUNS" --json 2> "$DIR/wgnn_bench_$m.err" | tail -n 1)
    e=$("$ET" "$DIR/$m.pte" "${ins[@]}" --runs "$RUNS" --warmup 5 --json 2> "$DIR/et_bench_$m.err" | tail -n 1)
    "$PY" - "$m" "$r" "${w:-null}" "${e:-null}" "$JSONL" <<'PY'
import json, sys
m, r, w, e, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
def load(s):
    try:
        return json.loads(s) or {}
    except ValueError:
        return {}
w, e = load(w), load(e)
f = lambda v, p=3: "n/a" if v is None else f"{v:.{p}f}"
wm, em = w.get("median_ms"), e.get("median_ms")
ratio = f"{em / wm:.2f}x" if wm and em else "n/a"
print(f"{m} round {r}: wgnn median {f(wm)} ms (first run {f(w.get('first_run_ms'), 1)}, {w.get('dispatches')} dispatches); "
      f"ExecuTorch median {f(em)} ms (first run {f(e.get('first_run_ms'), 1)}, load {f(e.get('load_ms'), 1)}); "
      f"ExecuTorch / wgnn {ratio}")
with open(out, "a") as fh:
    fh.write(json.dumps({"model": m, "round": int(r), "wgnn": w, "executorch": e}) + "\n")
PY
  done
done
