"""scripts/gpu-check's skip detection, on a device without subgroup
matrices (lavapipe): narrowed to the subgroup-matrix GoogleTest cases, which
skip here, it must fail, name the skipped cases and the missing ones, and
say the adapter is not the GPU machine's. Where the adapter has subgroup
matrices this check cannot be made: exit 77 (ctest: skipped).

usage: gpu_check_test.py GPU_CHECK BUILD_DIR WORKDIR"""
import json
import os
import subprocess
import sys

GPU_CHECK, BUILD, WORK = sys.argv[1:4]
info = subprocess.run([os.path.join(BUILD, "wgnn"), "info", "--json"], capture_output=True, text=True)
if info.returncode == 0 and json.loads(info.stdout)["features"]["subgroup-matrix"]:
    print("this adapter has subgroup matrices: run scripts/gpu-check itself")
    sys.exit(77)
env = dict(os.environ, OUT=WORK, GTEST_FILTER="SubgroupMatmul.*:SubgroupMatrix.*", GPU_CHECK_MODELS="0")
r = subprocess.run([GPU_CHECK, BUILD], capture_output=True, text=True, env=env, timeout=280)
out = r.stdout + r.stderr
print(out)
failures = []
for want in ("SKIPPED SubgroupMatmul.MatchesReferenceAndRegularKernel", "SKIPPED SubgroupMatrix.",
             "only 0 passed cases named SubgroupMatmul.*, expected at least 4", "the adapter lacks shader-f16 or subgroup matrices",
             "gpu-check: FAIL"):
    if want not in out:
        failures.append(f"gpu-check's output does not say '{want}'")
if r.returncode != 1:
    failures.append(f"gpu-check exited {r.returncode}, expected 1")
for f in failures:
    print("FAIL", f)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
