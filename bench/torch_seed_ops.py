"""The seed-op shapes through PyTorch on the same GPU, same byte counts as
bench/ops_bench.cpp. One JSON object per line."""
import json
import sys

import torch

CASES = [
    ("layer_norm", (4096, 768)), ("layer_norm", (4096, 1024)), ("layer_norm", (4096, 3072)),
    ("layer_norm", (65536, 1024)), ("layer_norm", (1500, 512)),
    ("batch_norm", (1, 64, 512, 512)), ("batch_norm", (1, 32, 256, 256)), ("batch_norm", (8, 256, 64, 64)),
    ("relu", (64 << 20,)), ("sigmoid", (64 << 20,)),
]


def timed(fn, iters=50, reps=5):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / iters)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    dtypes = [torch.float32] + ([torch.float16] if "--f16" in sys.argv else [])
    aten = torch.ops.aten
    with torch.inference_mode():
        for dt in dtypes:
            esz = torch.finfo(dt).bits // 8
            for op, shape in CASES:
                x = torch.randn(shape, device="cuda", dtype=dt)
                n = x.numel()
                nbytes = 2 * n * esz
                if op == "layer_norm":
                    w = shape[-1]
                    wt = torch.rand(w, device="cuda", dtype=dt)
                    bt = torch.rand(w, device="cuda", dtype=dt)
                    fn = lambda: aten.native_layer_norm(x, [w], wt, bt, 1e-5)
                    nbytes += 2 * w * esz + 2 * (n // w) * 4
                elif op == "batch_norm":
                    c = shape[1]
                    p = [torch.rand(c, device="cuda", dtype=dt) + 0.5 for _ in range(4)]
                    fn = lambda: aten._native_batch_norm_legit_no_training(x, p[0], p[1], p[2], p[3], 0.1, 1e-5)
                else:
                    f = getattr(torch, op)
                    fn = lambda: f(x)
                ms = timed(fn)
                print(json.dumps({"impl": "torch", "op": op, "shape": list(shape), "dtype": str(dt).split(".")[1],
                                  "us": ms * 1e3, "gbs": nbytes / (ms * 1e-3) / 1e9,
                                  "device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)


main()
