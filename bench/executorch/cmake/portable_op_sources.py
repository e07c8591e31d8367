"""Prints the ExecuTorch portable-kernel source files that define the given ops.

    python portable_op_sources.py EXECUTORCH_ROOT "aten::mul.out,aten::relu.out,..."

Each op is looked up in kernels/portable/functions.yaml for its kernel
function (torch::executor::mul_out), and the kernels/portable/cpu/op_*.cpp file
that defines that function is printed, one path a line (each file once). An op
that the portable library lacks is an error naming it.
"""

import os
import re
import sys

import yaml


def main():
    root, ops = sys.argv[1], [o.strip() for o in sys.argv[2].replace(";", ",").split(",") if o.strip()]
    with open(os.path.join(root, "kernels/portable/functions.yaml")) as f:
        funcs = yaml.safe_load(f)
    kernel_of = {}
    for e in funcs:
        for k in e.get("kernels") or []:
            op = e["op"] if "op" in e else e["func"].split("(", 1)[0]
            kernel_of[op] = k["kernel_name"].split("::")[-1]
    cpu = os.path.join(root, "kernels/portable/cpu")
    texts = {}
    for name in sorted(os.listdir(cpu)):
        if name.startswith("op_") and name.endswith(".cpp"):
            with open(os.path.join(cpu, name)) as f:
                texts[name] = f.read()
    out, missing = [], []
    for op in ops:
        key = op.split("::", 1)[-1]
        fn = kernel_of.get(key)
        if fn is None:
            missing.append(f"{op} (not in kernels/portable/functions.yaml)")
            continue
        # A definition starts at column 0 (calls from other kernels are
        # indented): "Tensor& fn(", "fn(" or a macro "DEFINE_...(fn, ...)".
        pat = re.compile(r"^(?:[^\s/#][^\n]*)?\b" + re.escape(fn) + r"\b\s*[(,]", re.M)
        hits = [n for n, t in texts.items() if pat.search(t)]
        if not hits:
            missing.append(f"{op} (no op_*.cpp defines {fn})")
            continue
        for h in hits:
            p = os.path.join(cpu, h)
            if p not in out:
                out.append(p)
    if missing:
        sys.exit("portable kernels not found: " + "; ".join(missing))
    print("\n".join(out))


if __name__ == "__main__":
    main()
