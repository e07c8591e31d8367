"""Greedy generation with ONNX Runtime over the files of
scripts/models/decoders.py (Optimum's layout), the same loop as wgnn's
generate/generate.h written for ONNX Runtime: the reference of
generate_vs_ort.py, and (with the WebGPU provider, through node: not here)
of the GPU benchmark.

    python ort_loop.py DIR PROMPT_IDS N   -> prints the N new ids
"""
import sys
import time

import numpy as np
import onnxruntime as ort


def greedy(folder, prompt, n, providers=("CPUExecutionProvider",), timer=None):
    def session(name):
        import os
        p = os.path.join(folder, name)
        return ort.InferenceSession(p, providers=list(providers)) if os.path.exists(p) else None

    dec, first, enc = session("decoder_with_past_model.onnx"), session("decoder_model.onnx"), session("encoder_model.onnx")
    states = None
    if enc:
        x = np.load(f"{folder}/encoder_input.npy")
        states = enc.run(None, {enc.get_inputs()[0].name: x})[0]
    ids = np.array([prompt], dtype=np.int64)
    cache = {}
    out = []

    def feed(s, tokens, past_len, prompt_step):
        f = {}
        for i in s.get_inputs():
            nm = i.name
            if nm in ("input_ids", "decoder_input_ids"):
                f[nm] = tokens
            elif nm in ("attention_mask", "decoder_attention_mask"):
                f[nm] = np.ones((1, past_len + tokens.shape[1]), np.int64)
            elif nm == "position_ids":
                f[nm] = (np.arange(tokens.shape[1], dtype=np.int64) + past_len)[None, :]
            elif nm == "encoder_hidden_states":
                f[nm] = states
            elif nm.startswith("past"):
                if prompt_step:
                    shape = [1 if k == 0 else (0 if not isinstance(d, int) else d) for k, d in enumerate(i.shape)]
                    f[nm] = np.zeros(shape, np.float32)
                else:
                    f[nm] = cache[nm]
            else:
                raise SystemExit(f"input {nm}: no role")
        names = [o.name for o in s.get_outputs()]
        res = dict(zip(names, s.run(None, f)))
        for k, v in res.items():
            if k.startswith("present"):
                cache["past_key_values" + k[len("present"):]] = v
        return res["logits"]

    past_len = 0
    logits = feed(first or dec, ids, 0, True)
    past_len += ids.shape[1]
    tok = int(np.argmax(logits[0, -1]))
    out.append(tok)
    if timer:
        timer(0)
    for i in range(1, n):
        logits = feed(dec, np.array([[tok]], np.int64), past_len, False)
        past_len += 1
        tok = int(np.argmax(logits[0, -1]))
        out.append(tok)
        if timer:
            timer(i)
    return out


if __name__ == "__main__":
    folder, prompt, n = sys.argv[1], [int(v) for v in sys.argv[2].split(",")], int(sys.argv[3])
    print(" ".join(str(t) for t in greedy(folder, prompt, n)))
