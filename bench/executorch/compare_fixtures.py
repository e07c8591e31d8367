"""Every case of a committed .pte fixture folder (tests/data/pte/op_tests or
models: a manifest.json of cases, raw inputs and goldens) through
ExecuTorch's runtime (et_webgpu_run, bench/executorch/build.sh) and through
`wgnn run`: each against its golden within the case's atol/rtol (int8 and
bool exactly), and the two against each other. One JSON line a case.

    ET=OUT/et_webgpu_run WGNN=build/wgnn python3 bench/executorch/compare_fixtures.py tests/data/pte/op_tests [PTE ...]
"""
import json, os, subprocess, sys, tempfile, time
import numpy as np

DT = {"float32": np.float32, "int32": np.int32, "bool": np.int8, "int8": np.int8, "int64": np.int64}
ET = os.environ.get("ET", "et_webgpu_run")
WG = os.environ.get("WGNN", "build/wgnn")

def load_raw(path, dtype, shape):
    a = np.fromfile(path, dtype=np.dtype(DT[dtype]).newbyteorder("<")).reshape(shape)
    return a.astype(bool) if dtype == "bool" else a

def run(cmd):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return r, time.time() - t

def outs(d):
    o, k = [], 0
    while os.path.exists(f"{d}/output_{k}.npy"):
        o.append(np.load(f"{d}/output_{k}.npy")); k += 1
    return o

def check(got, e, data):
    g = e["golden"]
    want = load_raw(os.path.join(data, g["path"]), g["dtype"], g["shape"])
    k = g.get("output_index", 0)
    if k >= len(got): return "fail", f"output {k} missing", None
    x = np.asarray(got[k])
    if tuple(x.shape) != tuple(want.shape): return "fail", f"shape {list(x.shape)} vs {list(want.shape)}", None
    if g["dtype"] in ("bool", "int8", "int64", "int32"):
        bad = int(np.count_nonzero(x.astype(np.int64) != want.astype(np.int64)))
        return ("pass" if bad == 0 else "fail"), f"{bad} differ", float(np.abs(x.astype(np.float64)-want.astype(np.float64)).max()) if x.size else 0.0
    x64, r64 = x.astype(np.float64), want.astype(np.float64)
    err = np.abs(x64 - r64); tol = e["atol"] + e["rtol"] * np.abs(r64)
    ok = np.all((err <= tol) | (np.isnan(x64) & np.isnan(r64)))
    mad = float(np.nanmax(err)) if err.size else 0.0
    return ("pass" if ok else "fail"), "" if ok else f"{int(np.count_nonzero(~((err<=tol)|(np.isnan(x64)&np.isnan(r64)))))} of {err.size} outside", mad

def main():
    data = sys.argv[1]; only = set(sys.argv[2:])
    man = json.load(open(os.path.join(data, "manifest.json")))
    by = {}
    for e in man: by.setdefault(e["pte"], []).append(e)
    rows = []
    for pte, es in by.items():
        if only and pte not in only: continue
        with tempfile.TemporaryDirectory() as d:
            args = []
            for i, s in enumerate(es[0]["inputs"]):
                p = f"{d}/in{i}.npy"; np.save(p, load_raw(os.path.join(data, s["path"]), s["dtype"], s["shape"]))
                args += ["--input", f"input_{i}={p}"]
            r1, t1 = run([ET, os.path.join(data, pte), *args, "--output-dir", f"{d}/et", "--runs", "1", "--warmup", "0", "--json"])
            r2, t2 = run([WG, "run", os.path.join(data, pte), *args, "--output-dir", f"{d}/wg"])
            eo = outs(f"{d}/et") if r1.returncode == 0 else None
            wo = outs(f"{d}/wg") if r2.returncode == 0 else None
            ew = None
            if eo is not None and wo is not None and len(eo) == len(wo):
                ew = max((float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.shape == b.shape and a.size else (0.0 if a.shape == b.shape else float("inf"))) for a, b in zip(eo, wo)) if eo else 0.0
            for e in es:
                name = f"{e['op']}/{e['case']}"
                if eo is None:
                    msg = (r1.stderr.strip().splitlines() or ["?"])
                    msg = [m for m in msg if "et_webgpu_run: error" in m] or msg[-1:]
                    est, emsg, emad = "error", msg[-1][:300], None
                else:
                    est, emsg, emad = check(eo, e, data)
                if wo is None:
                    wst, wmsg, wmad = "error", (r2.stderr.strip().splitlines() or ["?"])[-1][:200], None
                else:
                    wst, wmsg, wmad = check(wo, e, data)
                rows.append(dict(case=name, pte=pte, et=est, et_msg=emsg, et_maxabs=emad, wgnn=wst, wgnn_msg=wmsg, wgnn_maxabs=wmad, et_vs_wgnn=ew))
                print(json.dumps(rows[-1]), flush=True)
    for who in ("et", "wgnn"):
        counts = {}
        for r in rows:
            counts[r[who]] = counts.get(r[who], 0) + 1
        print(f"# {'ExecuTorch' if who == 'et' else 'wgnn'}: {len(rows)} cases: "
              + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), file=sys.stderr)
    both = [r["et_vs_wgnn"] for r in rows if r["et_vs_wgnn"] is not None]
    if both:
        print(f"# where both ran: {len(both)} cases, max |ExecuTorch - wgnn| = {max(both):.3g}", file=sys.stderr)


main()
