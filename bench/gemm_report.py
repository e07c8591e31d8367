"""Table of bench/gemm_bench.cpp (wgnn, subgroup matrices) beside
bench/torch_gemm.py (PyTorch fp16 and fp32) from one run:
  python3 bench/gemm_report.py wgnn_gemm.jsonl torch_gemm.jsonl
or, for a sweep of product shapes (`--shapes`), one row per shape and one
TFLOP/s column per kernel configuration, the best in bold, and PyTorch fp16
on the same shapes where its lines are given:
  python3 bench/gemm_report.py --pivot gemm_shapes.jsonl [torch_shapes.jsonl]"""
import json
import sys


def rows(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


if sys.argv[1] == "--pivot":
    sweep = rows(sys.argv[2])
    configs = list(dict.fromkeys(r["config"] for r in sweep))
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in sweep))
    ref = {(t["M"], t["N"], t["K"]): t for t in (rows(sys.argv[3]) if len(sys.argv) > 3 else [])
           if t["dtype"] == "float16"}
    print("| M x N x K | " + " | ".join(configs) + (" | PyTorch fp16 | best / PyTorch" if ref else "") + " |")
    print("|---" * (len(configs) + 1 + 2 * bool(ref)) + "|")
    for shape in shapes:
        got = {r["config"]: r for r in sweep if (r["M"], r["N"], r["K"]) == shape}
        best = max((r.get("tflops", 0) for r in got.values()), default=0)
        cells = []
        for c in configs:
            r = got.get(c)
            if r is None or "error" in r:
                cells.append("error" if r else "")
                continue
            cell = f'{r["tflops"]:.1f}' + ("" if r["ok"] else " (WRONG)")
            cells.append(f"**{cell}**" if r["tflops"] == best else cell)
        if ref:
            t = ref.get(shape)
            cells += [f'{t["tflops"]:.1f}', f'{best / t["tflops"]:.2f}'] if t else ["", ""]
        print(f"| {shape[0]}x{shape[1]}x{shape[2]} | " + " | ".join(cells) + " |")
    sys.exit(0)

wgnn, torch = rows(sys.argv[1]), rows(sys.argv[2])
print("| size | wgnn kernel | wgnn TFLOP/s | checked | PyTorch fp16 TFLOP/s | wgnn / PyTorch fp16 | PyTorch fp32 TFLOP/s |")
print("|---|---|---|---|---|---|---|")
for r in wgnn:
    same = [t for t in torch if (t["M"], t["N"], t["K"]) == (r["M"], r["N"], r["K"])]
    t16 = next((t for t in same if t["dtype"] == "float16"), None)
    t32 = next((t for t in same if t["dtype"] == "float32"), None)
    size = f'{r["M"]}x{r["N"]}x{r["K"]}'
    if "error" in r:
        print(f'| {size} | {r["config"]} | error: {r["error"][:80]} | | | | |')
        continue
    ratio = f'{r["tflops"] / t16["tflops"]:.2f}' if t16 else "-"
    print(f'| {size} | {r["config"]} | {r["tflops"]:.1f} | {"yes" if r["ok"] else "NO"} | '
          f'{t16["tflops"] if t16 else float("nan"):.1f} | {ratio} | {t32["tflops"] if t32 else float("nan"):.1f} |')
