"""Times whole models in one run: wgnn (`wgnn bench --json`), ONNX Runtime's
WebGPU and CPU execution providers (bench/ort_bench.js in a peer folder made
by bench/make_ort_peer.sh), PyTorch eager fp32 and fp16 (CUDA), and
PyTorch compiled fp32 and fp16 (torch.compile(mode="reduce-overhead"):
Inductor with CUDA graphs; CUDA only, a skip with its reason on the CPU),
and writes a markdown table, a bar chart and the raw results.

    python3 bench/compare_models.py --wgnn build/wgnn --ort-peer DIR --out docs/results
        [--models all|NAME,...] [--mini] [--opset 17] [--runs 50] [--warmup 10]
        [--isnet auto|none|FILE.onnx] [--device auto|cuda|cpu] [--name models_h200] [--wgnn-fp16]

Every figure is the median (and minimum) of host-to-host milliseconds at
batch 1: inputs from host memory, one inference, outputs back in host
memory, as a user of each runtime pays it. Models come from the zoo
(scripts/models/zoo.py, exported by scripts/models/export.py with their
inputs); each tool gets the same input data. ISNet (an ONNX file, no
PyTorch version) is timed by wgnn and ONNX Runtime only. Each measurement
runs in its own process, one after the other.

--wgnn-fp16 also times wgnn in float16 mode (`wgnn bench --fp16`: float16
weights and activations, float32 accumulation; docs/FP16.md),
as the tool "wgnn-fp16", with its own columns in the table.

ONNX Runtime has no such switch: at float16 it needs a float16 model. The
tool "ort-webgpu-fp16" exports each zoo model a second time in float16
(export.py --half: model.half(), float inputs as float16, traced on CUDA when
there is one) and times that file with the WebGPU provider, in the column
"ORT WebGPU fp16" beside wgnn's fp16 columns. An export that fails (e.g. a
CPU-only torch without float16 kernels) is that tool's error for the model.
ISNet is not exported (its file already holds a float16 graph with float32
inputs), so it has no cell there. Leave the tool out with --skip
ort-webgpu-fp16.

Writes OUT/NAME.jsonl (one line per model and tool), OUT/NAME.md and
OUT/NAME.png (matplotlib; skipped with a note when it is missing).
`--report-only FILE.jsonl...` rebuilds the table and chart from earlier
results (later lines win), e.g. to merge runs over model subsets.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = ["wgnn", "torch-fp32", "torch-fp16", "torch-compile-fp32", "torch-compile-fp16", "ort-webgpu",
         "ort-webgpu-fp16", "ort-cpu"]

# The issue's figures (median ms host to host, batch 1, H200): PyTorch fp32,
# PyTorch fp16, ONNX Runtime 1.30 WebGPU, and wgnn's target.
ISSUE = {
    "isnet": ("ISNet 1024", None, None, 186, 30),
    "modnet": ("MODNet 512", 11.1, 13.4, 12.1, 6),
    "resnet50": ("ResNet-50 224", 4.1, 8.6, 5.7, 2.5),
    "mobilenetv2": ("MobileNetV2 224", 6.6, 7.4, 3.2, 1.5),
    "convnext_tiny": ("ConvNeXt-T 224", 6.5, 5.5, 4.7, 2.5),
    "deit_tiny": ("DeiT-T 224", 3.3, 3.2, 5.0, 1.5),
    "davit_base": ("DaViT-B 768", 17.7, 14.4, 44.1, 12),
    "whisper_base_encoder": ("Whisper-base encoder", 4.8, 4.0, 8.6, 3),
    "bart_base_decoder": ("BART-base decoder 32 tokens", 6.1, 5.7, 5.9, 3),
}
ORDER = list(ISSUE)

# Why ISNet has no ORT WebGPU fp16 figure (the table's note).
ISNET_FP16 = ("ISNet has no ORT WebGPU fp16 figure: its ONNX file is already a float16 model inside (float16 "
              "weights, the convolutions in float16 between Cast nodes) with float32 inputs and outputs, and it has "
              "no PyTorch version to export in float16; its ORT WebGPU column times that file as it is.")


def log(msg):
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def short_error(p_stdout, p_stderr, limit=300):
    lines = [l for l in (p_stderr or "").strip().splitlines() + (p_stdout or "").strip().splitlines()
             if l.strip() and "XDG_RUNTIME_DIR" not in l]
    errs = [l for l in lines if l.startswith("FAIL ")] or [l for l in lines if "error" in l.lower()]
    msg = (errs[-1] if errs else lines[-1] if lines else "no output").strip()
    return msg[:limit]


def run_tool(cmd, timeout, env=None):
    """Runs one measurement; returns (result dict or None, error or None, seconds)."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.time() - t0
    except OSError as e:
        return None, f"could not start {cmd[0]}: {e}", time.time() - t0
    secs = time.time() - t0
    res = last_json_line(p.stdout)
    if p.returncode != 0 or res is None:
        return None, f"exit {p.returncode}: {short_error(p.stdout, p.stderr)}", secs
    return res, None, secs


