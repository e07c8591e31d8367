#!/usr/bin/env bash
# On the GPU machine, in one command: remove-bg's photos per second on a
# folder of N 1024x768 JPEGs against `wgnn bench`'s GPU-only rate of the
# same model at the same input shape, reading back the matte alone as
# remove-bg does (bench --outputs), for the default build (npm Dawn: ISNet's
# float16 values stored as float32) and the build against the Dawn built
# from source (build-source/: float16 storage and arithmetic); then the same
# photos through a Python loop of ONNX Runtime WebGPU doing the same work
# (bench/ort_remove_bg_loop.py) and through `wgnn serve` (8 clients at a
# time). Prints a table and writes $OUT/remove_bg_throughput.{txt,md}.
#
#   bash bench/run_remove_bg_throughput.sh
#
# Needs build/wgnn, build-source/wgnn (left out if missing, and said so),
# .deps/dawn, .deps/dawn-source-*/lib, .gl, .payload/lib
# (bench/make_payload.sh), .payload/wheels (bench/make_ort_webgpu_wheels.sh;
# the ORT loop is left out without them, and said so) and ISNet: ISNET=FILE,
# else .payload/isnet*/isnet.onnx.part-* or .payload/isnet.onnx.part-*
# (split to travel, joined here). Variables: N (200), RUNS (bench runs, 50),
# PY (python3, with numpy and Pillow), SIZE (the model's input side, 1024).
#
# The folder rate is (N - 20) / (t(N) - t(20)) from two processes, so that
# load and first run drop out; a warm-up process fills the pipeline cache on
# disk first. remove-bg's own summary gives its rate after the first photo,
# how many photos were queued behind the one on the GPU, and the per-photo
# median of each stage. WGNN_QUEUE_RUNS=0 repeats the folder with each
# photo collected before the next is submitted, to show what the queueing
# gives.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d .gl ] && source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
N=${N:-200}
RUNS=${RUNS:-50}
SIZE=${SIZE:-1024}
PY=${PY:-python3}
WORK=${TMPDIR:-/tmp}/remove_bg_throughput
rm -rf "$WORK"; mkdir -p "$WORK/all" "$WORK/first20"
LOG="$OUT/remove_bg_throughput.txt"
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
now() { date +%s.%N; }
elapsed() { $PY -c "print(round($(now) - $1, 3))"; }

ISNET=${ISNET:-}
if [ -z "$ISNET" ]; then
  parts=$(ls .payload/isnet*/isnet.onnx.part-* .payload/isnet.onnx.part-* 2>/dev/null | sort -t- -k2)
  if [ -z "$parts" ]; then echo "run_remove_bg_throughput: no ISNET=FILE and no ISNet parts in .payload" >&2; exit 1; fi
  # shellcheck disable=SC2086
  cat $parts > "$WORK/isnet.onnx"
  ISNET=$WORK/isnet.onnx
fi
say "model: $(basename "$ISNET"), $(du -h "$ISNET" | cut -f1), sha256 $(sha256sum "$ISNET" | cut -c1-16)"

# The builds: NAME WGNN ENV... (the source build finds its Dawn through its
# library path, and needs unsafe APIs for its toggles).
builds=("fp32")
declare -A WG=([fp32]="build/wgnn")
declare -A ENVS=([fp32]="")
if [ -x build-source/wgnn ]; then
  LIB=$(ls -d "$PWD"/.deps/dawn-source-*/lib 2>/dev/null | head -1)
  builds+=("fp16")
  WG[fp16]="build-source/wgnn"
  ENVS[fp16]="WGNN_ALLOW_UNSAFE_APIS=1 LD_LIBRARY_PATH=$LIB:${LD_LIBRARY_PATH:-}"
else
  say "build-source/wgnn is missing: the fp16 (Dawn from source) column is left out"
fi
wg() { local b=$1; shift; env ${ENVS[$b]} "${WG[$b]}" "$@"; }

