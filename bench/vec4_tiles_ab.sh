#!/usr/bin/env bash
# On the GPU machine: the tensor-core GEMM with float16 workgroup tiles (the
# stock Dawn) against vec4<u32> tiles (/v, on the Dawn of
# scripts/build-dawn-vec4-tiles), side by side in one run, beside PyTorch's
# cuBLAS on the same sizes; then, with MODELS, whole models under
# WGNN_SUBGROUP_VEC4_TILES=1 (bench/run_settings.sh). The same wgnn binaries
# run both: LD_LIBRARY_PATH picks the library (the patch changes no API).
# Every product is checked against a double-precision reference by the
# bench itself; a wrong /v result fails the run.
#
#   [OUT=/tmp/out] [ROUNDS=3] [MODELS="whisper_base_encoder davit_base"] \
#     WGNN=build-source/wgnn bash bench/vec4_tiles_ab.sh
#
# Needs build-source/bench/wgnn_bench_gemm, .deps/dawn-source-*/lib (stock),
# .deps/dawn-vec4-tiles-*/lib (patched) and bench/gpu_env.sh's driver; BENCH,
# STOCK and PATCHED name them elsewhere (binaries copied to the GPU machine).
# Writes OUT/vec4_gemm.jsonl (each line the bench's JSON plus "dawn":
# "stock" or "vec4-tiles" and "round"), OUT/vec4_torch.jsonl and, with
# MODELS, run_settings.sh's files.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
STOCK=${STOCK:-$(ls -d "$PWD"/.deps/dawn-source-*/lib | head -1)}
PATCHED=${PATCHED:-$(ls -d "$PWD"/.deps/dawn-vec4-tiles-*/lib 2>/dev/null | head -1)}
[ -n "$PATCHED" ] || { echo "no .deps/dawn-vec4-tiles-*/lib: run scripts/build-dawn-vec4-tiles" >&2; exit 2; }
BENCH=${BENCH:-build-source/bench/wgnn_bench_gemm}
PLAIN=(128x128x32:2x2:1 128x128x32:2x2:1/t1 128x128x32:2x2:1/d2/t1)
VEC4=(128x128x32:2x2:1/v 128x128x32:2x2:1/t1/v 128x128x32:2x2:1/d2/t1/v 256x128x32:4x2:1/d2/t1/v)
: > "$OUT/vec4_gemm.jsonl"
run() {  # DAWN_NAME LIB CONFIGS...
  local name=$1 lib=$2
  shift 2
  LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}" "$BENCH" --sizes 4096 8192 --reps 9 --configs "$@" |
    python3 -c 'import json, sys
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        print(line, end="", file=sys.stderr)
        continue
    d["dawn"], d["round"] = sys.argv[1], int(sys.argv[2])
    print(json.dumps(d))' "$name" "$round" | tee -a "$OUT/vec4_gemm.jsonl"
}
for round in $(seq 1 "$ROUNDS"); do
  run stock "$STOCK" "${PLAIN[@]}"
  run vec4-tiles "$PATCHED" "${PLAIN[@]}" "${VEC4[@]}"
done
python3 bench/torch_gemm.py 4096,8192 | tee "$OUT/vec4_torch.jsonl"
if [ -n "${MODELS:-}" ]; then
  WGNN=${WGNN:?WGNN=FILE: the wgnn binary of build-source} OUT="$OUT" \
    bash bench/run_settings.sh "$MODELS" "LD_LIBRARY_PATH=$STOCK:$LD_LIBRARY_PATH" \
      "LD_LIBRARY_PATH=$PATCHED:$LD_LIBRARY_PATH" "LD_LIBRARY_PATH=$PATCHED:$LD_LIBRARY_PATH WGNN_SUBGROUP_VEC4_TILES=1"
fi
