"""The installed package: what the wheel carries and how its libraries find
one another (RUNPATH $ORIGIN, no path into a build tree)."""
import glob
import os
import re
import subprocess

import wgnn

PKG = os.path.dirname(os.path.abspath(wgnn.__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dynamic(path):
    """RUNPATH entries and NEEDED names; in a wheel repaired by auditwheel
    (scripts/wheel), the entries naming its wgnn.libs/ folder are left out
    and the NEEDED names it rewrote (name-hash.so...) are kept."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    runpath = [p for r in re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.*)\]", out) for p in r.split(":") if p]
    assert all(p.startswith("$ORIGIN") for p in runpath), runpath  # nothing outside the package
    runpath = [p for p in runpath if not p.endswith("/wgnn.libs")]
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", out)
    return runpath, needed


def test_libraries_find_each_other_by_origin():
    (module,) = glob.glob(os.path.join(PKG, "_wgnn*.so"))
    runpath, needed = dynamic(module)
    assert runpath == ["$ORIGIN/lib"], runpath
    assert any(n.startswith("libwgnn.so") for n in needed), needed
    (lib,) = [p for p in glob.glob(os.path.join(PKG, "lib", "libwgnn.so*")) if not os.path.islink(p)][:1]
    runpath, needed = dynamic(lib)
    assert runpath == ["$ORIGIN"], runpath
    dawn = [n for n in needed if "webgpu" in n]
    assert dawn and all("/" not in n for n in dawn), needed
    assert os.path.exists(os.path.join(PKG, "lib", dawn[0]))
    runpath, _ = dynamic(os.path.join(PKG, "bin", "wgnn"))
    assert runpath == ["$ORIGIN/../lib"], runpath


def test_lavapipe_carried_where_setup_fetched_it():
    if not os.path.exists(os.path.join(ROOT, ".deps", "lavapipe", "lvp_icd.json")):
        return  # a machine with a GPU driver: set-up fetched none, the package carries none
    icd = os.path.join(PKG, "lib", "wgnn", "lavapipe", "lvp_icd.json")
    assert os.path.exists(icd)
    with open(icd) as f:
        assert '"./root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"' in f.read()
    info = wgnn.get_device_info()
    if info["driver_source"].startswith(("no GPU device", "bundled lavapipe")):
        assert os.path.join(PKG, "lib", "wgnn") in info["driver_source"], info["driver_source"]


def test_version_is_the_librarys():
    from importlib.metadata import version

    assert version("wgnn") == wgnn.__version__