wg fp32 info | head -3 | tee -a "$LOG"
[ -n "${WG[fp16]:-}" ] && wg fp16 info | grep -i -E "adapter|shader-f16" | head -3 | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | tee -a "$LOG"
say "cores: $(nproc)"
t=$(now); $PY bench/make_photos.py "$WORK/all" "$N" 1024 768
say "photos: $N JPEGs of 1024x768, $(du -sh "$WORK/all" | cut -f1), made in $(elapsed "$t") s"
cp "$WORK"/all/photo_00[0-9].jpg "$WORK"/all/photo_01[0-9].jpg "$WORK/first20/"

run_folder() {  # run_folder BUILD NAME DIR [ARGS...]: one remove-bg process, its wall time
  local b=$1 name=$2 dir=$3; shift 3
  rm -rf "$WORK/out_$name"
  local t0; t0=$(now)
  wg "$b" remove-bg "$dir" -o "$WORK/out_$name" --model "$ISNET" "$@" 2> "$WORK/$name.err"
  local rc=$?
  local secs; secs=$(elapsed "$t0")
  echo "$secs" > "$WORK/$name.secs"
  say "remove-bg $name: rc $rc, $(ls "$WORK/out_$name" | wc -l) outputs, ${secs} s"
  grep -E "done, .* skipped|the model ran|host thread|per photo|FAILED|error" "$WORK/$name.err" | tail -5 | tee -a "$LOG"
}

for b in "${builds[@]}"; do
  say "== $b: wgnn bench, the model alone at the photos' input shape, the matte read back alone"
  wg "$b" bench "$ISNET" --shape "input=1x3x${SIZE}x${SIZE}" --outputs output --runs "$RUNS" --json > "$WORK/bench_$b.json" \
    2> "$WORK/bench_$b.err" || { say "bench $b failed: $(tail -c 400 "$WORK/bench_$b.err")"; continue; }
  cat "$WORK/bench_$b.json" >> "$LOG"
  $PY - "$WORK/bench_$b.json" <<'PY' | tee -a "$LOG"
import json, sys
j = json.load(open(sys.argv[1]))
print(f"bench: host to host {j['median_ms']:.2f} ms ({1000 / j['median_ms']:.2f}/s), queued {j['queued_ms']:.2f} ms "
      f"({1000 / j['queued_ms']:.2f}/s), GPU {j['gpu_ms']:.2f} ms ({1000 / j['gpu_ms']:.2f}/s); "
      f"upload {j['upload_us'] / 1000:.2f} ms, readback {j['readback_us'] / 1000:.2f} ms")
PY
  say "== $b: remove-bg on the folder"
  run_folder "$b" "${b}_warmup" "$WORK/first20" > /dev/null  # fills the pipeline cache on disk
  run_folder "$b" "${b}_first20" "$WORK/first20"
  run_folder "$b" "${b}_all" "$WORK/all"
  WGNN_QUEUE_RUNS=0 run_folder "$b" "${b}_all_unqueued" "$WORK/all"
done

