"""Decoders as onnxruntime-genai's model builder writes them: transformers'
Llama, Qwen2, Qwen3, Mistral, Phi-3, Gemma 2 and Gemma 3 at the small
configs of hf_decoders.py (seeded random weights), saved as a Hugging Face
folder with the test tokenizer (tests/data/text/chatml_folder, 211 tokens:
the vocabulary is 211 here) and converted by
`python -m onnxruntime_genai.models.builder -p int4 -e cpu`, the command its
documentation gives: model.onnx with com.microsoft GroupQueryAttention
(rotary inside), MatMulNBits (4-bit weights, blocks of 32, accuracy_level 4,
the lm_head too), SkipSimplifiedLayerNormalization, q/k/v as one product;
genai_config.json, the tokenizer and the chat template beside it. GPT-2 is
not among the builder's architectures.

DIR/<arch>/ holds what the builder wrote; tests/generate/hf_decoders_vs_ort.py
runs each through `wgnn generate` against ONNX Runtime's greedy loop. The
exports are committed (tests/data/genai_builder/), so CI needs none of this.

Needs .venv-executorch (scripts/setup-executorch): PyTorch, transformers,
onnxruntime-genai and onnx-ir.

usage: .venv-executorch/bin/python scripts/models/genai_builder.py OUT [ARCH...]
"""
import os
import shutil
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_decoders import configs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENIZER = os.path.join(ROOT, "tests", "data", "text", "chatml_folder")
VOCAB = 211  # the test tokenizer's
ARCHS = ["llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3"]
KEEP = ("model.onnx", "model.onnx.data", "genai_config.json", "tokenizer.json", "tokenizer_config.json",
        "chat_template.jinja")


def export(arch, out_dir):
    cfg_cls, model_cls, kw = configs()[arch]
    kw = dict(kw, vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if arch == "phi3":  # Phi-3-mini-4k's form (no LongRoPE): the context its positions were trained at
        kw["original_max_position_embeddings"] = kw["max_position_embeddings"]
    torch.manual_seed(0)
    model = model_cls(cfg_cls(**kw)).eval()
    folder = os.path.join(out_dir, arch)
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        model.save_pretrained(hf)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(TOKENIZER, f), hf)
        built = os.path.join(tmp, "out")
        p = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf, "-o", built,
                            "-p", "int4", "-e", "cpu", "-c", os.path.join(tmp, "cache")],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{arch}: the model builder failed:\n{p.stderr[-3000:]}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for f in KEEP:
            if os.path.exists(os.path.join(built, f)):
                shutil.copy(os.path.join(built, f), folder)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{arch}: {folder} ({size // 1024} KiB)")


def main():
    out = sys.argv[1]
    for a in sys.argv[2:] or ARCHS:
        export(a, out)


if __name__ == "__main__":
    main()
