"""Adapter selection end to end, with two adapters on a machine that has
none: the bundled lavapipe's driver file listed twice in VK_DRIVER_FILES
gives two Vulkan devices (the loader loads the driver once per file), so
Dawn lists two adapters. The CLI must open the one a selector names (index,
UUID, name), refuse one that does not exist with the list, follow
WGNN_ADAPTER, and leave CUDA_VISIBLE_DEVICES alone where no NVIDIA adapter
exists (Ray sets it on machines whose GPUs it only models).
The mapping of CUDA_VISIBLE_DEVICES onto NVIDIA adapters is tested on
made-up lists (tests/gpu/adapters_test.cpp) and on the GPU machine
(bench/adapters_gpu_check.sh).

usage: adapter_selection_test.py WGNN_CLI REPO_ROOT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CLI, ROOT = sys.argv[1], sys.argv[2]
LVP = os.path.join(ROOT, ".deps", "lavapipe")


def run(args, env, check=True):
    p = subprocess.run([CLI] + args, env=env, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"wgnn {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


def main():
    icd = os.path.join(LVP, "lvp_icd.json")
    if not os.path.exists(icd):
        print(f"error: {icd} is missing: scripts/setup fetches the bundled lavapipe", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="wgnn-adapters-")
    try:
        files = []
        for name in ("first.json", "second.json"):
            shutil.copy(icd, os.path.join(tmp, name))
            files.append(os.path.join(tmp, name))
        env = {k: v for k, v in os.environ.items() if k not in ("WGNN_ADAPTER", "CUDA_VISIBLE_DEVICES")}
        env["VK_DRIVER_FILES"] = ":".join(files)
        env["XDG_RUNTIME_DIR"] = env.get("XDG_RUNTIME_DIR", tmp)
        # The backported lavapipe needs the libdrm it came with (in lavapipe
        # mode wgnn preloads it; a driver named by the environment is loaded
        # as the environment says).
        lib = os.path.join(LVP, "root", "usr", "lib", "x86_64-linux-gnu")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")

        listed = json.loads(run(["info", "--adapters", "--json"], env).stdout)
        assert len(listed) == 2, f"two driver files should give two adapters: {listed}"
        assert [a["index"] for a in listed] == [0, 1], listed
        for a in listed:
            assert len(a["uuid"]) == 36 and a["uuid"].count("-") == 4, f"Vulkan reports a UUID: {a}"
            assert a["backend"] == "Vulkan" and a["type"] == "CPU", a

        def opened(args, extra_env=None):
            e = dict(env)
            e.update(extra_env or {})
            return json.loads(run(args + ["info", "--json"], e).stdout)

        default = opened([])
        assert default["index"] == 0 and default["selected_by"] == "Dawn's first high-performance adapter", default
        for sel, want in (("1", 1), ("0", 0), ("GPU-" + listed[1]["uuid"], 0), ("llvmpipe", 0)):
            got = opened(["--adapter", sel])
            # A UUID both devices share (one driver, twice) names the first.
            assert got["index"] == want, f"--adapter {sel}: opened {got['index']}, expected {want}"
            assert got["selected_by"] == f"adapter '{sel}'", got
            assert got["uuid"] == listed[want]["uuid"], got
        assert opened([], {"WGNN_ADAPTER": "1"})["index"] == 1, "WGNN_ADAPTER names the adapter"
        # Ray's CUDA_VISIBLE_DEVICES on a machine without NVIDIA adapters:
        # not applied, not an error.
        ray_like = opened([], {"CUDA_VISIBLE_DEVICES": "1"})
        assert ray_like["index"] == 0 and "CUDA" not in ray_like["selected_by"], ray_like
        assert opened([], {"CUDA_VISIBLE_DEVICES": ""})["index"] == 0

        # The adapter named is the one that computes.
        check = run(["--adapter", "1", "selfcheck"], env)
        assert "PASS" in check.stdout.upper() or "ok" in check.stdout.lower(), check.stdout

        # A selector that names nothing: an error listing both adapters.
        for bad in ("2", "nvidia", "GPU-ffffffff", "10de:2330"):
            p = run(["--adapter", bad, "info"], env, check=False)
            assert p.returncode != 0, f"--adapter {bad} should fail"
            assert "0: llvmpipe" in p.stderr and "1: llvmpipe" in p.stderr, f"--adapter {bad}: {p.stderr}"
        # A bundled lavapipe that cannot load (a wheel on an older glibc than
        # lavapipe's): asked for, an error saying why; chosen automatically,
        # the machine's own drivers instead, saying why.
        fake = os.path.join(tmp, "deps")
        lib_dir = os.path.join(fake, "lavapipe", "root", "usr", "lib", "x86_64-linux-gnu")
        os.makedirs(lib_dir)
        shutil.copy(icd, os.path.join(fake, "lavapipe", "lvp_icd.json"))
        with open(os.path.join(lib_dir, "libvulkan_lvp.so"), "w") as f:
            f.write("not a shared library\n")
        broken = {k: v for k, v in env.items() if k not in ("VK_DRIVER_FILES", "LD_LIBRARY_PATH")}
        broken["WGNN_DEPS_DIR"] = fake
        p = run(["--adapter", "lavapipe", "info"], broken, check=False)
        assert p.returncode != 0 and "does not load on this system" in p.stderr, p.stderr
        p = run(["info"], broken, check=False)
        assert "the bundled lavapipe does not load here: " in p.stdout + p.stderr, p.stdout + p.stderr
        print(f"adapter selection: {len(listed)} adapters, selectors, WGNN_ADAPTER and CUDA_VISIBLE_DEVICES checked")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
