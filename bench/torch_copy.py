"""Device-to-device copy bandwidth through PyTorch (the reference the copy
kernel is compared with), counting bytes read plus bytes written."""
import json
import sys

import torch

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
n = (mib << 20) // 4
src = torch.rand(n, device="cuda")
dst = torch.empty_like(src)
for _ in range(5):
    dst.copy_(src)
torch.cuda.synchronize()
times = []
for _ in range(20):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(10):
        dst.copy_(src)
    b.record()
    torch.cuda.synchronize()
    times.append(a.elapsed_time(b) / 10)
times.sort()
ms = times[len(times) // 2]
print(json.dumps({"what": "torch copy", "mib": mib, "ms": ms, "gbs": 2 * (mib << 20) / (ms * 1e-3) / 1e9,
                  "device": torch.cuda.get_device_name()}))
