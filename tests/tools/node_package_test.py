"""The npm package end to end (docs/NODE.md): node/build.sh builds the addon
against the build folder's libwgnn.so and runs `npm pack`; the tarball is
installed into a fresh folder (offline: it has no dependencies); there
`node example.mjs` and `bun example.mjs` run a small ONNX model and cut out a
photo with ISNet, and node/test/api.test.mjs runs under `node --test` and
`bun test` (Bun comes from the npm registry: node/build.sh fetches a pinned
build into node/.cache).

    python3 node_package_test.py SOURCE_ROOT BUILD_DIR WORK_DIR

Nothing is skipped: a missing tool, model or photo is a failure that says
what to do.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time

PHOTO = "/usr/lib/python3/dist-packages/imageio/resources/images/astronaut.png"


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def run(cmd, cwd=None, env=None, timeout=300):
    t0 = time.time()
    print("$ " + " ".join(cmd), flush=True)
    # A session of its own: on a timeout the whole group goes (node --test
    # runs the file in a child).
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        print(out[-6000:], err[-6000:], sep="\n")
        fail(f"{cmd[0]} did not finish in {timeout} s")
    p = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    dt = time.time() - t0
    if p.returncode != 0:
        print(p.stdout[-6000:], p.stderr[-6000:], sep="\n")
        fail(f"{cmd[0]} exited with {p.returncode} after {dt:.1f} s")
    print(f"  ({dt:.1f} s)", flush=True)
    return p


def write_models(d):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def save(graph, name):
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(d, name))

    # y = x * [2, -1, 0.5, 3] + 1, x of shape [N, 4]
    save(helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])], "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(np.array([2, -1, 0.5, 3], np.float32), "w"),
         numpy_helper.from_array(np.array([1], np.float32), "b")]), "affine.onnx")

    # One op per element type.
    T = TensorProto
    ins = [("i64", T.INT64, 3), ("b", T.BOOL, 3), ("u8", T.UINT8, 3), ("i8", T.INT8, 2), ("i32", T.INT32, 2),
           ("f16", T.FLOAT16, 2)]
    nodes = [helper.make_node("Add", ["i64", "one64"], ["i64_out"]), helper.make_node("Not", ["b"], ["b_out"]),
             helper.make_node("Identity", ["u8"], ["u8_out"]), helper.make_node("Identity", ["i8"], ["i8_out"]),
             helper.make_node("Mul", ["i32", "three"], ["i32_out"]), helper.make_node("Mul", ["f16", "two16"], ["f16_out"])]
    inits = [numpy_helper.from_array(np.array([1], np.int64), "one64"),
             numpy_helper.from_array(np.array([3], np.int32), "three"),
             numpy_helper.from_array(np.array([2], np.float16), "two16")]
    save(helper.make_graph(nodes, "types", [helper.make_tensor_value_info(n, t, [k]) for n, t, k in ins],
                           [helper.make_tensor_value_info(n + "_out", t, [k]) for n, t, k in ins], inits),
         "types.onnx")

    # A decoder in the past_key_values / present layout over 8 ids: the
    # next token is the last one plus 1 (mod 8); the cache grows by a row of
    # 2 per token.
    nxt = np.zeros((8, 8), np.float32)
    nxt[np.arange(8), (np.arange(8) + 1) % 8] = 1
    save(helper.make_graph(
        [helper.make_node("Gather", ["next", "input_ids"], ["logits"]),
         helper.make_node("Gather", ["kv", "input_ids"], ["row"]),
         helper.make_node("Unsqueeze", ["row", "axes"], ["row4"]),
         helper.make_node("Concat", ["past_key_values.0.key", "row4"], ["present.0.key"], axis=2)], "decoder",
        [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("past_key_values.0.key", T.FLOAT, ["batch", 1, "past", 2])],
        [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", "tokens", 8]),
         helper.make_tensor_value_info("present.0.key", T.FLOAT, ["batch", 1, "length", 2])],
        [numpy_helper.from_array(nxt, "next"),
         numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(8, 2), "kv"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")]), "decoder.onnx")


def check_cutout(path, what):
    from PIL import Image
    import numpy as np

    im = Image.open(path)
    if im.mode != "RGBA" or im.size != (512, 512):
        fail(f"{what}: {path} is {im.mode} {im.size}; expected RGBA (512, 512), the photo's size")
    a = np.asarray(im)[..., 3]
    clear, opaque = float((a == 0).mean()), float((a == 255).mean())
    print(f"  {what}: alpha 0 on {clear:.1%}, 255 on {opaque:.1%}")
    if clear < 0.02 or opaque < 0.02:
        fail(f"{what}: the matte has too few transparent ({clear:.1%}) or opaque ({opaque:.1%}) pixels")
    return np.asarray(im)


def main():
    if len(sys.argv) != 4:
        fail("usage: node_package_test.py SOURCE_ROOT BUILD_DIR WORK_DIR")
    root, build, work = (os.path.abspath(a) for a in sys.argv[1:])
    t_start = time.time()
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            fail(f"{tool} is not installed (Debian: apt-get install nodejs npm; scripts/setup installs them)")
    isnet = os.path.join(root, ".deps", "models", "isnet_any_size.onnx")
    for f, why in ((isnet, "scripts/setup derives it"), (PHOTO, "Debian's python3-imageio has it")):
        if not os.path.exists(f):
            fail(f"{f} is missing ({why})")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    models = os.path.join(work, "models")
    os.makedirs(models)
    write_models(models)

    # 1. Build and pack.
    env = dict(os.environ, WGNN_BUILD_DIR=build)
    p = run([os.path.join(root, "node", "build.sh")], env=env, timeout=600)
    tgz = p.stdout.strip().splitlines()[-1]
    if not tgz.endswith(".tgz") or not os.path.exists(tgz):
        fail(f"node/build.sh did not print a tarball: {p.stdout[-2000:]}")
    with tarfile.open(tgz) as t:
        names = {m.name: m.size for m in t.getmembers()}
    unpacked = sum(names.values())
    print(f"  {os.path.basename(tgz)}: {os.path.getsize(tgz) / 1e6:.1f} MB packed, {unpacked / 1e6:.1f} MB "
          f"unpacked, {len(names)} files")
    # The build's Dawn (CMakeCache.txt): its library, and with the dawn-node
    # shim the dawn.node it loads from beside itself.
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        cache = dict(re.findall(r"^(WGNN_DAWN_LIBRARY|WGNN_DAWN):[A-Z]+=(.*)$", f.read(), re.M))
    dawn_lib = os.path.basename(cache["WGNN_DAWN_LIBRARY"])
    dawn_files = [dawn_lib] + (["dawn.node"] if cache.get("WGNN_DAWN") == "dawn-node" else [])
    for need in ["package/index.js", "package/index.mjs", "package/index.d.ts", "package/example.mjs",
                 "package/prebuilt/linux-x64/wgnn.node", "package/prebuilt/linux-x64/libwgnn.so.0.1"] + [
                 f"package/prebuilt/linux-x64/{n}" for n in dawn_files]:
        if need not in names:
            fail(f"the tarball lacks {need}")
    if os.path.exists(os.path.join(root, ".deps", "lavapipe", "lvp_icd.json")):
        if "package/prebuilt/linux-x64/wgnn/lavapipe/lvp_icd.json" not in names:
            fail("set-up fetched lavapipe but the tarball does not carry it")

    # 2. Install into a fresh folder, away from the checkout.
    app = os.path.join(work, "app")
    os.makedirs(app)
    with open(os.path.join(app, "package.json"), "w") as f:
        json.dump({"name": "wgnn-package-test", "private": True, "type": "module"}, f)
    run(["npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tgz], cwd=app)
    pkg = os.path.join(app, "node_modules", "wgnn")
    addon = os.path.join(pkg, "prebuilt", "linux-x64", "wgnn.node")
    ldd = run(["ldd", addon]).stdout
    for lib in ("libwgnn.so.0.1", dawn_lib):
        line = next((l for l in ldd.splitlines() if lib in l), "")
        if os.path.realpath(pkg) not in line and pkg not in line:
            fail(f"{lib} does not resolve inside the installed package: {line.strip() or 'not found'}")
    shutil.copy(os.path.join(pkg, "example.mjs"), app)
    shutil.copy(os.path.join(root, "node", "test", "api.test.mjs"), app)
    shutil.copy(os.path.join(root, "node", "test", "types.ts"), app)

    # The checkout's own lavapipe and Dawn are out of reach: a clean
    # environment for the runs.
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("WGNN_") and k not in ("LD_LIBRARY_PATH",)}
    run_env.update(WGNN_TEST_MODELS=models, WGNN_TEST_ISNET=isnet, WGNN_TEST_PHOTO=PHOTO)

    bun = os.path.join(root, "node", ".cache", "bun", "package", "bin", "bun")
    if not os.access(bun, os.X_OK):
        fail(f"{bun} is missing: node/build.sh fetches Bun from the npm registry")
    runtimes = [("node", ["node"]), ("bun", [bun])]

    # 3. The types: index.d.ts as the installed package has it.
    tsc = os.path.join(root, "node", ".cache", "typescript", "package", "bin", "tsc")
    run(["node", tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution",
         "nodenext", "types.ts"], cwd=app, timeout=120)

    # 4. The example, with each runtime.
    cutouts = {}
    for name, exe in runtimes:
        out = os.path.join(work, f"cutout_{name}.png")
        p = run(exe + ["example.mjs", os.path.join(models, "affine.onnx"), PHOTO, isnet, out, "160"], cwd=app,
                env=run_env)
        print("  " + p.stdout.strip().replace("\n", "\n  "))
        if "y = 3 -1 2.5 13" not in p.stdout:
            fail(f"{name} example.mjs: expected 'y = 3 -1 2.5 13' (x = [1, 2, 3, 4] times [2, -1, 0.5, 3] plus 1)")
        cutouts[name] = check_cutout(out, f"{name} example.mjs")
    if not (cutouts["node"] == cutouts["bun"]).all():
        fail("node and bun cut the photo out differently")

    # 5. The API tests, with each runtime's test runner.
    p = run(["node", "--test", "--test-reporter=spec", "api.test.mjs"], cwd=app, env=run_env, timeout=120)
    summary = [l.strip() for l in p.stdout.splitlines() if l.startswith(("\u2139 pass", "\u2139 fail"))]
    print("  node --test: " + "; ".join(summary))
    p = run([bun, "test", "--timeout", "120000", "./api.test.mjs"], cwd=app, env=run_env, timeout=120)
    summary = [l for l in (p.stdout + p.stderr).splitlines() if " pass" in l or " fail" in l]
    print("  bun test: " + "; ".join(s.strip() for s in summary[-2:]))

    print(f"ok: the npm package built, packed ({os.path.getsize(tgz) / 1e6:.1f} MB), installed and ran with node "
          f"and bun in {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
