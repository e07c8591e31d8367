"""Decoders for generation, in plain PyTorch with seeded random weights, exported
with torch.onnx.export in the layout Optimum uses (past_key_values.* inputs,
present.* outputs, logits):

  gpt      decoder-only (GPT-2's blocks: learned positions, pre-norm, GELU MLP):
           decoder_with_past_model.onnx (input_ids, attention_mask,
           position_ids, past_key_values.N.key/value -> logits, present.N.*);
           the prompt runs it with an empty cache.
  bart     BART's decoder (post-norm, learned positions offset by 2, causal
           self-attention and cross-attention) with a small encoder:
           encoder_model.onnx (input_ids -> last_hidden_state),
           decoder_model.onnx (input_ids, encoder_hidden_states -> logits,
           present.N.decoder.*, present.N.encoder.*) for the prompt and
           decoder_with_past_model.onnx (input_ids, past_key_values.N.decoder.*
           and .encoder.* -> logits, present.N.decoder.*) after it: the
           cross-attention keys and values are computed once.
  whisper  Whisper's encoder (two Conv1d, GELU, sinusoidal positions, pre-norm
           blocks) over log-mel features and its decoder, in bart's layout.
  llama    decoder-only with Llama's blocks as transformers writes them: RMSNorm
           spelled out (x * rsqrt(mean(x*x) + eps) * w), rotary positions from
           position_ids over halves (cat([-x2, x1])), SwiGLU, grouped K/V heads
           widened by unsqueeze -> expand -> reshape, no biases, the output head
           tied to the embedding; gpt's layout (the cache holds the K/V heads).
  qwen2    llama with biases on the q, k and v projections (Qwen2's).

`--size mini` is small enough for a CPU Vulkan driver (CI); `--size full`
has the dimensions of GPT-2 small, BART-base and Whisper-base. The same
modules give the PyTorch loop (`torch_greedy`) that the GPU benchmark runs.

    python3 decoders.py --model gpt --size mini --out DIR   # writes DIR/gpt/*.onnx
"""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {
    "mini": dict(vocab=211, d=48, heads=4, layers=2, ffn=96, positions=160, mels=16, frames=64, enc_tokens=12),
    "full": None,  # per model below
}
FULL = {
    "gpt": dict(vocab=50257, d=768, heads=12, layers=12, ffn=3072, positions=1024),
    "bart": dict(vocab=50265, d=768, heads=12, layers=6, ffn=3072, positions=1026, enc_tokens=128),
    "whisper": dict(vocab=51865, d=512, heads=8, layers=6, ffn=2048, positions=448, mels=80, frames=3000),
    # GPT-2 small's width and depth with Llama's proportions (4 K/V heads).
    "llama": dict(vocab=32000, d=768, heads=12, kv_heads=4, layers=12, ffn=2048, positions=2048),
    "qwen2": dict(vocab=32000, d=768, heads=12, kv_heads=4, layers=12, ffn=2048, positions=2048),
}
DECODER_ONLY = ("gpt", "llama", "qwen2")


