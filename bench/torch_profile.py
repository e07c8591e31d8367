#!/usr/bin/env python3
"""Where PyTorch spends its GPU time on a zoo model: the CUDA kernels of one
inference (eager, or torch.compile(mode="reduce-overhead")), grouped by kernel
name, as the counterpart of `wgnn profile`.

    python3 bench/torch_profile.py --model whisper_base_encoder [--dtype fp16] [--compile]
        [--runs 10] [--top 20] [--json]

Times come from torch.profiler (CUPTI): the sum of each kernel's time over
--runs inferences, divided by --runs. It also prints the host-to-host median of
the same inferences without the profiler (inputs from host memory, outputs
back), as bench/compare_models.py measures them.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a zoo name (scripts/models/zoo.py)")
    ap.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--compile", action="store_true", help='torch.compile(mode="reduce-overhead")')
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--top", type=int, default=20, help="kernel rows (0: all)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ap.add_argument("--zoo", default=os.path.join(HERE, "..", "scripts", "models"))
    a = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile
    sys.path.insert(0, a.zoo)
    from zoo import MODELS  # noqa: E402

    if a.model not in MODELS:
        raise SystemExit(f"torch_profile: unknown model {a.model!r}; the zoo has {', '.join(sorted(MODELS))}")
    if not torch.cuda.is_available():
        raise SystemExit("torch_profile: needs CUDA")
    spec = MODELS[a.model]
    torch.manual_seed(0)
    model = spec.build(False).cuda().eval()
    half = a.dtype == "fp16"
    if half:
        model = model.half()
    if a.compile:
        model = torch.compile(model, mode="reduce-overhead")
    host = spec.inputs(False)

    def once():
        args = []
        for x in host.values():
            x = x.cuda()
            if half and x.is_floating_point():
                x = x.half()
            args.append(x)
        out = model(*args)
        out = out[0] if isinstance(out, (list, tuple)) else out
        return out.cpu()

    with torch.inference_mode():
        for _ in range(max(a.warmup, 3)):
            once()
        times = []
        for _ in range(max(a.runs, 1)):
            t0 = time.perf_counter()
            once()
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.runs):
                once()
            torch.cuda.synchronize()

    rows = {}
    for ev in prof.events():
        dev_us = getattr(ev, "device_time", None)
        if dev_us is None:
            dev_us = getattr(ev, "cuda_time", 0.0)
        if ev.device_type != torch.autograd.DeviceType.CUDA or not dev_us:
            continue
        r = rows.setdefault(ev.name, [0.0, 0])
        r[0] += dev_us
        r[1] += 1
    total_us = sum(v[0] for v in rows.values()) / a.runs
    table = sorted(((name, us / a.runs, n / a.runs) for name, (us, n) in rows.items()), key=lambda t: -t[1])
    med = times[len(times) // 2]
    res = {"model": a.model, "dtype": a.dtype, "compiled": a.compile, "torch_version": torch.__version__,
           "device_name": torch.cuda.get_device_name(0), "median_ms": med,
           "kernel_ms_per_run": total_us / 1e3,
           "kernels": [{"name": n, "ms": us / 1e3, "per_run": c} for n, us, c in table]}
    if a.json:
        print(json.dumps(res))
        return
    print(f"{a.model} {a.dtype}{' compiled' if a.compile else ' eager'} on {res['device_name']} "
          f"(torch {torch.__version__}): host to host median {med:.3f} ms; kernels {total_us / 1e3:.3f} ms per run")
    print(f"{'ms/run':>8} {'share':>6} {'n/run':>6}  kernel")
    for n, us, c in table[: a.top or None]:
        print(f"{us / 1e3:8.3f} {100 * us / max(total_us, 1e-9):5.1f}% {c:6.1f}  {n[:110]}")


if __name__ == "__main__":
    main()
