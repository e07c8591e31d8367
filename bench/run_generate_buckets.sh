#!/usr/bin/env bash
# On the GPU machine: the decoder's cache kept at a power-of-two capacity (a
# plan per capacity, generate/generate.h) against a plan per length
# (--exact-cache), on the Llama- and GPT-style decoders of
# scripts/models/decoders.py at GPT-2-small's size, exported with
# torch.onnx.export in Optimum's layout. In one run, per model:
#   1. 64 new tokens after a 16-token prompt, three runs in one process, with
#      capacities and with --exact-cache: tokens against ONNX Runtime CPU's
#      (bench/ort_greedy.py), ms per token of the third run, plans built;
#   2. 1,024 new tokens after the 16-token prompt, two runs in one process:
#      plans built, first run against the second, the prompt step against a
#      decode step times the prompt length; the tokens against a plan per
#      length (--exact-cache, one run) and against ONNX Runtime CPU's;
#   3. a 128-token prompt and 64 new tokens, two runs: the prompt step;
#   4. case 1 with the decoder fusions off (WGNN_DISABLE_PASSES=
#      fuse_rms_norm,fuse_rotary,fuse_silu): dispatches per step, ms per token.
#
#   bash bench/run_generate_buckets.sh [llama gpt]
#
# Variables: WGNN (build/wgnn), OUT (/tmp/out), WORK (/tmp/gen: the exported
# models), PYTHON (python3: torch, onnx, onnxruntime). Writes
# $OUT/buckets.jsonl and prints a table; exits non-zero if tokens differ.
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/gen}
PY=${PYTHON:-python3}
P16=5,17,42,99,3,8,150,77,23,61,12,190,4,33,88,120
P128=$("$PY" -c 'print(",".join(str((i * 37 + 11) % 997 + 3) for i in range(128)))')
mkdir -p "$OUT" "$WORK"
lines="$OUT/buckets.jsonl"
: > "$lines"
status=0
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(llama gpt)
record() {  # MODEL CASE JSON
  "$PY" -c 'import json,sys; j=json.loads(sys.argv[3]); j["model"]=sys.argv[1]; j["case"]=sys.argv[2]; print(json.dumps(j))' \
    "$1" "$2" "$3" >> "$lines"
}
wg() {  # MODEL CASE ARGS...: one wgnn generate --json, recorded
  local m=$1 c=$2; shift 2
  local j
  if j=$("$WGNN" generate "$WORK/$m/decoder_with_past_model.onnx" --json "$@" 2> "$OUT/err.txt"); then
    record "$m" "$c" "$(printf '%s\n' "$j" | tail -1)"
  else
    echo "buckets: $m $c failed: $(tail -3 "$OUT/err.txt")" >&2; status=1
  fi
}
for m in "${models[@]}"; do
  if [ ! -f "$WORK/$m/decoder_with_past_model.onnx" ]; then
    "$PY" scripts/models/decoders.py --model "$m" --size full --out "$WORK" > "$OUT/export_$m.txt" 2>&1 ||
      { echo "buckets: export of $m failed: $(tail -3 "$OUT/export_$m.txt")" >&2; status=1; continue; }
  fi
  for n in 64 $([ "$m" = gpt ] && echo 1008 || echo 1024); do
    if j=$("$PY" bench/ort_greedy.py "$WORK/$m" --prompt $P16 --new $n 2> "$OUT/err.txt"); then
      record "$m" "ort$n" "$(printf '%s\n' "$j" | tail -1)"
    else
      echo "buckets: ORT $n on $m failed: $(tail -3 "$OUT/err.txt")" >&2; status=1
    fi
  done
  wg "$m" capacity64 --prompt $P16 --max-new-tokens 64 --repeat 3
  wg "$m" exact64 --prompt $P16 --max-new-tokens 64 --repeat 3 --exact-cache
  WGNN_DISABLE_PASSES=fuse_rms_norm,fuse_rotary,fuse_silu wg "$m" capacity64_unfused --prompt $P16 --max-new-tokens 64 --repeat 3
  # GPT's position table has 1,024 rows: 16 + 1,008 tokens.
  long=1024
  [ "$m" = gpt ] && long=1008
  wg "$m" capacity1024 --prompt $P16 --max-new-tokens $long --repeat 2
  wg "$m" exact1024 --prompt $P16 --max-new-tokens $long --exact-cache
  wg "$m" capacity_prompt128 --prompt "$P128" --max-new-tokens 64 --repeat 2
done
"$PY" - "$lines" <<'PY' || status=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = 0
for m in dict.fromkeys(r["model"] for r in rows):
    R = {r["case"]: r for r in rows if r["model"] == m}
    print(f"\n{m}:")
    print("| case | plans built (first run) | cache capacity | first run ms | later run ms | prompt ms (first, later) | ms per token | dispatches per step | tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in ("capacity64", "exact64", "capacity64_unfused", "capacity1024", "exact1024", "capacity_prompt128"):
        r = R.get(c)
        if not r:
            print(f"| {c} | missing |"); bad = 1; continue
        ref = R.get(("ort1008" if m == "gpt" else "ort1024") if "1024" in c else "ort64", {}).get("tokens")
        toks = r["tokens"][0]
        if c == "capacity_prompt128":
            verdict = "(no reference)"
        elif ref is None:
            verdict = "no ORT reference"; bad = 1
        else:
            ref = ref[0] if ref and isinstance(ref[0], list) else ref
            same = toks == ref[:len(toks)]
            verdict = "= ORT CPU" if same else f"differ from ORT CPU at {next(i for i, (a, b) in enumerate(zip(toks, ref)) if a != b) if any(a != b for a, b in zip(toks, ref)) else len(toks)}"
            bad |= not same
        f, l = r["first_run"], r["last_run"]
        later = f"{l['total_ms']:.0f}" if r["runs"] > 1 else "-"
        lp = f"{l['prompt_ms']:.1f}" if r["runs"] > 1 else "-"
        print(f"| {c} | {f['plans_built']} | {f.get('cache_capacity', 0)} | {f['total_ms']:.0f} | {later} | {f['prompt_ms']:.1f}, {lp} | "
              f"{l['ms_per_token']:.3f} | {l['step_host']['dispatches']} | {verdict} |")
    a, e = R.get("capacity1024"), R.get("exact1024")
    if a and e:
        same = a["tokens"] == e["tokens"]
        print(f"capacity1024 tokens {'equal' if same else 'DIFFER from'} exact1024's")
        bad |= not same
    a = R.get("capacity1024")
    if a:
        print(f"capacity1024: first run / later run = {a['first_run']['total_ms'] / a['last_run']['total_ms']:.2f}; "
              f"plans built {a['first_run']['plans_built']}")
    p = R.get("capacity_prompt128")
    if p:
        step = p["last_run"]["median_step_ms"]
        print(f"prompt of 128: first run {p['first_run']['prompt_ms']:.1f} ms, later {p['last_run']['prompt_ms']:.1f} ms; "
              f"128 x median step = {128 * step:.1f} ms")
sys.exit(bad)
PY
exit $status
