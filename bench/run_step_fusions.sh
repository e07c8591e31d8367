#!/usr/bin/env bash
# On the GPU machine: a decoder step's fusions, the build before and after,
# side by side in one run:
#   1. the Llama-style decoder of scripts/models/decoders.py at GPT-2-small's
#      size: 64 new tokens after a 16-token prompt, three runs in one
#      process, through each build (bench/run_one_road.sh with ZOO=""): ms
#      per token, dispatches a step, the tokens;
#   2. the same decoder, 1,024 new tokens, two runs in one process, through
#      each build: ms per token over a long context, plans built;
#   3. the decoder in onnxruntime-genai's layout (scripts/models/
#      genai_decoder.py --size small: GroupQueryAttention, 4-bit
#      MatMulNBits) at the same width and depth, 64 new tokens, three runs,
#      through each build;
#   4. one decode step of B profiled kernel by kernel over a cache of 127
#      rows (bench/profile_decoder_step.sh);
#   5. the eight zoo models, A and B alternating (bench/run_one_road.sh's
#      zoo part), unless ZOO="".
#
#   A=wgnn-before B=wgnn-after [OUT=DIR] [PACK=FILE.tgz] [ZOO="MODEL ..."] bash bench/run_step_fusions.sh
set -uo pipefail
cd "$(dirname "$0")/.."
A=${A:?A=FILE: the wgnn binary before}
B=${B:?B=FILE: the wgnn binary after}
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/one_road}
mkdir -p "$OUT/logs" "$WORK"
A=$A B=$B OUT=$OUT WORK=$WORK ZOO="" bash bench/run_one_road.sh
DEC=$WORK/llama/decoder_with_past_model.onnx
P16=5,17,42,99,3,8,150,77,23,61,12,190,4,33,88,120
if [ -f "$DEC" ]; then
  for v in A B; do
    bin=$A
    [ $v = B ] && bin=$B
    "$bin" generate "$DEC" --prompt "$P16" --max-new-tokens 1024 --repeat 2 --json > "$OUT/generate_1024_$v.json" \
      2> "$OUT/generate_1024_$v.err"
    python3 - "$v" "$OUT/generate_1024_$v.json" <<'PY'
import json, sys
v, path = sys.argv[1], sys.argv[2]
try:
    j = json.loads(open(path).read().strip().splitlines()[-1])
    r = j["last_run"]
    f = j["first_run"]
    print(f"llama decoder, 1024 new tokens, {v}: {r['ms_per_token']:.3f} ms/token, median step "
          f"{r['median_step_ms']:.3f} ms (second run), {r['step_host']['dispatches']} dispatches a step; first run "
          f"{f['total_ms']:.0f} ms in all, {f['plans_built']} plans, capacity {f['cache_capacity']}, second "
          f"{r['total_ms']:.0f} ms")
except Exception as e:  # noqa: BLE001
    print(f"llama decoder, 1024 new tokens, {v}: no result ({e})")
PY
  done
  GEN=$WORK/genai/decoder_with_past_model.onnx
  if [ -f "$GEN" ] || python3 scripts/models/genai_decoder.py --size small --out "$WORK" > "$OUT/logs/export_genai.log" 2>&1; then
    for v in A B; do
      bin=$A
      [ $v = B ] && bin=$B
      "$bin" generate "$GEN" --prompt "$P16" --max-new-tokens 64 --repeat 3 --json > "$OUT/generate_genai_$v.json" \
        2> "$OUT/generate_genai_$v.err"
      python3 - "$v" "$OUT/generate_genai_$v.json" <<'PY'
import json, sys
v, path = sys.argv[1], sys.argv[2]
try:
    j = json.loads(open(path).read().strip().splitlines()[-1])
    r = j["last_run"]
    print(f"genai decoder (4-bit), {v}: {r['ms_per_token']:.3f} ms/token, {r['step_host']['dispatches']} dispatches "
          f"a step, tokens {j['tokens'][0][:12]}...")
except Exception as e:  # noqa: BLE001
    print(f"genai decoder (4-bit), {v}: no result ({e})")
PY
    done
  fi
  WGNN=$B bash bench/profile_decoder_step.sh "$DEC" 127 --runs 5 --top 0 > "$OUT/profile_step_B.txt" 2>&1 &&
    sed -n '/^kernel/,$p' "$OUT/profile_step_B.txt" | head -40
fi
if [ -n "${ZOO-x}" ]; then
  if [ -n "${ZOO+x}" ]; then export ZOO; fi
  A=$A B=$B OUT=$OUT WORK=$WORK LLAMA=0 bash bench/run_one_road.sh
fi
# PACK=FILE: everything written under OUT in one archive (a machine that
# returns few files gets them all).
if [ -n "${PACK:-}" ]; then
  tar czf "$PACK" --exclude="$(basename "$PACK")" -C "$OUT" .
fi