# --- PyTorch, one measurement per process -----------------------------------

def torch_worker(a):
    """--torch-worker: times one zoo model in PyTorch, eager or (--compile) compiled by
    torch.compile(mode="reduce-overhead"): Inductor with CUDA graphs; prints one JSON line.
    A compiled model's first run includes its compilation."""
    import numpy as np
    import torch
    sys.path.insert(0, a.zoo)
    from zoo import MODELS  # noqa: E402

    spec = MODELS[a.torch_worker]
    dev = torch.device(a.device)
    half = a.dtype == "fp16"
    if half and dev.type != "cuda":
        raise SystemExit("fp16 needs CUDA")
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = spec.build(a.mini)
    model = model.to(dev).eval()
    if half:
        model = model.half()
    if a.compile:
        model = torch.compile(model, mode="reduce-overhead")
    if dev.type == "cuda":
        torch.cuda.synchronize()
    load_ms = (time.perf_counter() - t0) * 1e3
    names = list(spec.inputs(a.mini))  # forward() order
    host = {}
    for n in names:
        path = os.path.join(a.inputs, n + ".npy")
        host[n] = torch.from_numpy(np.load(path)) if os.path.exists(path) else spec.inputs(a.mini)[n]

    def to_host(o):
        if isinstance(o, torch.Tensor):
            return o.cpu()
        if isinstance(o, dict):
            return {k: to_host(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [to_host(v) for v in o]
        if hasattr(o, "to_tuple"):
            return to_host(o.to_tuple())
        return o

    def once():
        args = []
        for n in names:
            x = host[n].to(dev)
            if half and x.is_floating_point():
                x = x.half()
            args.append(x)
        return to_host(model(*args))  # .cpu() waits for the GPU

    with torch.inference_mode():
        t0 = time.perf_counter()
        once()
        first_ms = (time.perf_counter() - t0) * 1e3
        # CUDA graphs are recorded after a few calls: a compiled model warms up at least 3 times.
        for _ in range(max(a.warmup, 3) if a.compile else a.warmup):
            once()
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            once()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    n = len(times)
    med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    print(json.dumps({"model": a.torch_worker, "dtype": a.dtype, "device": str(dev), "compiled": bool(a.compile),
                      "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                      "torch_version": torch.__version__, "runs": a.runs, "warmup": a.warmup,
                      "load_ms": load_ms, "first_run_ms": first_ms, "median_ms": med, "min_ms": times[0],
                      "max_ms": times[-1]}))


# --- the run ------------------------------------------------------------------

def pick_device(choice):
    if choice != "auto":
        return choice
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def ort_version(peer):
    try:
        with open(os.path.join(peer, "node_modules", "onnxruntime-node", "package.json")) as f:
            return json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return "?"


def measure(a):
    wanted = None if a.models == "all" else [m.strip() for m in a.models.split(",") if m.strip()]
    if wanted == ["isnet"]:
        MODELS, ZOO = {}, []
    elif not os.path.isfile(os.path.join(a.zoo, "zoo.py")):
        raise SystemExit(f"compare_models: {a.zoo}/zoo.py is missing: the model zoo (scripts/models, with "
                         "zoo.py and export.py) is needed for every model but ISNet (--models isnet)")
    else:
        sys.path.insert(0, a.zoo)
        from zoo import MODELS, ZOO  # noqa: E402
    wanted = list(ZOO) if wanted is None else wanted
    unknown = [m for m in wanted if m not in MODELS and m != "isnet"]
    if unknown:
        raise SystemExit(f"compare_models: unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(MODELS)}")
    isnet = None
    if a.isnet not in ("none", "auto"):
        isnet = a.isnet
    elif a.isnet == "auto" and not a.mini and (a.models == "all" or "isnet" in wanted):
        cand = os.path.join(REPO, ".deps", "models", "isnet.onnx")
        isnet = cand if os.path.exists(cand) else None
        if isnet is None:
            log(f"ISNet: {cand} is not there; skipped (pass --isnet FILE.onnx)")
    if isnet and not os.path.exists(isnet):
        raise SystemExit(f"compare_models: --isnet {isnet}: no such file")
    wanted = [m for m in wanted if m != "isnet"]
    if not os.path.isfile(a.wgnn):
        raise SystemExit(f"compare_models: --wgnn {a.wgnn}: no such file (build it: ninja -C build wgnn_cli)")
    peer = a.ort_peer or ""
    bench_js = os.path.join(peer, "bench.js")
    ort_skipped = {"ort-webgpu", "ort-webgpu-fp16", "ort-cpu"} <= {t for t in a.skip.split(",") if t}
    if a.ort_peer and not ort_skipped and not os.path.isfile(bench_js):
        raise SystemExit(f"compare_models: --ort-peer {a.ort_peer}: no bench.js there (bench/make_ort_peer.sh "
                         "builds the peer; unpack it with tar xJf)")
    node = os.path.join(peer, "node")
    node = node if os.path.isfile(node) else "node"
    device = pick_device(a.device)
    skip = set(s for s in a.skip.split(",") if s)
    bad = skip - set(TOOLS)
    if bad:
        raise SystemExit(f"compare_models: --skip {','.join(sorted(bad))}: tools are {', '.join(TOOLS)}")

    os.makedirs(a.out, exist_ok=True)
    onnx_dir = os.path.join(a.work, "onnx")
    os.makedirs(onnx_dir, exist_ok=True)
    jsonl = os.path.join(a.out, a.name + ".jsonl")
    meta = {"kind": "meta", "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            # WGNN_GIT_REV: the build's commit where the checkout's git does not
            # know it (a copy of a working tree whose .git is older).
            "git": os.environ.get("WGNN_GIT_REV") or subprocess.run(
                ["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?",
            "runs": a.runs, "warmup": a.warmup, "cpu_runs": a.cpu_runs, "mini": a.mini, "opset": a.opset,
            "device": device, "ort_version": ort_version(peer) if a.ort_peer else None}
    info = subprocess.run([a.wgnn, "info", "--json"], capture_output=True, text=True)
    try:
        meta["adapter"] = json.loads(info.stdout)["adapter"]
    except (ValueError, KeyError):
        meta["adapter"] = "?"
    with open(jsonl, "a" if a.append else "w") as f:
        f.write(json.dumps(meta) + "\n")

    def record(model, tool, res, err, secs, extra=None):
        row = {"kind": "result", "model": model, "tool": tool, "ok": err is None, "seconds": round(secs, 1)}
        if res:
            row["result"] = res
        if err:
            row["error"] = err
        if extra:
            row.update(extra)
        with open(jsonl, "a") as f:
            f.write(json.dumps(row) + "\n")
        if row.get("skipped"):
            log(f"  {tool:11s} skipped: {row['skipped']}")
        elif err:
            log(f"  {tool:11s} FAILED ({secs:.0f} s): {err}")
        else:
            gpu = f", GPU {res['gpu_ms']:.3f}" if res.get("gpu_ms") else ""
            log(f"  {tool:11s} median {res['median_ms']:.3f} ms, min {res['min_ms']:.3f} ms{gpu} ({secs:.0f} s)")

    def input_specs(input_dir):
        specs = []
        if input_dir:
            for fn in sorted(os.listdir(input_dir)):
                if fn.endswith(".npy"):
                    specs += ["--input", f"{fn[:-4]}={os.path.join(input_dir, fn)}"]
        return specs

    def run_ort(model, tool, path, specs):
        ep = "cpu" if tool == "ort-cpu" else "webgpu"
        runs, warm = (a.runs, a.warmup) if ep == "webgpu" else (a.cpu_runs, min(a.warmup, 2))
        res, err, secs = run_tool([node, bench_js, path, "--ep", ep, "--runs", str(runs), "--warmup",
                                   str(warm)] + specs, a.timeout)
        record(model, tool, res, err, secs)

    def run_onnx_tools(model, path, input_dir):
        specs = input_specs(input_dir)
        if "wgnn" not in skip:
            res, err, secs = run_tool([a.wgnn, "bench", path, "--json", "--runs", str(a.runs), "--warmup",
                                       str(a.warmup)] + specs, a.timeout)
            record(model, "wgnn", res, err, secs)
        if a.wgnn_fp16:
            res, err, secs = run_tool([a.wgnn, "bench", path, "--json", "--fp16", "--runs", str(a.runs),
                                       "--warmup", str(a.warmup)] + specs, a.timeout)
            record(model, "wgnn-fp16", res, err, secs)
        for tool in ("ort-webgpu", "ort-cpu"):
            if tool not in skip:
                run_ort(model, tool, path, specs)

    def export(name, path, input_dir, extra):
        """export.py for one model; returns (error or None, seconds)."""
        t0 = time.time()
        if a.reuse and os.path.exists(path) and os.path.isdir(input_dir):
            return None, 0.0
        cmd = [sys.executable, os.path.join(a.zoo, "export.py"), "--model", name, "--opset", str(a.opset),
               "--out", onnx_dir] + (["--mini"] if a.mini else []) + (["--dynamo"] if a.dynamo else []) + extra
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            err = None if p.returncode == 0 and os.path.exists(path) else \
                f"export failed (exit {p.returncode}): {short_error(p.stdout, p.stderr)}"
        except subprocess.TimeoutExpired:
            err = f"export timed out after {a.timeout} s"
        return err, time.time() - t0

    if isnet:
        log(f"isnet: {isnet}")
        run_onnx_tools("isnet", isnet, None)
    for name in wanted:
        base = f"{name}{'_mini' if a.mini else ''}_opset{a.opset}"
        path = os.path.join(onnx_dir, base + ".onnx")
        input_dir = os.path.join(onnx_dir, base + "_inputs")
        log(f"{name}: export")
        err, secs = export(name, path, input_dir, [])
        if err:
            # The tools that run this file (ort-webgpu-fp16 has a file of its own).
            for tool in ["wgnn", "wgnn-fp16", "ort-webgpu", "ort-cpu"]:
                if tool not in skip and (tool != "wgnn-fp16" or a.wgnn_fp16):
                    record(name, tool, None, err, secs)
        if os.path.exists(path):
            run_onnx_tools(name, path, input_dir)
        # ONNX Runtime at float16: the model exported in float16, its float
        # inputs as float16 .npy.
        half_path = os.path.join(onnx_dir, base + "_fp16.onnx")
        half_inputs = os.path.join(onnx_dir, base + "_fp16_inputs")
        if "ort-webgpu-fp16" not in skip:
            log(f"{name}: export in float16")
            err, secs = export(name, half_path, half_inputs, ["--half"])
            if err:
                record(name, "ort-webgpu-fp16", None, err, secs)
            else:
                run_ort(name, "ort-webgpu-fp16", half_path, input_specs(half_inputs))
        for compiled in (False, True):
            for dtype in ("fp32", "fp16"):
                tool = f"torch-compile-{dtype}" if compiled else f"torch-{dtype}"
                if tool in skip:
                    continue
                if dtype == "fp16" and device != "cuda":
                    record(name, tool, None, None, 0, {"ok": False, "skipped": "fp16 needs CUDA; this run is on the CPU"})
                    continue
                if compiled and device != "cuda":
                    record(name, tool, None, None, 0,
                           {"ok": False, "skipped": "torch.compile(mode='reduce-overhead') is timed on CUDA only"})
                    continue
                cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", name, "--dtype", dtype, "--device",
                       device, "--runs", str(a.runs if device == "cuda" else a.cpu_runs), "--warmup",
                       str(a.warmup if device == "cuda" else min(a.warmup, 2)), "--inputs", input_dir, "--zoo", a.zoo]
                res, err, secs = run_tool(cmd + (["--mini"] if a.mini else []) + (["--compile"] if compiled else []),
                                          a.timeout)
                record(name, tool, res, err, secs)
        if a.delete_onnx:
            for fn in (path, half_path):
                if os.path.exists(fn):
                    os.remove(fn)
    return [jsonl]


# --- the report ----------------------------------------------------------------

def load_results(files):
    meta, results, order = {}, {}, []
    for fn in files:
        with open(fn) as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                if row.get("kind") == "meta":
                    meta = row
                    continue
                key = (row["model"], row["tool"])
                results[key] = row
                if row["model"] not in order:
                    order.append(row["model"])
    order.sort(key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER))
    return meta, results, order


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def report(files, out, name):
    meta, results, models = load_results(files)
    mini = meta.get("mini", False)
    ortv = meta.get("ort_version") or ""
    ortv = "" if ortv in ("?", "not run") else ortv
    notes, note_ids = [], {}

    def note(text):
        if text not in note_ids:
            notes.append(text)
            note_ids[text] = len(notes)
        return f"[{note_ids[text]}]"

    def cell(model, tool, key="median_ms"):
        row = results.get((model, tool))
        if row is None and model == "isnet" and tool == "ort-webgpu-fp16":
            return "— " + note(ISNET_FP16)
        if row is None:
            return "—" if (tool.startswith("torch") and model == "isnet") else "not run"
        if row.get("skipped"):
            return "skipped " + note(row["skipped"])
        if not row["ok"]:
            return "fail " + note(f"{model}: {row.get('error', '?')}".replace("|", "/"))
        v = row["result"].get(key)
        return fmt_ms(v) if v is not None else "—"

    def value(model, tool):
        row = results.get((model, tool))
        return row["result"]["median_ms"] if row and row.get("ok") else None

    fp16 = any(tool == "wgnn-fp16" for (_, tool) in results)
    ort16 = any(tool == "ort-webgpu-fp16" for (_, tool) in results)
    compiled = any(tool.startswith("torch-compile") and row.get("ok") for (_, tool), row in results.items())
    lines = []
    title = "mini models (reduced width, depth and resolution)" if mini else "whole models"
    lines.append(f"# wgnn, PyTorch and ONNX Runtime on {title}")
    lines.append("")
    lines.append(f"{meta.get('date', '?')}, git {meta.get('git', '?')}; wgnn on {meta.get('adapter', '?')}; "
                 f"PyTorch on {meta.get('device', '?')}; "
                 + (f"ONNX Runtime {ortv} (onnxruntime-node). " if ortv else "ONNX Runtime not run. ") +
                 f"Opset {meta.get('opset', '?')}.")
    lines.append("")
    lines.append(f"Median milliseconds per inference, host to host, batch 1 (inputs from host memory, one "
                 f"inference, outputs back in host memory), over {meta.get('runs', '?')} runs after "
                 f"{meta.get('warmup', '?')} warm-up runs ({meta.get('cpu_runs', '?')} for ONNX Runtime CPU"
                 f"{' and PyTorch on the CPU' if meta.get('device') == 'cpu' else ''}); min in parentheses for wgnn. "
                 "wgnn GPU: timestamps around its compute passes (median). Encode: host time to encode and "
                 "submit the dispatches per run."
                 + (" wgnn fp16: the float32 model in wgnn's float16 mode (`wgnn bench --fp16`: float16 storage, "
                    "float32 accumulation)." if fp16 else "")
                 + (" ORT WebGPU fp16: ONNX Runtime's WebGPU provider on the model exported in float16 "
                    "(scripts/models/export.py --half: model.half(), float inputs as float16), the same precision "
                    "as wgnn fp16 where ONNX Runtime has no float16 switch." if ort16 else ""))
    lines.append("")
    head = ["model", "wgnn", "wgnn GPU", "encode µs"] + (["wgnn fp16", "wgnn fp16 GPU"] if fp16 else []) + (
            [f"ORT {ortv} WebGPU fp16".replace("  ", " ")] if ort16 else []) + [
            "PyTorch fp32", "PyTorch fp16"] + (["PyTorch compiled fp32", "PyTorch compiled fp16"] if compiled else []) + [
            f"ORT {ortv} WebGPU".replace("  ", " "),
            f"ORT {ortv} CPU".replace("  ", " "), "target", "wgnn / target"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
    for m in models:
        label = ISSUE[m][0] if m in ISSUE else m
        if mini and m in ISSUE and m != "isnet":
            label = f"{m} (mini)"
        wrow = results.get((m, "wgnn"))
        w = cell(m, "wgnn")
        if wrow and wrow.get("ok"):
            w = f"{w} ({fmt_ms(wrow['result'].get('min_ms'))})"
        enc = f"{wrow['result']['encode_us']:.0f}" if wrow and wrow.get("ok") and "encode_us" in wrow["result"] \
            else "—"
        target = ISSUE.get(m, (None,) * 5)[4] if not mini else None
        wv = value(m, "wgnn")
        ratio = f"{wv / target:.1f}×" if (wv is not None and target) else "—"
        tcell = f"≤{target:g}" if target else ("n/a (mini)" if mini else "—")
        w16 = [cell(m, "wgnn-fp16"), cell(m, "wgnn-fp16", "gpu_ms")] if fp16 else []
        w16 += [cell(m, "ort-webgpu-fp16")] if ort16 else []
        tc = [cell(m, "torch-compile-fp32"), cell(m, "torch-compile-fp16")] if compiled else []
        lines.append("| " + " | ".join([label, w, cell(m, "wgnn", "gpu_ms"), enc] + w16 + [cell(m, "torch-fp32"),
                                        cell(m, "torch-fp16")] + tc + [cell(m, "ort-webgpu"), cell(m, "ort-cpu"),
                                        tcell, ratio]) + " |")
    lines.append("")
    for i, n in enumerate(notes, 1):
        lines.append(f"[{i}] {n}  ")
    if notes:
        lines.append("")
    lines.append("The issue's reference figures (median ms host to host, batch 1, H200) and the targets:")
    lines.append("")
    lines.append("| model | PyTorch fp32 | PyTorch fp16 | ORT 1.30 WebGPU | target |")
    lines.append("|---|---:|---:|---:|---:|")
    for m in ORDER:
        label, f32, f16, ort, tgt = ISSUE[m]
        lines.append(f"| {label} | {fmt_ms(f32)} | {fmt_ms(f16)} | {fmt_ms(ort)} | ≤{tgt:g} |")
    lines.append("")
    chart = os.path.join(out, name + ".png")
    made = make_chart(results, models, chart, meta, mini)
    lines.append(f"![chart]({name}.png)" if made else f"(No chart: {made_reason[0]}.)")
    lines.append("")
    md = os.path.join(out, name + ".md")
    with open(md, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    log(f"wrote {md}" + (f" and {chart}" if made else ""))


made_reason = [""]


def make_chart(results, models, path, meta, mini):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        made_reason[0] = "matplotlib is not installed"
        log("matplotlib is not installed: no chart")
        return False
    series = [("wgnn", "wgnn", "#1f77b4")]
    if any(tool == "wgnn-fp16" for (_, tool) in results):
        series.append(("wgnn-fp16", "wgnn fp16", "#9467bd"))
    if any(tool == "ort-webgpu-fp16" for (_, tool) in results):
        series.append(("ort-webgpu-fp16", f"ORT {meta.get('ort_version', '?')} WebGPU fp16", "#e377c2"))
    series += [("torch-fp32", "PyTorch fp32", "#ff7f0e"),
              ("torch-fp16", "PyTorch fp16", "#2ca02c")]
    if any(tool.startswith("torch-compile") and row.get("ok") for (_, tool), row in results.items()):
        series += [("torch-compile-fp32", "PyTorch compiled fp32", "#8c564b"),
                   ("torch-compile-fp16", "PyTorch compiled fp16", "#17becf")]
    series += [("ort-webgpu", f"ORT {meta.get('ort_version', '?')} WebGPU", "#d62728")]
    if not models:
        made_reason[0] = "no results"
        return False
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(models) + 2), 4.5))
    width = 0.8 / len(series)
    for k, (tool, label, color) in enumerate(series):
        xs, ys = [], []
        for i, m in enumerate(models):
            row = results.get((m, tool))
            if row and row.get("ok"):
                xs.append(i - 0.4 + width * (k + 0.5))
                ys.append(row["result"]["median_ms"])
        if ys:
            ax.bar(xs, ys, width, label=label, color=color)
    if not mini:
        for i, m in enumerate(models):
            if m in ISSUE:
                ax.hlines(ISSUE[m][4], i - 0.45, i + 0.45, colors="black", linestyles="dashed",
                          label="target" if i == 0 else None)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels([(ISSUE[m][0] if m in ISSUE and not mini else m) for m in models], rotation=30,
                       ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("median ms per inference, host to host (log)")
    ax.set_title(f"{meta.get('adapter', '?')}, batch 1{' (mini models)' if mini else ''}", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wgnn", default=os.path.join(REPO, "build", "wgnn"))
    ap.add_argument("--ort-peer", help="folder with bench.js, node_modules/onnxruntime-node and node "
                                       "(bench/make_ort_peer.sh, unpacked)")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results"))
    ap.add_argument("--name", default="models_h200", help="base name of the .md, .png and .jsonl files")
    ap.add_argument("--models", default="all", help="'all' (the zoo's models, and ISNet) or NAME,NAME,...")
    ap.add_argument("--zoo", default=os.path.join(REPO, "scripts", "models"),
                    help="folder with zoo.py and export.py")
    ap.add_argument("--mini", action="store_true", help="the zoo's reduced models (for a CPU Vulkan driver)")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--dynamo", action="store_true", help="export with torch.export's exporter")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "wgnn_compare"),
                    help="where the exported models go")
    ap.add_argument("--reuse", action="store_true", help="reuse models already exported into --work")
    ap.add_argument("--delete-onnx", action="store_true", help="delete each exported model after timing it")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cpu-runs", type=int, default=5, help="runs for ONNX Runtime CPU and PyTorch on the CPU")
    ap.add_argument("--isnet", default="auto", help="auto (.deps/models/isnet.onnx when there), none, or a file")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="PyTorch's device")
    ap.add_argument("--skip", default="", help="tools to leave out: " + ",".join(TOOLS))
    ap.add_argument("--wgnn-fp16", action="store_true", help="also time wgnn in float16 mode (wgnn bench --fp16)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per export or measurement")
    ap.add_argument("--append", action="store_true", help="add to OUT/NAME.jsonl instead of starting it afresh")
    ap.add_argument("--report-only", nargs="+", metavar="FILE.jsonl", help="only rebuild the report")
    # Internal: one PyTorch measurement in this process.
    ap.add_argument("--torch-worker", help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="fp32", help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.runs < 1 or a.cpu_runs < 1 or a.warmup < 0:
        ap.error("--runs and --cpu-runs must be >= 1, --warmup >= 0")
    if a.torch_worker:
        torch_worker(a)
        return
    if a.report_only:
        report(a.report_only, a.out, a.name)
        return
    skipped = {t.strip() for t in a.skip.split(",") if t.strip()}
    if not a.ort_peer and any(t.startswith("ort-") and t not in skipped for t in TOOLS):
        ap.error("--ort-peer DIR is needed for the ONNX Runtime tools (bench/make_ort_peer.sh builds it; "
                 "--skip ort-webgpu,ort-webgpu-fp16,ort-cpu leaves them out)")
    files = measure(a)
    report(files, a.out, a.name)


if __name__ == "__main__":
    main()