ORT_OK=0
if ls .payload/wheels/onnxruntime_webgpu-*.whl > /dev/null 2>&1; then
  say "== ONNX Runtime WebGPU, a Python loop (bench/ort_remove_bg_loop.py), the same photos"
  # Into a folder of its own, hashes checked; numpy and Pillow are the
  # machine's. Without pip there, each wheel's sha256 is checked against the
  # requirements file and the wheel unpacked (what pip --target does).
  install_ort() {
    if $PY -m pip --version > /dev/null 2>&1; then
      $PY -m pip install --quiet --no-index --find-links .payload/wheels --require-hashes --no-deps \
        --target "$WORK/ortpy" -r bench/ort_webgpu_requirements.txt
    else
      $PY - .payload/wheels bench/ort_webgpu_requirements.txt "$WORK/ortpy" <<'PY'
import hashlib, os, re, sys, zipfile
wheels, req, target = sys.argv[1:4]
allowed = set(re.findall(r"sha256:([0-9a-f]{64})", open(req).read()))
for name in sorted(os.listdir(wheels)):
    path = os.path.join(wheels, name)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if digest not in allowed:
        sys.exit(f"{name}: sha256 {digest} is not pinned in {req}")
    zipfile.ZipFile(path).extractall(target)
    print(f"unpacked {name}")
PY
    fi
  }
  if install_ort > "$WORK/ort_install.log" 2>&1; then
    PYTHONPATH="$WORK/ortpy" $PY bench/ort_remove_bg_loop.py "$ISNET" "$WORK/all" "$WORK/out_ort" \
      --size "$SIZE" --json "$WORK/ort.json" 2> "$WORK/ort.err" | tee -a "$LOG"
    if [ -s "$WORK/ort.json" ]; then
      ORT_OK=1
      # The same cut-outs? (resize filters differ: a few levels of alpha)
      $PY - "$WORK/out_fp32_all" "$WORK/out_ort" <<'PY' | tee -a "$LOG"
import os, sys
import numpy as np
from PIL import Image
a, b = sys.argv[1:3]
names = sorted(os.listdir(b))[:20]
d = [np.abs(np.asarray(Image.open(os.path.join(a, n)), dtype=int)[..., 3] -
            np.asarray(Image.open(os.path.join(b, n)), dtype=int)[..., 3]) for n in names]
print(f"ort loop vs remove-bg fp32, alpha of {len(d)} photos: mean |diff| {np.mean([x.mean() for x in d]):.3f}, "
      f"max {max(x.max() for x in d)}")
PY
    else
      say "the ORT loop failed: $(tail -c 600 "$WORK/ort.err")"
    fi
  else
    say "installing the ORT WebGPU wheels failed (this Python: $($PY --version 2>&1)): $(tail -c 600 "$WORK/ort_install.log")"
  fi
else
  say "== no .payload/wheels (bench/make_ort_webgpu_wheels.sh): the ONNX Runtime WebGPU loop is left out"
fi

for b in "${builds[@]}"; do
  say "== $b: wgnn serve, 8 clients at a time, the same photos"
  wg "$b" serve --port 0 --model "$ISNET" --queue 16 --quiet > "$WORK/serve_$b.out" 2> "$WORK/serve_$b.err" &
  SPID=$!
  for _ in $(seq 1 240); do grep -q listening "$WORK/serve_$b.out" && break; sleep 0.5; done
  PORT=$(grep -o '127.0.0.1:[0-9]*' "$WORK/serve_$b.out" | cut -d: -f2)
  if [ -z "$PORT" ]; then say "serve $b did not start: $(tail -c 400 "$WORK/serve_$b.err")"; kill "$SPID"; continue; fi
  $PY - "$PORT" "$WORK/all" "$WORK/serve_$b.json" <<'PY' | tee -a "$LOG"
import http.client, json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
port, folder, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
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
busy = sum(1 for s, _ in res if s == 503)
print(f"serve: {len(photos)} requests, 8 at a time: {ok} PNGs, {busy} 503s, in {dt:.2f} s = {ok / dt:.2f} photos/s")
json.dump({"pngs": ok, "busy": busy, "seconds": dt, "rate": ok / dt}, open(out, "w"))
PY
  kill "$SPID"; wait "$SPID" 2>/dev/null
done

say "== the table"
$PY - "$WORK" "$N" "$ORT_OK" "$(basename "$ISNET") at ${SIZE}x${SIZE}" "${builds[@]}" <<'PY' | tee "$OUT/remove_bg_throughput.md" | tee -a "$LOG"
import json, os, re, sys
w, n, ort_ok, model, builds = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5:]
def secs(name):
    p = f"{w}/{name}.secs"
    return float(open(p).read()) if os.path.exists(p) else None
