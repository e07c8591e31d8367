#!/usr/bin/env bash
# The folder measurement of bench/run_remove_bg_throughput.sh alone, for one
# build and several --threads values: on the GPU machine, 200 JPEGs of
# 1024x768, ISNet at 1024, `wgnn bench`'s GPU-only rate (matte read back
# alone), a warm-up process, then (N - 20) / (t(N) - t(20)) per thread count.
#
#   WGNN=build-source/wgnn ISNET=isnet.onnx THREADS="14 16" bash bench/run_remove_bg_folder.sh
#
# Without ISNET the parts in .payload/isnet*/ are joined (as the throughput
# script does). The source-built Dawn's library path and unsafe APIs are set
# for build-source/wgnn.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d .gl ] && source bench/gpu_env.sh
WGNN=${WGNN:-build-source/wgnn}
LIB=$(ls -d "$PWD"/.deps/dawn-source-*/lib 2>/dev/null | head -1)
[ -n "$LIB" ] && export LD_LIBRARY_PATH="$LIB:${LD_LIBRARY_PATH:-}" WGNN_ALLOW_UNSAFE_APIS=1
W=${TMPDIR:-/tmp}/remove_bg_folder
rm -rf "$W"; mkdir -p "$W/all" "$W/first20"
ISNET=${ISNET:-}
if [ -z "$ISNET" ]; then
  # shellcheck disable=SC2046
  cat $(ls .payload/isnet*/isnet.onnx.part-* | sort -t- -k2) > "$W/isnet.onnx"
  ISNET=$W/isnet.onnx
fi
python3 bench/make_photos.py "$W/all" 200 1024 768
cp "$W"/all/photo_00[0-9].jpg "$W"/all/photo_01[0-9].jpg "$W/first20/"
"$WGNN" bench "$ISNET" --shape input=1x3x1024x1024 --outputs output --runs 50 --json > "$W/bench.json" 2> /dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(f'GPU only {1000 / j[\"gpu_ms\"]:.2f}/s, host to host {1000 / j[\"median_ms\"]:.2f}/s')" "$W/bench.json"
"$WGNN" remove-bg "$W/first20" -o "$W/warm" --model "$ISNET" 2> /dev/null  # fills the pipeline cache
for th in ${THREADS:-14 16}; do
  for set in first20 all; do
    rm -rf "$W/out"
    t0=$(date +%s.%N)
    "$WGNN" remove-bg "$W/$set" -o "$W/out" --model "$ISNET" --threads "$th" 2> "$W/err_${th}_$set.txt"
    t1=$(date +%s.%N)
    echo "$t0 $t1" > "$W/t_${th}_$set"
    echo "threads $th $set: $(ls "$W/out" | wc -l) outputs"
    grep -E "the model ran|per photo" "$W/err_${th}_$set.txt" | tail -2
  done
  python3 - "$W" "$th" <<'PY'
import json, sys
w, th = sys.argv[1:3]
a = [float(x) for x in open(f"{w}/t_{th}_first20").read().split()]
b = [float(x) for x in open(f"{w}/t_{th}_all").read().split()]
gpu = json.load(open(f"{w}/bench.json"))["gpu_ms"]
r = 180 / ((b[1] - b[0]) - (a[1] - a[0]))
print(f"threads {th}: (N - 20) / (t(N) - t(20)) = {r:.2f} photos/s = {100 * r * gpu / 1000:.1f}% of GPU only")
PY
done
