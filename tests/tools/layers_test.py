#!/usr/bin/env python3
"""The layering rule of docs/ARCHITECTURE.md, checked on every source file:
a layer includes only itself and the layers below it. gpu/error.h (the
error types) may be included from anywhere. And the library reads no
environment variable (issue of docs/SETTINGS.md): no getenv call outside
the front ends (tools/, capi/, python/, node/), which map the environment
onto Settings. Exits 1 listing each include that reaches up and each
getenv in a library folder."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Each layer and the project folders it may include (besides itself).
BELOW = {
    "util": set(),
    "gpu": {"util"},
    "graph": {"gpu", "util"},
    "ops": {"graph", "gpu", "util"},
    "ir": {"ops", "graph", "gpu", "util"},
    "passes": {"ir", "ops", "graph", "gpu", "util"},
    "pte": {"passes", "ir", "ops", "graph", "gpu", "util"},
    "onnx": {"pte", "passes", "ir", "ops", "graph", "gpu", "util"},
    "image": {"util"},
    "text": {"util"},
    "matting": {"onnx", "pte", "passes", "ir", "ops", "graph", "gpu", "util", "image"},
    "generate": {"onnx", "pte", "passes", "ir", "ops", "graph", "gpu", "util"},
    "capi": {"matting", "generate", "onnx", "pte", "passes", "ir", "ops", "graph", "gpu", "util", "image", "wgnn"},
    "tools": {"capi", "matting", "generate", "text", "onnx", "pte", "passes", "ir", "ops", "graph", "gpu", "util", "image", "wgnn"},
    "python": {"capi", "matting", "generate", "text", "onnx", "pte", "passes", "ir", "ops", "graph", "gpu", "util", "image", "wgnn"},
    "node": {"capi", "matting", "generate", "onnx", "pte", "passes", "ir", "ops", "graph", "gpu", "util", "image", "wgnn"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)
# The front ends: they map the environment onto Settings (util/settings.h).
FRONT_ENDS = {"capi", "tools", "python", "node"}
# A call of getenv (or secure_getenv): not a mention in a comment or in
# Settings::from_variables(&std::getenv), which passes the function.
GETENV_CALL = re.compile(r'\b(?:secure_)?getenv\s*\(')


def main():
    bad = []
    checked = 0
    for layer, allowed in BELOW.items():
        for f in sorted((ROOT / layer).rglob("*")):
            if f.suffix not in (".h", ".cpp"):
                continue
            if {"build", ".cache", "node_modules", "prebuilt"} & set(f.relative_to(ROOT).parts):
                continue  # fetched or built, not the project's sources
            checked += 1
            text = f.read_text(errors="replace")
            if layer not in FRONT_ENDS:
                for n, line in enumerate(text.splitlines(), 1):
                    code = line.split("//", 1)[0]
                    if GETENV_CALL.search(code):
                        bad.append(f"{f.relative_to(ROOT)}:{n}: reads the environment ({line.strip()}); take it "
                                   "from Settings, which the front ends fill")
            for m in INCLUDE.finditer(text):
                top, rest = m.group(1), m.group(2)
                if top == layer or top in allowed or (top, rest) == ("gpu", "error.h"):
                    continue
                if top not in BELOW and top != "wgnn":
                    continue  # not a project folder (a generated or system header)
                bad.append(f"{f.relative_to(ROOT)}: includes {top}/{rest} (above {layer}/)")
    if checked < 50:
        print(f"layers: only {checked} source files found under {ROOT}: wrong root?")
        return 1
    for b in bad:
        print(b)
    print(f"layers: {checked} files, {len(bad)} includes that reach up or getenv calls in the library")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