def load(p):
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
def summary(name, pattern):
    p = f"{w}/{name}.err"
    if not os.path.exists(p):
        return None
    for line in open(p):
        m = re.search(pattern, line)
        if m:
            return m
    return None
rows, cols = [], {}
for b in builds:
    j = load(f"{w}/bench_{b}.json")
    c = {}
    if j:
        c["gpu"] = 1000 / j["gpu_ms"]
        c["h2h"] = 1000 / j["median_ms"]
        c["queued"] = 1000 / j["queued_ms"]
    t20, tall, tun = secs(f"{b}_first20"), secs(f"{b}_all"), secs(f"{b}_all_unqueued")
    if t20 is not None and tall is not None and tall > t20:
        c["folder"] = (n - 20) / (tall - t20)
        c["folder_total"] = n / tall
    if t20 is not None and tun is not None and tun > t20:
        c["unqueued"] = (n - 20) / (tun - t20)
    m = summary(f"{b}_all", r"([0-9.]+) photos/s after the first; (\d+) queued")
    if m:
        c["own"] = float(m.group(1))
        c["queued_photos"] = int(m.group(2))
    m = summary(f"{b}_all", r"per photo, median ms: (.*)")
    c["stages"] = m.group(1) if m else "-"
    s = load(f"{w}/serve_{b}.json")
    if s:
        c["serve"] = s["rate"]
    cols[b] = c
names = {"fp32": "default build (npm Dawn; ISNet's float16 stored as float32)",
         "fp16": "Dawn from source (float16)"}
def cell(b, k, of_gpu=False):
    v = cols[b].get(k)
    if v is None:
        return "-"
    s = f"{v:.2f}"
    if of_gpu and cols[b].get("gpu"):
        s += f" ({100 * v / cols[b]['gpu']:.0f}%)"
    return s
print(f"photos per second (in brackets: of the same build's GPU-only rate); {n} JPEGs of 1024x768, {model}")
print()
print("| what | " + " | ".join(names.get(b, b) for b in builds) + " |")
print("|---|" + "---|" * len(builds))
for label, k, pct in [("`wgnn bench` GPU only (timestamps around the pass)", "gpu", False),
                      ("`wgnn bench` host to host, matte read back alone", "h2h", True),
                      ("`wgnn bench` queued (next run started before the last is read back)", "queued", True),
                      (f"remove-bg folder, after the first 20: (N - 20) / (t(N) - t(20))", "folder", True),
                      ("remove-bg's own rate after its first photo", "own", True),
                      (f"remove-bg folder, {n} photos with load and first run", "folder_total", True),
                      ("remove-bg folder, WGNN_QUEUE_RUNS=0 (no photo queued)", "unqueued", True),
                      ("`wgnn serve`, 8 clients at a time", "serve", True)]:
    print(f"| {label} | " + " | ".join(cell(b, k, pct) for b in builds) + " |")
if ort_ok:
    o = load(f"{w}/ort.json")
    print(f"| ONNX Runtime {o['onnxruntime']} WebGPU, Python loop (one thread), after the first photo | "
          f"{o['photos_per_s_after_first']:.2f} |" + " |" * (len(builds) - 1))
print()
for b in builds:
    q = cols[b].get("queued_photos")
    print(f"- {b}: remove-bg per photo, median ms: {cols[b]['stages']}; {q if q is not None else '-'} of {n} photos "
          "queued behind the one on the GPU")
if ort_ok:
    o = load(f"{w}/ort.json")
    print("- ORT loop per photo, median ms: " + ", ".join(f"{k} {v:.1f}" for k, v in o["median_ms"].items() if v))
for b in builds:
    f, g = cols[b].get("folder"), cols[b].get("gpu")
    if f and g:
        verdict = "met" if f >= 0.9 * g else "NOT met"
        print(f"- {b}: the folder at {100 * f / g:.0f}% of the GPU-only rate: the 90% bar is {verdict}")
PY
say "done"
