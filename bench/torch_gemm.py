"""PyTorch matrix products on the same square shapes as bench/gemm_bench.cpp:
fp16 (cuBLAS, tensor cores, fp32 accumulation) and fp32 with TF32 off. One
JSON line per dtype and size, GPU time from CUDA events (median of reps)."""
import json
import sys

import torch

sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [4096]
torch.backends.cuda.matmul.allow_tf32 = False
for n in sizes:
    for dtype in (torch.float16, torch.float32):
        a = torch.rand(n, n, device="cuda", dtype=dtype) * 2 - 1
        b = torch.rand(n, n, device="cuda", dtype=dtype) * 2 - 1
        c = a @ b
        torch.cuda.synchronize()
        times = []
        for _ in range(6):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(10):
                torch.matmul(a, b, out=c)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / 10)
        times = sorted(times[1:])
        ms = times[len(times) // 2]
        print(json.dumps({"bench": "torch gemm", "dtype": str(dtype).replace("torch.", ""), "M": n, "N": n, "K": n,
                          "us": ms * 1e3, "tflops": 2 * n ** 3 / (ms * 1e-3) / 1e12}), flush=True)
