"""bench/gemm_bench.cpp (wgnn_bench_gemm) end to end with the kernels
emulated (--emulate: scalar code in place of subgroup matrices, so it runs on
lavapipe): square sizes and MxNxK shapes with edges in every dimension,
float32 and float16 results, every result checked against the tool's own
double-precision reference; then bench/gemm_report.py --pivot on its output,
and the errors for a bad configuration and a bad shape. With --tensor-cores
(scripts/gpu-check, on a GPU with subgroup matrices) the same on the real
subgroup-matrix kernels.
  gemm_bench_test.py WGNN_BENCH_GEMM WORKDIR [--tensor-cores]"""
import json
import os
import subprocess
import sys

bench, work = sys.argv[1], sys.argv[2]
tensor_cores = sys.argv[3:] == ["--tensor-cores"]
if sys.argv[3:] and not tensor_cores:
    sys.exit(f"usage: {sys.argv[0]} WGNN_BENCH_GEMM WORKDIR [--tensor-cores]")
os.makedirs(work, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
report = os.path.join(here, "..", "..", "bench", "gemm_report.py")
configs = ["64x64x32:2x2:1", "64x64x32:2x2:2/t1", "64x32x32:2x1:1/t3", "64x64x32:2x2:1/c", "64x64x32:2x2:1/d2",
           "64x64x64:2x2:1", "64x64x16:2x2:2/d2/w/t1", "64x64x32:2x2:1/v/t2"]


def run(args):
    p = subprocess.run([bench] + ([] if tensor_cores else ["--emulate"]) + ["--warmup-ms", "0", "--reps", "1", "--iters", "1"] + args,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


if tensor_cores:  # vec4 workgroup tiles need a Dawn whose Tint takes them (docs/BENCHMARKS.md)
    configs = [c for c in configs if "/v" not in c]
failures = []
for f16 in (False, True):
    code, out, err = run(["--sizes", "64", "--shapes", "136x72x40", "8x8x8", "72x136x96", "--configs", *configs]
                         + (["--f16-out"] if f16 else []))
    if code != 0:
        failures.append(f"exit {code}: {err.strip()}")
        continue
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if len(lines) != 4 * len(configs):
        failures.append(f"{len(lines)} results, expected {4 * len(configs)}")
    for r in lines:
        what = f'{r["config"]} {r["M"]}x{r["N"]}x{r["K"]}'
        if "error" in r:
            failures.append(f"{what}: {r['error']}")
        elif not r["ok"]:
            failures.append(f"{what}: wrong result (max abs err {r['max_abs_err']})")
        elif f16 != r["config"].endswith(" f16out"):
            failures.append(f"{what}: config label does not say the result type")
    if f16:
        path = os.path.join(work, "shapes.jsonl")
        with open(path, "w") as fh:
            fh.write(out)
        table = subprocess.run([sys.executable, report, "--pivot", path], capture_output=True, text=True).stdout
        rows = [l for l in table.splitlines() if l.startswith("| ") and "x" in l.split("|")[1]]
        if len(rows) != 5 or "**" not in table:  # header + 4 shapes, a best cell per row
            failures.append("pivot table:\n" + table)

code, out, err = run(["--sizes", "64", "--configs", "64x64x30:2x2:1"])
if code == 0 and "error" not in out:
    failures.append("a bad configuration (BK 30) was accepted")
code, out, err = run(["--shapes", "64x60x64", "--configs", "64x64x32:2x2:1"])
if code == 0 or "bad --shapes entry" not in err:
    failures.append(f"a shape with N not a multiple of 8 gave exit {code}: {err.strip()}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"gemm bench: every {'tensor-core' if tensor_cores else 'emulated'} result checked, the pivot report and the "
      "errors as expected")
