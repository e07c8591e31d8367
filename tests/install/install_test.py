"""wgnn as a user outside its tree gets it (docs/INSTALL.md).

    install_test.py consumers  SOURCE BUILD WORK
        installs BUILD into a prefix (the Runtime and Development components)
        and builds against it: the C++ example of docs/INSTALL.md with
        find_package(wgnn) (tests/install/cmake_consumer, shared and static)
        and the C example with `pkg-config --cflags --libs wgnn`. Both run a
        tiny model (y = 2 x + 1) and must print 2 x + 1 for x = 1, 2, 3, 4.
    install_test.py relocated  SOURCE BUILD WORK
        installs, moves the prefix to another folder and runs bin/wgnn there
        with no variable naming a path: --version, info (Dawn and, where
        set-up fetched it, lavapipe found relative to the install), the C
        example, and remove-bg with the model found through the documented
        lookup ($WGNN_HOME/models, then share/wgnn/models).
    install_test.py subproject SOURCE BUILD WORK
        a parent project takes the source in with add_subdirectory and with
        FetchContent: both configure, and the C example compiles against
        wgnn::wgnn's usage requirements and wgnn's own util objects build
        (the whole library is not rebuilt: the other two cases link it).
        With WGNN_TEST_FULL_SUBPROJECT=1 the add_subdirectory parent builds
        everything and runs the example on a tiny model (minutes).

Nothing is rebuilt in BUILD: it installs what the build made.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from tiny_matting import alpha_of, matting_model  # noqa: E402

EXPECTED = "y = 3 5 7 9"


def run(cmd, env=None, cwd=None):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600)
    if p.returncode != 0:
        print(p.stdout)
        sys.exit(f"FAIL: {cmd[0]} exited with {p.returncode}")
    return p.stdout


def readme_blocks(source):
    """The code blocks docs/INSTALL.md marks for this test: <!-- example: NAME -->
    followed by a fenced block."""
    text = open(os.path.join(source, "docs", "INSTALL.md"), encoding="utf-8").read()
    blocks = dict(re.findall(r"<!-- example: (\S+) -->\s*```\w*\n(.*?)```", text, re.S))
    for name in ("example.c", "example.cpp"):
        if name not in blocks:
            sys.exit(f"FAIL: docs/INSTALL.md has no block marked <!-- example: {name} -->")
    return blocks


def write_examples(source, work):
    paths = {}
    for name, code in readme_blocks(source).items():
        paths[name] = os.path.join(work, name)
        with open(paths[name], "w") as f:
            f.write(code)
    return paths


def affine_model(path):
    """y = 2 x + 1 over x of shape [N, 4] (N dynamic)."""
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"]), helper.make_node("Add", ["t", "one"], ["y"])], "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
         helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def clean_env(**extra):
    """The environment with nothing that points wgnn, Vulkan or the loader at
    a path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WGNN_", "VK_", "LD_")) and k not in ("XDG_CACHE_HOME",)}
    env.update(extra)
    return env


def install(build, prefix):
    shutil.rmtree(prefix, ignore_errors=True)
    for component in ("Runtime", "Development"):
        run(["cmake", "--install", build, "--prefix", prefix, "--component", component])


def check_output(out, what):
    lines = [l for l in out.splitlines() if l.startswith("y =")]
    if lines != [EXPECTED]:
        print(out)
        sys.exit(f"FAIL: {what} printed {lines}, expected ['{EXPECTED}'] (2 x + 1 for x = 1, 2, 3, 4)")
    print(f"ok: {what}: {EXPECTED}")


def build_c_with_pkg_config(prefix, source_file, out):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "wgnn"], env=env).split()
    libdir = run(["pkg-config", "--variable=libdir", "wgnn"], env=env).strip()
    run(["cc", "-std=c99", "-Wall", "-Werror", source_file, "-o", out] + flags + [f"-Wl,-rpath,{libdir}"])


def consumers(source, build, work):
    prefix = os.path.join(work, "prefix")
    install(build, prefix)
    ex = write_examples(source, work)
    model = os.path.join(work, "affine.onnx")
    affine_model(model)

    cbuild = os.path.join(work, "cmake_consumer")
    shutil.rmtree(cbuild, ignore_errors=True)
    run(["cmake", "-S", os.path.join(source, "tests", "install", "cmake_consumer"), "-B", cbuild, "-G", "Ninja",
         f"-DCMAKE_PREFIX_PATH={prefix}", f"-DAPP_SOURCE={ex['example.cpp']}", "-DWITH_STATIC=ON"])
    run(["cmake", "--build", cbuild])
    check_output(run([os.path.join(cbuild, "app"), model], env=clean_env()), "C++ consumer (find_package, shared)")
    check_output(run([os.path.join(cbuild, "app_static"), model], env=clean_env()),
                 "C++ consumer (find_package, static)")

    app = os.path.join(work, "c_app")
    build_c_with_pkg_config(prefix, ex["example.c"], app)
    check_output(run([app, model], env=clean_env()), "C consumer (pkg-config)")


