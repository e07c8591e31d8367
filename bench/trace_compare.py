"""Sets `wgnn profile --trace` files of one model under several settings side
by side, dispatch by dispatch: each trace's dispatch times summed by label
(µs per model run; in `wgnn profile` each dispatch is timed in its own pass),
one column per setting and the ratio of each to the first. For tensor-core
products and convolutions ("subgroup-matrix MxNxK" in the label) the count
of 64x64 tiles (times the batch) too.

    python3 bench/trace_compare.py [--title T] [--kernel-has TEXT] [--min-us 10] \\
        --trace LABEL A.json --trace LABEL B.json ...

Prints a markdown table, rows in order of the first setting's time.
bench/run_settings.sh (PROFILE=1) makes the traces."""
import argparse
import collections
import json
import math
import re


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", nargs=2, action="append", metavar=("LABEL", "FILE"), required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--kernel-has", default="", help="only dispatches whose kernel name holds this text")
    ap.add_argument("--min-us", type=float, default=0.0, help="leave out rows below this in the first setting")
    a = ap.parse_args()
    labels = [t[0] for t in a.trace]
    sums = collections.defaultdict(lambda: [0.0] * len(labels))
    counts = collections.Counter()
    totals = []
    for i, (_, path) in enumerate(a.trace):
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        totals.append(sum(e["dur"] for e in events))
        for e in events:
            if a.kernel_has and a.kernel_has not in e["args"].get("kernel", ""):
                continue
            sums[e["name"]][i] += e["dur"]
            if i == 0:
                counts[e["name"]] += 1
    if a.title:
        print(f"### {a.title}\n")
    print("| dispatch | n | tiles | " + " | ".join(labels) + " | " +
          " | ".join(f"{l} / {labels[0]}" for l in labels[1:]) + " |")
    print("|---|---:|---:|" + "---:|" * (2 * len(labels) - 1))
    print("| all dispatches | | | " + " | ".join(f"{t:.1f}" for t in totals) + " | " +
          " | ".join(f"{t / totals[0]:.3f}" if totals[0] else "" for t in totals[1:]) + " |")
    for name, v in sorted(sums.items(), key=lambda kv: -kv[1][0]):
        if v[0] < a.min_us:
            continue
        tiles = ""
        m = re.search(r"subgroup-matrix (\d+)x(\d+)x(\d+)", name)
        if m:
            rows, cols = int(m.group(1)), int(m.group(2))
            b = re.search(r"batch (\d+)", name)
            tiles = str(math.ceil(rows / 64) * math.ceil(cols / 64) * (int(b.group(1)) if b else 1))
        cells = [f"{x:.1f}" if x else "" for x in v]
        ratios = [f"{x / v[0]:.2f}" if v[0] and x else "" for x in v[1:]]
        print(f"| {name} | {counts[name]} | {tiles} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    print()


if __name__ == "__main__":
    main()