def config(model, size):
    c = dict(SIZES["mini"]) if size == "mini" else dict(FULL[model])
    if model in ("llama", "qwen2"):
        if size == "mini":
            # Heads of 32 (128-byte rows): rotary's cat([freqs, freqs]) and
            # the caches are aligned enough for wgnn's views, as at full size.
            c.update(d=128, heads=4, ffn=192)
        c.setdefault("kv_heads", c["heads"] // 2)
    c.setdefault("kv_heads", c["heads"])
    return c


def _init(module, seed):
    """Seeded weights large enough that the logits are far apart (greedy
    choices are then not near-ties that float rounding could flip)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in module.named_parameters():
        with torch.no_grad():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g) if name.endswith("weight")
                        else 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
    module.eval()
    return module


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.h, self.dh).transpose(1, 2)

    def attend(self, q, k, v, bias):
        a = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        if bias is not None:
            a = a + bias
        y = torch.matmul(torch.softmax(a, dim=-1), v)
        b, h, t, dh = y.shape
        return self.o(y.transpose(1, 2).reshape(b, t, h * dh))

    def self_attn(self, x, past_k, past_v, bias):
        k, v = self.split(self.k(x)), self.split(self.v(x))
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        return self.attend(self.split(self.q(x)), k, v, bias), k, v

    def cross_kv(self, mem):
        return self.split(self.k(mem)), self.split(self.v(mem))


def causal_bias(t, past, attention_mask=None, device=None, dtype=torch.float32):
    """[1 or b, 1, t, past + t]: the dtype's lowest value above the diagonal
    (and at masked positions), else 0 (masked_fill: no 0 * inf in float16)."""
    total = past + t
    qpos = torch.arange(t, device=device).unsqueeze(1) + past
    kpos = torch.arange(total, device=device).unsqueeze(0)
    low = torch.finfo(dtype).min
    bias = torch.zeros(t, total, dtype=dtype, device=device).masked_fill(kpos > qpos, low)
    bias = bias.unsqueeze(0).unsqueeze(0)
    if attention_mask is not None:
        bias = bias.masked_fill(attention_mask[:, None, None, :] == 0, low)
    return bias


class GptBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(c["d"]), nn.LayerNorm(c["d"])
        self.attn = Attention(c["d"], c["heads"])
        self.fc1, self.fc2 = nn.Linear(c["d"], c["ffn"]), nn.Linear(c["ffn"], c["d"])

    def forward(self, x, pk, pv, bias):
        a, k, v = self.attn.self_attn(self.norm1(x), pk, pv, bias)
        x = x + a
        x = x + self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate="tanh"))
        return x, k, v


class Gpt(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok, self.pos = nn.Embedding(c["vocab"], c["d"]), nn.Embedding(c["positions"], c["d"])
        self.blocks = nn.ModuleList(GptBlock(c) for _ in range(c["layers"]))
        self.norm = nn.LayerNorm(c["d"])
        self.head = nn.Linear(c["d"], c["vocab"], bias=False)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.tok(input_ids) + self.pos(position_ids)
        bias = causal_bias(input_ids.shape[1], past[0].shape[2], attention_mask, input_ids.device, x.dtype)
        presents = []
        for i, blk in enumerate(self.blocks):
            x, k, v = blk(x, past[2 * i], past[2 * i + 1], bias)
            presents += [k, v]
        return (self.head(self.norm(x)), *presents)


class RmsNorm(nn.Module):
    """Written out as transformers' LlamaRMSNorm is (the exporter sees Pow,
    ReduceMean, Add, Sqrt, Div or Rsqrt and Mul: no fused op)."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(v + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, c, qkv_bias):
        super().__init__()
        d, self.h, self.hkv = c["d"], c["heads"], c["kv_heads"]
        self.dh = d // self.h
        self.input_layernorm, self.post_attention_layernorm = RmsNorm(d), RmsNorm(d)
        self.q_proj = nn.Linear(d, self.h * self.dh, bias=qkv_bias)
        self.k_proj = nn.Linear(d, self.hkv * self.dh, bias=qkv_bias)
        self.v_proj = nn.Linear(d, self.hkv * self.dh, bias=qkv_bias)
        self.o_proj = nn.Linear(self.h * self.dh, d, bias=False)
        self.gate_proj = nn.Linear(d, c["ffn"], bias=False)
        self.up_proj = nn.Linear(d, c["ffn"], bias=False)
        self.down_proj = nn.Linear(c["ffn"], d, bias=False)

    def repeat_kv(self, x):
        g = self.h // self.hkv
        if g == 1:
            return x
        b, _, t, dh = x.shape
        return x[:, :, None, :, :].expand(b, self.hkv, g, t, dh).reshape(b, self.h, t, dh)

    def forward(self, x, pk, pv, cos, sin, bias):
        b, t, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, t, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(h).view(b, t, self.hkv, self.dh).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.hkv, self.dh).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
        a = torch.matmul(q, self.repeat_kv(k).transpose(2, 3)) / math.sqrt(self.dh) + bias
        a = torch.softmax(a.float(), dim=-1).to(q.dtype)
        y = torch.matmul(a, self.repeat_kv(v)).transpose(1, 2).reshape(b, t, self.h * self.dh)
        x = x + self.o_proj(y)
        h = self.post_attention_layernorm(x)
        x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return x, k, v


class Llama(nn.Module):
    """Llama (qkv_bias False) or Qwen2 (True), decoder-only in gpt's layout."""

    def __init__(self, c, qkv_bias=False, theta=10000.0):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab"], c["d"])
        self.blocks = nn.ModuleList(LlamaBlock(c, qkv_bias) for _ in range(c["layers"]))
        self.norm = RmsNorm(c["d"])
        dh = c["d"] // c["heads"]
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, dh, 2).float() / dh)), persistent=False)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.embed_tokens(input_ids)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1).to(x.dtype), emb.sin().unsqueeze(1).to(x.dtype)
        bias = causal_bias(input_ids.shape[1], past[0].shape[2], attention_mask, input_ids.device, x.dtype)
        presents = []
        for i, blk in enumerate(self.blocks):
            x, k, v = blk(x, past[2 * i], past[2 * i + 1], cos, sin, bias)
            presents += [k, v]
        # The output head is tied to the embedding (tie_word_embeddings).
        return (torch.matmul(self.norm(x), self.embed_tokens.weight.t()), *presents)


