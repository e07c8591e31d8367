# Sourced by the bench scripts: export_zoo WORK LOGDIR MODEL... exports each
# zoo model (scripts/models/export.py, opset 17) that WORK/onnx lacks, all
# at once, each logging to LOGDIR/export_MODEL.log; returns when all are done.
export_zoo() {
  local work=$1 logs=$2
  shift 2
  mkdir -p "$work/onnx" "$logs"
  local m
  for m in "$@"; do
    [ -f "$work/onnx/${m}_opset17.onnx" ] && continue
    python3 scripts/models/export.py --model "$m" --opset 17 --out "$work/onnx" > "$logs/export_$m.log" 2>&1 &
  done
  wait
}
