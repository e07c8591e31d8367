#!/usr/bin/env bash
# Exports every zoo model (scripts/models/zoo.py) at full size with opset 17
# (TorchScript exporter) and opset 18 (dynamo exporter); when one exporter
# fails the other is tried, and the table says so. Compares each with ONNX Runtime
# CPU (scripts/models/compare.py) and prints a summary table. Also exports the
# --mini models (opsets 17 and 18), compares them, and packs them with their
# inputs into OUTDIR/mini/minis_opsetN.tar.xz for debugging elsewhere.
#
#   scripts/models/run_all.sh OUTDIR [WORKDIR]
#
# OUTDIR gets summary.md, results.tsv, logs.tar.xz and mini/*.tar.xz (small
# files only); the full-size exports go to WORKDIR (default
# ${TMPDIR:-/tmp}/wgnn_models). It continues past failures; the exit status
# is 1 when any export or comparison failed.
# Variables: WGNN (default build/wgnn), PYTHON (default python3; needs torch,
# torchvision, onnx, and timm / transformers for those models; onnxruntime
# or node with .deps/ort), MODELS (default: the eight zoo models), OPSETS
# (default "17 18"), FULL=0 skips the full-size models, MINI=0 the minis,
# STEP_TIMEOUT (seconds per export or comparison, default 500), FP16=1 runs
# wgnn in float16 mode (compare.py --fp16 --fp16-emulated: the float16
# tolerance against ORT in float32, a tighter one against ORT on the model
# rounded to float16; the table's error and tolerance are the float32 ones).
# A long run can be split into several calls, e.g.
#   OPSETS=17 MINI=0 ...; OPSETS=18 MINI=0 ...; FULL=0 ...
# (or MODELS="davit_base whisper_base_encoder" ...); each call writes its own
# OUTDIR/summary.md.
# On the GPU machine bench/gpu_env.sh is sourced when .gl/ is there.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [WORKDIR]" >&2; exit 2; }
OUT=$(realpath -m "$1")
WORK=$(realpath -m "${2:-${TMPDIR:-/tmp}/wgnn_models}")
if [ -d .gl ]; then source bench/gpu_env.sh; fi
WGNN=$(realpath -m "${WGNN:-build/wgnn}")
PY=${PYTHON:-python3}
OPSETS=${OPSETS:-17 18}
STEP_TIMEOUT=${STEP_TIMEOUT:-500}
FP16_ARGS=""
[ "${FP16:-0}" = 1 ] && FP16_ARGS="--fp16 --fp16-emulated"
MODELS=${MODELS:-$("$PY" -c 'import sys; sys.path.insert(0, "scripts/models"); import zoo; print(" ".join(zoo.ZOO))')}
LOGS="$WORK/logs"
mkdir -p "$OUT/mini" "$LOGS"
RESULTS="$OUT/results.tsv"
: > "$RESULTS"
failed=0

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "precision: $([ "${FP16:-0}" = 1 ] && echo 'float16 mode (wgnn run --fp16)' || echo float32)"
  "$PY" - <<'EOF'
import importlib
for m in ("torch", "torchvision", "timm", "transformers", "onnx", "onnxruntime"):
    try:
        print(f"{m}: {importlib.import_module(m).__version__}")
    except Exception as e:  # noqa: BLE001
        print(f"{m}: not available ({type(e).__name__})")
EOF
  "$WGNN" info 2>&1 | head -n 8
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

# try_export EXPORTER NAME OPSET FLAG DIR LOG
try_export() {
  local extra=""
  [ "$1" = dynamo ] && extra=--dynamo
  timeout "$STEP_TIMEOUT" "$PY" scripts/models/export.py --model "$2" --opset "$3" $4 --out "$5" $extra \
    > "$6.export_$1.log" 2>&1
}

