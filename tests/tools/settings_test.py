"""The runtime's settings (util/settings.h) against their documentation and
their readers:
  - `wgnn info --settings --json` lists every known setting, each with a
    description, and docs/SETTINGS.md has a row for each and no other;
  - every setting the library's code reads by name (settings.get/is/value,
    env_flag/env_ms/env_is) is a known one, so none fails at run time as
    unknown;
  - the CLI maps the environment onto them: a variable set for the CLI
    shows as the setting's value, and a malformed one is an Error naming it.

usage: settings_test.py WGNN_CLI REPO_ROOT
"""
import json
import os
import pathlib
import re
import subprocess
import sys

CLI, ROOT = sys.argv[1], pathlib.Path(sys.argv[2])
LIBRARY = ["util", "gpu", "graph", "ops", "ir", "passes", "onnx", "image", "matting", "generate"]
READ = re.compile(r'(?:\.get|\.is|\.value|env_flag\([^,]+,|env_ms\([^,]+,|env_is\(|(?<![a-z_])env\()\s*\(?"([A-Z][A-Z_0-9]+)"')


def cli(args, env=None):
    return subprocess.run([CLI] + args, capture_output=True, text=True, timeout=120, env=env)


def main():
    p = cli(["info", "--settings", "--json"])
    assert p.returncode == 0, p.stderr
    listed = json.loads(p.stdout)
    names = [s["name"] for s in listed]
    assert len(names) == len(set(names)) and len(names) >= 60, names
    assert all(s["what"] for s in listed)

    doc = (ROOT / "docs" / "SETTINGS.md").read_text()
    documented = re.findall(r"^\| `([A-Z][A-Z_0-9]+)` \|", doc, re.M)
    missing = sorted(set(names) - set(documented))
    extra = sorted(set(documented) - set(names))
    assert not missing and not extra, f"docs/SETTINGS.md: missing {missing}, not settings {extra}"

    read = set()
    for layer in LIBRARY:
        for f in (ROOT / layer).rglob("*.cpp"):
            read |= set(READ.findall(f.read_text(errors="replace")))
    unknown = sorted(read - set(names))
    assert not unknown, f"read by the library but not known settings: {unknown}"
    assert len(read) >= 50, f"only {len(read)} settings found read: the pattern missed the readers"

    env = dict(os.environ)
    env["WGNN_MATMUL_TILE"] = "32x64"
    got = {s["name"]: s["value"] for s in json.loads(cli(["info", "--settings", "--json"], env).stdout)}
    assert got["WGNN_MATMUL_TILE"] == "32x64", got["WGNN_MATMUL_TILE"]
    env["WGNN_GPU_TIMEOUT_S"] = "soon"
    p = cli(["info"], env)
    assert p.returncode != 0 and "WGNN_GPU_TIMEOUT_S='soon'" in p.stderr, p.stderr
    print(f"settings: {len(names)} known, documented, {len(read)} read by the library, mapped by the CLI")
    return 0


if __name__ == "__main__":
    sys.exit(main())
