"""PyTorch matrix products on the same shapes as bench/gemm_bench.cpp: on the
square sizes, fp16 (cuBLAS, tensor cores, fp32 accumulation) and fp32 with
TF32 off; on the MxNxK shapes after them, fp16 only. One JSON line per dtype
and shape, GPU time from CUDA events (median of reps).
    python3 bench/torch_gemm.py 4096,8192 [1504x512x2048 ...]"""
import json
import sys

import torch

sizes = [int(s) for s in sys.argv[1].split(",") if s] if len(sys.argv) > 1 else [4096]
shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[2:]]
torch.backends.cuda.matmul.allow_tf32 = False
runs = [((n, n, n), dtype) for n in sizes for dtype in (torch.float16, torch.float32)]
runs += [(s, torch.float16) for s in shapes]
for (m, n, k), dtype in runs:
    a = torch.rand(m, k, device="cuda", dtype=dtype) * 2 - 1
    b = torch.rand(k, n, device="cuda", dtype=dtype) * 2 - 1
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
    print(json.dumps({"bench": "torch gemm", "dtype": str(dtype).replace("torch.", ""), "M": m, "N": n, "K": k,
                      "us": ms * 1e3, "tflops": 2 * m * n * k / (ms * 1e-3) / 1e12}), flush=True)
