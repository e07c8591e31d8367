"""Greedy generation with ONNX Runtime's Python package (CPU provider) over a
decoder-only folder made by scripts/models/decoders.py (Optimum's layout:
input_ids, attention_mask, position_ids, past_key_values.N.key/value ->
logits, present.N.*): the same loop as bench/ort_generate.js, for machines
with Python's onnxruntime and no Node.js. Prints one JSON line.

    python3 bench/ort_greedy.py DIR --prompt 1,2,3 [--new N]
"""
import argparse
import json
import os
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--new", type=int, default=64)
    a = ap.parse_args()
    s = ort.InferenceSession(os.path.join(a.dir, "decoder_with_past_model.onnx"), providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in s.get_inputs()}
    past_names = [n for n in inputs if n.startswith("past_key_values.")]
    outs = [o.name for o in s.get_outputs()]
    feed = {}
    for n in past_names:
        shape = inputs[n].shape  # [batch, kv_heads, past, head_dim]
        feed[n] = np.zeros((1, shape[1], 0, shape[3]), np.float32)
    ids = np.array([[int(t) for t in a.prompt.split(",")]], np.int64)
    total, tokens = 0, []
    t0 = time.perf_counter()
    for _ in range(a.new):
        t = ids.shape[1]
        feed["input_ids"] = ids
        feed["attention_mask"] = np.ones((1, total + t), np.int64)
        feed["position_ids"] = np.arange(total, total + t, dtype=np.int64)[None]
        res = dict(zip(outs, s.run(outs, feed)))
        for n in past_names:
            feed[n] = res[n.replace("past_key_values.", "present.")]
        total += t
        nxt = int(res["logits"][0, -1].argmax())
        tokens.append(nxt)
        ids = np.array([[nxt]], np.int64)
    print(json.dumps({"tool": "ORT cpu (Python)", "tokens": tokens, "total_ms": (time.perf_counter() - t0) * 1e3}))


if __name__ == "__main__":
    main()
