#!/usr/bin/env bash
# On the GPU machine: remove-bg's photos per second on a folder of 1024x768
# JPEGs (one process: decode, pre-processing and PNG writes on host threads
# beside the GPU) against `wgnn bench`'s rate of the same model at the same
# input shape, in the same run; then the same photos through `wgnn serve`
# (8 clients at a time).
#
#   WGNN=FILE ISNET=isnet_any_size.onnx [N=200] bash bench/run_remove_bg_throughput.sh
#
# The rate after the first photo is (N - 20) / (t(N) - t(20)) from two runs,
# of 20 and of N photos, so that the load and the first run (graph build,
# shader compilation) drop out; a warm-up run fills the pipeline cache on
# disk first, so all start alike. remove-bg's own summary gives the rate after
# its first photo as well. Writes $OUT/remove_bg_throughput.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WGNN=${WGNN:-build/wgnn}
ISNET=${ISNET:?ISNET=FILE: isnet_any_size.onnx}
N=${N:-200}
PY=${PY:-python3}
WORK=${TMPDIR:-/tmp}/remove_bg_throughput
rm -rf "$WORK"; mkdir -p "$WORK/all" "$WORK/first20"
LOG="$OUT/remove_bg_throughput.txt"
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
now() { date +%s.%N; }
elapsed() { $PY -c "import sys; print(round($(now) - $1, 3))"; }

"$WGNN" info | head -3 | tee -a "$LOG"
say "cores: $(nproc)"
t=$(now); $PY bench/make_photos.py "$WORK/all" "$N" 1024 768
say "photos: $N JPEGs of 1024x768, $(du -sh "$WORK/all" | cut -f1), made in $(elapsed "$t") s"
cp "$WORK"/all/photo_00[0-9].jpg "$WORK"/all/photo_01[0-9].jpg "$WORK/first20/"

say "== wgnn bench, the model alone at the photos' input shape"
"$WGNN" bench "$ISNET" --shape input=1x3x1024x1024 --runs 50 --json > "$WORK/bench.json"
cat "$WORK/bench.json" >> "$LOG"
$PY - "$WORK/bench.json" <<'PY' | tee -a "$LOG"
import json, sys
j = json.load(open(sys.argv[1]))
print(f"bench: median host to host {j['median_ms']:.2f} ms ({1000 / j['median_ms']:.2f}/s), "
      f"GPU {j['gpu_ms']:.2f} ms ({1000 / j['gpu_ms']:.2f}/s)")
PY

run_folder() {  # run_folder NAME DIR [ARGS...]: the wall time of one remove-bg process
  local name=$1 dir=$2; shift 2
  rm -rf "$WORK/out_$name"
  local t0; t0=$(now)
  "$WGNN" remove-bg "$dir" -o "$WORK/out_$name" --model "$ISNET" "$@" 2> "$WORK/$name.err"
  local rc=$?
  local secs; secs=$(elapsed "$t0")
  echo "$secs" > "$WORK/$name.secs"
  say "remove-bg $name: rc $rc, $(ls "$WORK/out_$name" | wc -l) outputs, ${secs} s"
  grep -E "done, .* skipped|the model ran|host thread" "$WORK/$name.err" | tee -a "$LOG"
}
say "== remove-bg on the folder"
# A first run fills the pipeline cache on disk, so that the runs below all
# start alike (their difference is then the photos alone).
run_folder warmup "$WORK/first20" --threads 1 > /dev/null
run_folder first20 "$WORK/first20"
run_folder all "$WORK/all"
run_folder all_threads1 "$WORK/all" --threads 1
$PY - "$WORK" "$N" <<'PY' | tee -a "$LOG"
import json, sys
w, n = sys.argv[1], int(sys.argv[2])
t = {k: float(open(f"{w}/{k}.secs").read()) for k in ("first20", "all", "all_threads1")}
j = json.load(open(f"{w}/bench.json"))
steady = (n - 20) / (t["all"] - t["first20"])
print(f"remove-bg: {n} photos in {t['all']:.2f} s ({n / t['all']:.2f}/s with load and first run); "
      f"after the first 20: {steady:.2f} photos/s = {100 * steady * j['median_ms'] / 1000:.0f}% of bench's host-to-host "
      f"rate, {100 * steady * j['gpu_ms'] / 1000:.0f}% of its GPU rate; --threads 1: {n / t['all_threads1']:.2f}/s")
PY

say "== wgnn serve, 8 clients at a time, the same photos"
"$WGNN" serve --port 0 --model "$ISNET" --queue 16 --quiet > "$WORK/serve.out" 2> "$WORK/serve.err" &
SPID=$!
for _ in $(seq 1 120); do grep -q listening "$WORK/serve.out" && break; sleep 0.5; done
PORT=$(grep -o '127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2)
$PY - "$PORT" "$WORK/all" <<'PY' | tee -a "$LOG"
import http.client, os, sys, time
from concurrent.futures import ThreadPoolExecutor
port, folder = int(sys.argv[1]), sys.argv[2]
photos = [open(os.path.join(folder, f), "rb").read() for f in sorted(os.listdir(folder))]
def post(b):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/remove-bg", b, {"Content-Type": "image/jpeg"})
    r = c.getresponse(); body = r.read(); c.close()
    return r.status, body[:8] == b"\x89PNG\r\n\x1a\n"
post(photos[0])
t0 = time.time()
with ThreadPoolExecutor(8) as ex:
    res = list(ex.map(post, photos))
dt = time.time() - t0
ok = sum(1 for s, p in res if s == 200 and p)
print(f"serve: {len(photos)} requests, 8 at a time: {ok} PNGs, {sum(1 for s, _ in res if s == 503)} 503s, "
      f"in {dt:.2f} s = {ok / dt:.2f} photos/s")
PY
kill "$SPID"; wait "$SPID" 2>/dev/null
say "done"
