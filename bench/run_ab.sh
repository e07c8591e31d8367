#!/usr/bin/env bash
# On the GPU machine: two wgnn builds (or one build under two settings)
# side by side in one run, model by model, each figure its own process,
# alternating A and B for ROUNDS rounds so that drift hits both alike.
#
#   A=FILE [B=FILE] [A_ENV="K=V ..."] [B_ENV="K=V ..."] [PRECISIONS="fp32 fp16"]
#   [ROUNDS=2] [RUNS=30] [WARMUP=5] bash bench/run_ab.sh MODEL.onnx [--shape ...] ...
#
# A model's extra `wgnn bench` arguments follow it after a colon:
# `isnet.onnx:--outputs=output`. B defaults to A (then A_ENV / B_ENV make
# the difference, e.g. B_ENV="WGNN_IR_IMPORT=0"). fp16 is `--fp16` (on the
# tensor cores where the build and device offer them: set
# WGNN_ALLOW_UNSAFE_APIS=1 for Dawn's subgroup matrices).
# Prints one JSON line per process (variant, round, model, precision and
# `wgnn bench --json`'s median_ms, gpu_ms, encode_us, dispatches, load_ms,
# first_run_ms) to stdout and to $OUT/ab.jsonl, then a table of the medians
# of each variant and B / A.
set -uo pipefail
cd "$(dirname "$0")/.."
A=${A:?A=FILE: a wgnn binary}
B=${B:-$A}
A_ENV=${A_ENV:-}
B_ENV=${B_ENV:-}
PRECISIONS=${PRECISIONS:-fp32}
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-30}
WARMUP=${WARMUP:-5}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
: > "$OUT/ab.jsonl"
[ $# -gt 0 ] || { echo "usage: A=FILE [B=FILE] bash bench/run_ab.sh MODEL[:ARGS] ..." >&2; exit 2; }
for round in $(seq 1 "$ROUNDS"); do
  for spec in "$@"; do
    model=${spec%%:*}
    extra=""
    [ "$spec" != "$model" ] && extra=$(echo "${spec#*:}" | tr ',' ' ')
    for prec in $PRECISIONS; do
      flag=""
      [ "$prec" = fp16 ] && flag="--fp16"
      for v in A B; do
        bin=$A envs=$A_ENV
        [ $v = B ] && bin=$B envs=$B_ENV
        # shellcheck disable=SC2086
        line=$(env $envs "$bin" bench "$model" $flag $extra --runs "$RUNS" --warmup "$WARMUP" --json 2>/dev/null | tail -1)
        python3 - "$v" "$round" "$model" "$prec" "$line" "$extra" <<'EOF' | tee -a "$OUT/ab.jsonl"
import json, os, sys
v, rnd, model, prec, line, extra = sys.argv[1:7]
out = {"variant": v, "round": int(rnd), "model": os.path.basename(model) + (" " + extra if extra else ""),
       "precision": prec}
try:
    d = json.loads(line)
    for k in ("median_ms", "gpu_ms", "encode_us", "dispatches", "load_ms", "first_run_ms"):
        out[k] = d.get(k)
except (ValueError, TypeError):
    out["error"] = "no JSON from wgnn bench"
print(json.dumps(out))
EOF
      done
    done
  done
done
python3 - "$OUT/ab.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
keys = sorted({(r["model"], r["precision"]) for r in rows})
print(f"{'model':40s} {'prec':5s} {'A ms':>8s} {'B ms':>8s} {'B/A':>6s} {'A gpu':>8s} {'B gpu':>8s} {'A disp':>6s} {'B disp':>6s}")
for m, p in keys:
    def med(v, k):
        xs = [r[k] for r in rows if r["model"] == m and r["precision"] == p and r["variant"] == v and r.get(k) is not None]
        return statistics.median(xs) if xs else float("nan")
    a, b = med("A", "median_ms"), med("B", "median_ms")
    print(f"{m:40s} {p:5s} {a:8.3f} {b:8.3f} {b / a if a else float('nan'):6.3f} {med('A', 'gpu_ms'):8.3f} "
          f"{med('B', 'gpu_ms'):8.3f} {med('A', 'dispatches'):6.0f} {med('B', 'dispatches'):6.0f}")
EOF