class EncBlock(nn.Module):
    def __init__(self, c, pre_norm):
        super().__init__()
        self.pre = pre_norm
        self.norm1, self.norm2 = nn.LayerNorm(c["d"]), nn.LayerNorm(c["d"])
        self.attn = Attention(c["d"], c["heads"])
        self.fc1, self.fc2 = nn.Linear(c["d"], c["ffn"]), nn.Linear(c["ffn"], c["d"])

    def forward(self, x):
        if self.pre:
            h = self.norm1(x)
            x = x + self.attn.attend(self.attn.split(self.attn.q(h)), *self.attn.cross_kv(h), None)
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        k, v = self.attn.cross_kv(x)
        x = self.norm1(x + self.attn.attend(self.attn.split(self.attn.q(x)), k, v, None))
        return self.norm2(x + self.fc2(F.gelu(self.fc1(x))))


class DecBlock(nn.Module):
    """BART (post-norm) or Whisper (pre-norm) decoder block."""

    def __init__(self, c, pre_norm):
        super().__init__()
        self.pre = pre_norm
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(c["d"]) for _ in range(3))
        self.self_attn, self.cross = Attention(c["d"], c["heads"]), Attention(c["d"], c["heads"])
        self.fc1, self.fc2 = nn.Linear(c["d"], c["ffn"]), nn.Linear(c["ffn"], c["d"])

    def forward(self, x, pk, pv, ck, cv, bias):
        if self.pre:
            a, k, v = self.self_attn.self_attn(self.norm1(x), pk, pv, bias)
            x = x + a
            x = x + self.cross.attend(self.cross.split(self.cross.q(self.norm2(x))), ck, cv, None)
            x = x + self.fc2(F.gelu(self.fc1(self.norm3(x))))
            return x, k, v
        a, k, v = self.self_attn.self_attn(x, pk, pv, bias)
        x = self.norm1(x + a)
        x = self.norm2(x + self.cross.attend(self.cross.split(self.cross.q(x)), ck, cv, None))
        x = self.norm3(x + self.fc2(F.gelu(self.fc1(x))))
        return x, k, v


class Decoder(nn.Module):
    def __init__(self, c, kind):
        super().__init__()
        self.c, self.kind = c, kind
        self.tok, self.pos = nn.Embedding(c["vocab"], c["d"]), nn.Embedding(c["positions"], c["d"])
        self.blocks = nn.ModuleList(DecBlock(c, kind == "whisper") for _ in range(c["layers"]))
        self.norm = nn.LayerNorm(c["d"])
        self.head = nn.Linear(c["d"], c["vocab"], bias=False)

    def embed(self, input_ids, past_len):
        # BART's learned positions start at offset 2; Whisper's at 0.
        offset = 2 if self.kind == "bart" else 0
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0) + past_len + offset
        x = self.tok(input_ids) + self.pos(pos)
        return self.norm(x) if self.kind == "bart" else x

    def run(self, input_ids, self_past, cross):
        past_len = self_past[0].shape[2] if self_past else 0
        x = self.embed(input_ids, past_len)
        bias = causal_bias(input_ids.shape[1], past_len, None, input_ids.device, x.dtype)
        presents = []
        for i, blk in enumerate(self.blocks):
            pk, pv = (self_past[2 * i], self_past[2 * i + 1]) if self_past else (None, None)
            x, k, v = blk(x, pk, pv, cross[2 * i], cross[2 * i + 1], bias)
            presents += [k, v]
        if self.kind == "whisper":
            x = self.norm(x)
        return self.head(x), presents


class DecoderFirst(nn.Module):
    """The prompt step: encoder states in, logits and both caches out."""

    def __init__(self, dec):
        super().__init__()
        self.dec = dec

    def forward(self, input_ids, encoder_hidden_states):
        cross = []
        for blk in self.dec.blocks:
            cross += list(blk.cross.cross_kv(encoder_hidden_states))
        logits, presents = self.dec.run(input_ids, None, cross)
        out = [logits]
        for i in range(len(self.dec.blocks)):
            out += [presents[2 * i], presents[2 * i + 1], cross[2 * i], cross[2 * i + 1]]
        return tuple(out)


