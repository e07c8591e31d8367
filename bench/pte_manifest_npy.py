"""The committed .pte fixtures (tests/data/pte/*/manifest.json) in the
layout of bench/pte_prepare.py, for bench/run_executorch.sh: OUT/NAME.pte
(a link), OUT/NAME.input_<i>.npy and OUT/NAME.output_<k>.npy (the goldens).

    python3 bench/pte_manifest_npy.py tests/data/pte/models OUT [NAME ...]

Prints the names written (one per .pte and set of inputs; several golden
cases of one run become its outputs).
"""
import json
import os
import sys

import numpy as np

src, out = sys.argv[1], sys.argv[2]
want = set(sys.argv[3:])
os.makedirs(out, exist_ok=True)
done = []
for case in json.load(open(os.path.join(src, "manifest.json"))):
    # One program per set of inputs: a dynamic-shape program's runs at
    # several sizes are named by their inputs ("modnet_dynamic_64x96").
    name = case["inputs"][0]["path"].rsplit(".in", 1)[0] if case["inputs"] else case["pte"][:-4]
    if want and name not in want:
        continue
    link = os.path.join(out, name + ".pte")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(os.path.join(src, case["pte"])), link)
    for i, t in enumerate(case["inputs"]):
        x = np.fromfile(os.path.join(src, t["path"]), dtype=t["dtype"]).reshape(t["shape"])
        np.save(os.path.join(out, f"{name}.input_{i}.npy"), x)
    g = case["golden"]
    y = np.fromfile(os.path.join(src, g["path"]), dtype=g["dtype"]).reshape(g["shape"])
    np.save(os.path.join(out, f"{name}.output_{g.get('output_index', 0)}.npy"), y)
    if name not in done:
        done.append(name)
print(" ".join(done))