# export_and_compare KIND(full|mini) NAME OPSET DIR
export_and_compare() {
  local kind=$1 name=$2 opset=$3 dir=$4 flag="" base exporter log
  [ "$kind" = mini ] && flag=--mini
  base="${name}$([ "$kind" = mini ] && echo _mini)_opset${opset}"
  log="$LOGS/$base"
  # Opset 17: the TorchScript exporter first; 18 and later: dynamo first.
  # When the first fails, the other one is tried and the table says so.
  local first=torchscript second=dynamo why1 why2
  if [ "$opset" -ge 18 ]; then first=dynamo; second=torchscript; fi
  if try_export "$first" "$name" "$opset" "$flag" "$dir" "$log"; then
    exporter=$first
  else
    why1=$(grep -m1 '^FAIL' "$log.export_$first.log" || tail -n 1 "$log.export_$first.log")
    if try_export "$second" "$name" "$opset" "$flag" "$dir" "$log"; then
      exporter="$second ($first failed: $(echo "$why1" | cut -c1-160))"
    else
      why2=$(grep -m1 '^FAIL' "$log.export_$second.log" || tail -n 1 "$log.export_$second.log")
      printf '%s\t%s\t%s\t%s\t%s\n' "$base" "$opset" "$first, $second" EXPORT-FAIL "$why1 // $why2" \
        | tee -a "$RESULTS"
      failed=1
      return
    fi
  fi
  local line rc
  timeout "$STEP_TIMEOUT" "$PY" scripts/models/compare.py --wgnn "$WGNN" "$dir/$base.onnx" \
    --inputs "$dir/${base}_inputs" --work "$dir/${base}_outputs" $FP16_ARGS > "$log.compare.log" 2>&1
  rc=$?
  line=$(grep -m1 -E '^(PASS|FAIL|ERROR) ' "$log.compare.log" || tail -n 1 "$log.compare.log")
  [ $rc -eq 124 ] && line="timed out after ${STEP_TIMEOUT} s"
  [ $rc -eq 0 ] || failed=1
  printf '%s\t%s\t%s\t%s\t%s\n' "$base" "$opset" "$exporter" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" \
    "$line" | tee -a "$RESULTS"
  rm -rf "$dir/${base}_outputs"
}

for opset in $OPSETS; do
  if [ "${FULL:-1}" = 1 ]; then
    for name in $MODELS; do
      export_and_compare full "$name" "$opset" "$WORK/full"
      rm -f "$WORK/full/${name}_opset${opset}.onnx"*   # hundreds of MB each: keep the disk free
    done
  fi
  if [ "${MINI:-1}" = 1 ]; then
    mdir="$WORK/mini/opset$opset"
    rm -rf "$mdir"
    mkdir -p "$mdir"
    for name in $MODELS transformer_block; do
      export_and_compare mini "$name" "$opset" "$mdir"
    done
    tar -C "$WORK/mini" -cJf "$OUT/mini/minis_opset$opset.tar.xz" "opset$opset"
    size=$(stat -c %s "$OUT/mini/minis_opset$opset.tar.xz")
    if [ "$size" -gt $((16 * 1024 * 1024)) ]; then
      echo "warning: $OUT/mini/minis_opset$opset.tar.xz is $((size / 1048576)) MiB (over 16 MiB)" >&2
    fi
  fi
done

tar -C "$WORK" -cJf "$OUT/logs.tar.xz" logs
"$PY" - "$RESULTS" > "$OUT/summary.md" <<'EOF'
import re, sys
rows = [(row.rstrip("\n").split("\t") + [""] * 5)[:5] for row in open(sys.argv[1])]
emu = any("emulated_fp16" in r[4] for r in rows)
print("| model | opset | exporter | result | max abs err | share of the tolerance | atol,rtol | wgnn s |"
      + (" err vs fp16-emulated ORT / share |" if emu else ""))
print("|---|---|---|---|---:|---:|---:|---:|" + ("---:|" if emu else ""))
for base, opset, exporter, status, detail in rows:
    m = re.search(r"max_abs_err (\S+) used (\S+) tol (\S+)", detail)
    t = re.search(r"\(wgnn ([0-9.]+) s", detail)
    e = re.search(r"emulated_fp16 \S+ max_abs_err (\S+) used (\S+)", detail)
    err, ref, tol = m.groups() if m else ("", "", "")
    note = "" if m else " " + detail.replace("|", "/")[:200]
    print(f"| {base} | {opset} | {exporter} | {status}{note} | {err} | {ref} | {tol} | {t.group(1) if t else ''} |"
          + (f" {e.group(1)} / {e.group(2)} |" if e else " |" if emu else ""))
EOF
cat "$OUT/summary.md"
exit $failed
