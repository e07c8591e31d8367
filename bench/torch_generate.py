"""PyTorch eager generation on the GPU with its key/value cache: the same
decoders (scripts/models/decoders.py, seeded weights) run by their own loop
(decoders.torch_greedy), in float32 or float16, one token to the host per
step (as transformers' generate does). Prints one JSON line: the tokens,
the prompt step's time and the median of the later steps, host to host, of
the last of --repeat runs.

    python3 bench/torch_generate.py --model gpt --dtype fp16 [--new 64] [--repeat 2]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "models"))
import decoders  # noqa: E402

PROMPT = [5, 17, 42, 99, 3, 8, 150, 77, 23, 61, 12, 190, 4, 33, 88, 120]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=["gpt", "bart", "whisper"])
    ap.add_argument("--size", default="full", choices=["mini", "full"])
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"tool": f"torch-eager-{a.dtype}", "ok": False, "why": "no CUDA device"}))
        return 0
    dev = "cuda"
    dtype = torch.float16 if a.dtype == "fp16" else torch.float32
    mods, c = decoders.build(a.model, a.size)
    for m in mods.values():
        m.to(device=dev, dtype=dtype)
    enc_in = decoders.encoder_input(a.model, c) if a.model != "gpt" else None
    result = None
    for _ in range(a.repeat):
        marks = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        toks = decoders.torch_greedy(a.model, mods, c, PROMPT, a.new, device=dev, dtype=dtype, enc_in=enc_in,
                                     timer=lambda i: marks.append(time.perf_counter()))
        steps = [(marks[i] - marks[i - 1]) * 1000 for i in range(1, len(marks))]
        result = {"tool": f"torch-eager-{a.dtype}", "ok": True, "model": a.model, "tokens": toks,
                  "total_ms": (time.perf_counter() - t0) * 1000, "prompt_ms": (marks[0] - t0) * 1000,
                  "steps": len(steps), "median_step_ms": statistics.median(steps),
                  "ms_per_token": (marks[-1] - marks[0]) * 1000 / max(1, len(marks) - 1),
                  "torch": torch.__version__}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