class DecoderWithPast(nn.Module):
    def __init__(self, dec):
        super().__init__()
        self.dec = dec

    def forward(self, input_ids, *past):  # per layer: decoder.key, decoder.value, encoder.key, encoder.value
        n = len(self.dec.blocks)
        self_past = [past[4 * i + j] for i in range(n) for j in (0, 1)]
        cross = [past[4 * i + j] for i in range(n) for j in (2, 3)]
        logits, presents = self.dec.run(input_ids, self_past, cross)
        return (logits, *presents)


class BartEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok, self.pos = nn.Embedding(c["vocab"], c["d"]), nn.Embedding(c["positions"], c["d"])
        self.norm = nn.LayerNorm(c["d"])
        self.blocks = nn.ModuleList(EncBlock(c, False) for _ in range(c["layers"]))

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0) + 2
        x = self.norm(self.tok(input_ids) + self.pos(pos))
        for blk in self.blocks:
            x = blk(x)
        return x


class WhisperEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv1d(c["mels"], c["d"], 3, padding=1)
        self.conv2 = nn.Conv1d(c["d"], c["d"], 3, stride=2, padding=1)
        t = c["frames"] // 2
        inv = torch.exp(-math.log(10000.0) * torch.arange(c["d"] // 2).float() / (c["d"] // 2 - 1))
        ang = torch.arange(t).float()[:, None] * inv[None, :]
        self.register_buffer("positions", torch.cat([torch.sin(ang), torch.cos(ang)], dim=1))
        self.blocks = nn.ModuleList(EncBlock(c, True) for _ in range(c["layers"]))
        self.norm = nn.LayerNorm(c["d"])

    def forward(self, input_features):
        x = F.gelu(self.conv2(F.gelu(self.conv1(input_features)))).transpose(1, 2)
        x = x + self.positions
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)


def build(model, size, seed=0):
    c = config(model, size)
    torch.manual_seed(seed)
    if model == "gpt":
        return {"decoder": _init(Gpt(c), seed)}, c
    if model in ("llama", "qwen2"):
        return {"decoder": _init(Llama(c, qkv_bias=model == "qwen2"), seed)}, c
    dec = _init(Decoder(c, model), seed)
    enc = _init(BartEncoder(c) if model == "bart" else WhisperEncoder(c), seed + 1)
    return {"decoder": dec, "encoder": enc}, c


def encoder_input(model, c, seed=0):
    g = torch.Generator().manual_seed(seed + 7)
    if model == "bart":
        return torch.randint(3, c["vocab"], (1, c["enc_tokens"]), generator=g)
    return torch.randn(1, c["mels"], c["frames"], generator=g)


def _onnx_export(module, args, path, **kw):
    """torch.onnx.export with the TorchScript exporter (dynamic_axes, our
    names kept) on any torch: dynamo=False where the argument exists."""
    import inspect
    params = inspect.signature(torch.onnx.export).parameters
    if "dynamo" in params:
        kw["dynamo"] = False
    torch.onnx.export(module, args, path, **kw)


def export(model, size, out, opset=17):
    mods, c = build(model, size)
    os.makedirs(out, exist_ok=True)
    L, H, dh = c["layers"], c["kv_heads"], c["d"] // c["heads"]
    dyn_b = {0: "batch"}
    with torch.no_grad():
        if model in DECODER_ONLY:
            past = [torch.randn(1, H, 3, dh) for _ in range(2 * L)]
            names = [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
            outs = ["logits"] + [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
            ids = torch.randint(0, c["vocab"], (1, 2))
            args = (ids, torch.ones(1, 5, dtype=torch.int64), torch.tensor([[3, 4]]), *past)
            dyn = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "total"},
                   "position_ids": {0: "batch", 1: "tokens"}, "logits": {0: "batch", 1: "tokens"}}
            for n in names:
                dyn[n] = {0: "batch", 2: "past"}
            for n in outs[1:]:
                dyn[n] = {0: "batch", 2: "total"}
            _onnx_export(mods["decoder"], args, os.path.join(out, "decoder_with_past_model.onnx"),
                              input_names=["input_ids", "attention_mask", "position_ids", *names],
                              output_names=outs, dynamic_axes=dyn, opset_version=opset)
            return
        enc, dec = mods["encoder"], mods["decoder"]
        x = encoder_input(model, c)
        enc_name = "input_ids" if model == "bart" else "input_features"
        _onnx_export(enc, (x,), os.path.join(out, "encoder_model.onnx"), input_names=[enc_name],
                          output_names=["last_hidden_state"],
                          dynamic_axes={enc_name: {0: "batch", 1: "encoder_tokens"} if model == "bart" else dyn_b,
                                        "last_hidden_state": {0: "batch", 1: "encoder_tokens"}},
                          opset_version=opset)
        states = enc(x)
        ids = torch.randint(0, c["vocab"], (1, 3))
        first_outs = ["logits"] + [f"present.{i}.{w}.{kv}" for i in range(L) for w in ("decoder", "encoder")
                                   for kv in ("key", "value")]
        dyn = {"input_ids": {0: "batch", 1: "tokens"}, "encoder_hidden_states": {0: "batch", 1: "encoder_tokens"},
               "logits": {0: "batch", 1: "tokens"}}
        for n in first_outs[1:]:
            dyn[n] = {0: "batch", 2: "tokens" if ".decoder." in n else "encoder_tokens"}
        _onnx_export(DecoderFirst(dec), (ids, states), os.path.join(out, "decoder_model.onnx"),
                          input_names=["input_ids", "encoder_hidden_states"], output_names=first_outs,
                          dynamic_axes=dyn, opset_version=opset)
        first = DecoderFirst(dec)(ids, states)
        past = list(first[1:])
        names = [f"past_key_values.{i}.{w}.{kv}" for i in range(L) for w in ("decoder", "encoder")
                 for kv in ("key", "value")]
        outs = ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(L) for kv in ("key", "value")]
        dyn = {"input_ids": {0: "batch", 1: "tokens"}, "logits": {0: "batch", 1: "tokens"}}
        for n in names:
            dyn[n] = {0: "batch", 2: "past" if ".decoder." in n else "encoder_tokens"}
        for n in outs[1:]:
            dyn[n] = {0: "batch", 2: "total"}
        _onnx_export(DecoderWithPast(dec), (ids[:, :1], *past),
                          os.path.join(out, "decoder_with_past_model.onnx"), input_names=["input_ids", *names],
                          output_names=outs, dynamic_axes=dyn, opset_version=opset)
        import numpy as np
        np.save(os.path.join(out, "encoder_input.npy"), x.numpy())


