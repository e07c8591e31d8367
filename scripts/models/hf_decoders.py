"""Decoders as people download them: transformers' own model classes (Llama,
Qwen2, Qwen3, Mistral, Phi-3, Gemma 2, Gemma 3, GPT-2) built from small
configs with seeded random weights, each exported by torch.onnx.export in
Optimum's decoder-with-past layout (input_ids, attention_mask,
position_ids, past_key_values.N.key/value -> logits, present.N.key/value),
as DIR/<arch>/decoder_with_past_model.onnx. tests/generate/hf_decoders_vs_ort.py
runs each through `wgnn generate` against ONNX Runtime's greedy loop.

Needs PyTorch, transformers and onnx: .venv-executorch (scripts/setup-executorch).
The exports are committed (tests/data/hf_decoders/), so CI needs none of it.

usage: .venv-executorch/bin/python scripts/models/hf_decoders.py OUT [ARCH...]
"""
import os
import sys

import torch
import transformers
from transformers import DynamicCache

VOCAB = 128


def configs():
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  initializer_range=0.2, tie_word_embeddings=False)
    return {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, dict(common, rope_theta=10000.0)),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, dict(common)),
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, dict(common, head_dim=16)),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM, dict(common, sliding_window=4096)),
        "phi3": (transformers.Phi3Config, transformers.Phi3ForCausalLM, dict(common, pad_token_id=0)),
        "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM,
                   dict(common, head_dim=16, sliding_window=512, query_pre_attn_scalar=16)),
        "gemma3": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM,
                   dict(common, head_dim=16, sliding_window=512, query_pre_attn_scalar=16)),
        "gpt2": (transformers.GPT2Config, transformers.GPT2LMHeadModel,
                 dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=512, initializer_range=0.2)),
    }


class Step(torch.nn.Module):
    """One decoder step over a cache given as flat tensors."""

    def __init__(self, model, cfg, layers):
        super().__init__()
        self.model, self.cfg, self.layers = model, cfg, layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = DynamicCache(config=self.cfg)
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
        res = [out.logits]
        for i in range(self.layers):
            layer = out.past_key_values.layers[i]
            res += [layer.keys, layer.values]
        return tuple(res)


def export(arch, out_dir):
    cfg_cls, model_cls, kw = configs()[arch]
    torch.manual_seed(0)
    cfg = cfg_cls(**kw)
    cfg._attn_implementation = "eager"
    model = model_cls(cfg).eval()
    layers = cfg.num_hidden_layers
    heads_kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    past = [torch.zeros(1, heads_kv, 3, head_dim) for _ in range(2 * layers)]
    ids = torch.tensor([[5, 7]])
    mask = torch.ones(1, 5, dtype=torch.long)
    pos = torch.tensor([[3, 4]])
    names_in = ["input_ids", "attention_mask", "position_ids"] + [
        f"past_key_values.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    names_out = ["logits"] + [f"present.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
           "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
           "position_ids": {0: "batch_size", 1: "sequence_length"},
           "logits": {0: "batch_size", 1: "sequence_length"}}
    for n in names_in[3:] + names_out[1:]:
        dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
    folder = os.path.join(out_dir, arch)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "decoder_with_past_model.onnx")
    with torch.no_grad():
        torch.onnx.export(Step(model, cfg, layers), (ids, mask, pos, *past), path, input_names=names_in,
                          output_names=names_out, dynamic_axes=dyn, opset_version=17, dynamo=False)
    print(f"{arch}: {path} ({os.path.getsize(path) // 1024} KiB)")


def main():
    out = sys.argv[1]
    archs = sys.argv[2:] or list(configs())
    for a in archs:
        export(a, out)


if __name__ == "__main__":
    main()
