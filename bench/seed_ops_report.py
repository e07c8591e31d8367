"""Merges wgnn and PyTorch seed-op results (JSON lines) into a markdown table."""
import json
import sys

rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        key = (j["op"], tuple(j["shape"]), j["dtype"])
        rows.setdefault(key, {})[j["impl"]] = j

print("| op | shape | dtype | wgnn µs | wgnn GB/s | copy GB/s (same bytes) | wgnn / copy | PyTorch µs | PyTorch GB/s | wgnn speed-up |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
for (op, shape, dt), r in rows.items():
    w, t = r.get("wgnn"), r.get("torch")
    if not w:
        continue
    cells = [op, "×".join(map(str, shape)), dt, f"{w['us']:.1f}", f"{w['gbs']:.0f}", f"{w['copy_gbs']:.0f}",
             f"{100 * w['ratio_to_copy']:.0f}%"]
    if t:
        cells += [f"{t['us']:.1f}", f"{t['gbs']:.0f}", f"{t['us'] / w['us']:.2f}×"]
    else:
        cells += ["—", "—", "—"]
    print("| " + " | ".join(cells) + " |")