@torch.no_grad()
def torch_greedy(model, mods, c, prompt, new_tokens, device="cpu", dtype=torch.float32, enc_in=None, timer=None):
    """PyTorch's own loop with its cache: the reference for timings. Returns
    the new tokens; `timer(i)` is called after each token is on the host."""
    ids = torch.tensor([prompt], device=device)
    out = []
    if model in DECODER_ONLY:
        m = mods["decoder"]
        L, H, dh = c["layers"], c["kv_heads"], c["d"] // c["heads"]
        past = [torch.zeros(1, H, 0, dh, device=device, dtype=dtype) for _ in range(2 * L)]
        n = 0
        cur = ids
        for i in range(new_tokens):
            t = cur.shape[1]
            mask = torch.ones(1, n + t, dtype=torch.int64, device=device)
            pos = (torch.arange(t, device=device) + n).unsqueeze(0)
            logits, *past = m(cur, mask, pos, *past)
            n += t
            cur = logits[:, -1].argmax(-1, keepdim=True)
            out.append(int(cur.item()))
            if timer:
                timer(i)
        return out
    enc, dec = mods["encoder"], mods["decoder"]
    states = enc(enc_in.to(device=device, dtype=dtype if enc_in.is_floating_point() else enc_in.dtype))
    first = DecoderFirst(dec)(ids, states)
    logits, past = first[0], list(first[1:])
    cur = logits[:, -1].argmax(-1, keepdim=True)
    out.append(int(cur.item()))
    if timer:
        timer(0)
    step = DecoderWithPast(dec)
    L = c["layers"]
    for i in range(1, new_tokens):
        logits, *pres = step(cur, *past)
        for l in range(L):
            past[4 * l], past[4 * l + 1] = pres[2 * l], pres[2 * l + 1]
        cur = logits[:, -1].argmax(-1, keepdim=True)
        out.append(int(cur.item()))
        if timer:
            timer(i)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["gpt", "bart", "whisper", "llama", "qwen2", "all"], required=True)
    ap.add_argument("--size", choices=["mini", "full"], default="mini")
    ap.add_argument("--out", required=True)
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    for m in (["gpt", "bart", "whisper", "llama", "qwen2"] if a.model == "all" else [a.model]):
        export(m, a.size, os.path.join(a.out, m), a.opset)
        print(f"{m}: {os.path.join(a.out, m)}")


if __name__ == "__main__":
    main()