def relocated(source, build, work):
    first = os.path.join(work, "first")
    install(build, first)
    moved = os.path.join(work, "elsewhere", "wgnn")
    shutil.rmtree(os.path.dirname(moved), ignore_errors=True)
    os.makedirs(os.path.dirname(moved))
    shutil.move(first, moved)
    wgnn = os.path.join(moved, "bin", "wgnn")
    env = clean_env(HOME=os.path.join(work, "home"))

    for f in ("bin/wgnn", "lib/libwgnn.so"):
        dyn = run(["readelf", "-d", os.path.join(moved, f)])
        paths = re.findall(r"R(?:UN)?PATH.*\[(.*)\]", dyn)
        if not paths or any(not p.startswith("$ORIGIN") for p in ":".join(paths).split(":")):
            sys.exit(f"FAIL: {f} has RUNPATH {paths}, expected $ORIGIN-relative entries only")
    version = run([wgnn, "--version"], env=env).strip()
    if not re.fullmatch(r"wgnn \d+\.\d+\.\d+", version):
        sys.exit(f"FAIL: wgnn --version printed '{version}'")
    info = run([wgnn, "info"], env=env)
    print(info)
    if os.path.isdir(os.path.join(moved, "lib", "wgnn", "lavapipe")) and "lavapipe" in info:
        if os.path.join(moved, "lib", "wgnn", "lavapipe") not in info:
            sys.exit("FAIL: the installed wgnn did not take the lavapipe inside its own prefix")
        print("ok: lavapipe found inside the moved prefix")

    # The C example, built against the moved prefix.
    ex = write_examples(source, work)
    model = os.path.join(work, "affine.onnx")
    affine_model(model)
    app = os.path.join(work, "c_app")
    build_c_with_pkg_config(moved, ex["example.c"], app)
    check_output(run([app, model], env=env), "C consumer against the moved prefix")

    # remove-bg with no --model: first $WGNN_HOME/models, then share/wgnn/models.
    from PIL import Image
    photo = os.path.join(work, "photo.png")
    rgb = (200, 60, 30)
    Image.new("RGB", (40, 24), rgb).save(photo)
    home = os.path.join(work, "wgnn_home")
    os.makedirs(os.path.join(home, "models"), exist_ok=True)
    matting_model(os.path.join(home, "models", "isnet_any_size.onnx"), 32, 32)
    share = os.path.join(moved, "share", "wgnn", "models")

    def remove_bg(out, **extra):
        run([wgnn, "remove-bg", photo, "-o", out, "--quiet"], env=dict(env, **extra))
        px = Image.open(out).convert("RGBA").getpixel((20, 12))
        if px[3] != alpha_of(rgb) or px[:3] != rgb:
            sys.exit(f"FAIL: remove-bg gave {px}, expected {rgb} with alpha {alpha_of(rgb)}")

    remove_bg(os.path.join(work, "cutout_home.png"), WGNN_HOME=home)
    print("ok: remove-bg found its model in $WGNN_HOME/models")
    # No model anywhere: a clear error naming the folders looked in.
    p = subprocess.run([wgnn, "remove-bg", photo, "-o", os.path.join(work, "none.png")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode == 0 or share not in p.stdout or "WGNN_HOME" not in p.stdout:
        print(p.stdout)
        sys.exit("FAIL: remove-bg without a model must fail naming the folders it looked in")
    print("ok: without a model remove-bg fails naming where it looked")
    os.makedirs(share, exist_ok=True)
    shutil.copy(os.path.join(home, "models", "isnet_any_size.onnx"), share)
    remove_bg(os.path.join(work, "cutout_share.png"))
    print("ok: remove-bg found its model in the moved prefix's share/wgnn/models")


def subproject(source, build, work):
    ex = write_examples(source, work)
    for mode, fetch in (("add_subdirectory", "OFF"), ("FetchContent", "ON")):
        pbuild = os.path.join(work, f"parent_{mode}")
        shutil.rmtree(pbuild, ignore_errors=True)
        run(["cmake", "-S", os.path.join(source, "tests", "install", "parent"), "-B", pbuild, "-G", "Ninja",
             f"-DWGNN_SOURCE={source}", f"-DAPP_SOURCE={ex['example.c']}", f"-DFETCH={fetch}"])
        run(["cmake", "--build", pbuild, "--target", "parent_app_objects", "wgnn_util"])
        if os.path.exists(os.path.join(pbuild, "wgnn", "libwgnn.so")):
            sys.exit("FAIL: the subproject test was to build no library")
        print(f"ok: {mode}: configured; the example compiled against wgnn::wgnn; wgnn_util built")
        if mode == "add_subdirectory" and os.environ.get("WGNN_TEST_FULL_SUBPROJECT") == "1":
            run(["cmake", "--build", pbuild, "--target", "parent_app"])
            model = os.path.join(work, "affine.onnx")
            affine_model(model)
            check_output(run([os.path.join(pbuild, "parent_app"), model]), "add_subdirectory parent, built in full")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("consumers", "relocated", "subproject"):
        sys.exit(__doc__)
    mode, source, build, work = sys.argv[1], *map(os.path.abspath, sys.argv[2:])
    os.makedirs(work, exist_ok=True)
    {"consumers": consumers, "relocated": relocated, "subproject": subproject}[mode](source, build, work)
    print("PASS")


if __name__ == "__main__":
    main()
