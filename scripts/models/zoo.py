"""The model zoo wgnn is checked against: each model built in PyTorch with
seeded random weights (no downloads), in eval mode, with seeded inputs.

    MODELS[name].build(mini=False) -> torch.nn.Module (eval mode)
    MODELS[name].inputs(mini=False) -> {input name: torch.Tensor}, in the
                                       order forward() takes them
    MODELS[name].output_names        -> names given to the exported outputs

`mini=True` gives the same building blocks at reduced width, depth and
resolution, small enough (about 2 MB of float32 weights or less) to export
and run on a CPU Vulkan driver. timm and transformers are imported inside
build(), so this module imports with any torch (1.13 has neither).

The normalization layers get random running statistics and affine
parameters, so a BatchNormalization that is skipped or mis-folded shows.
"""
import inspect
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 0


@dataclass
class Spec:
    build: Callable[..., nn.Module]
    inputs: Callable[..., Dict[str, torch.Tensor]]
    output_names: List[str]
    about: str = ""
    needs: List[str] = field(default_factory=list)  # python packages beyond torch/torchvision


def _finish(model: nn.Module, seed: int = SEED) -> nn.Module:
    """Random statistics and affine parameters for every norm layer; eval mode."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                if m.track_running_stats and m.running_mean is not None:
                    m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                    m.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                    m.bias.copy_(torch.randn(n, generator=g) * 0.1)
            elif isinstance(m, (nn.LayerNorm, nn.GroupNorm)) or type(m).__name__ in ("LayerNorm2d", "LayerNorm"):
                w, b = getattr(m, "weight", None), getattr(m, "bias", None)
                if isinstance(w, torch.Tensor) and w is not None:
                    w.copy_(1 + torch.randn(w.shape, generator=g) * 0.1)
                if isinstance(b, torch.Tensor) and b is not None:
                    b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    return model.eval()


def _image(size: int, seed: int = SEED) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 3, size, size, generator=g)


def _first(out):
    """The first output of a model returning a tuple or a ModelOutput."""
    if isinstance(out, torch.Tensor):
        return out
    return out[0]


# ---------------------------------------------------------------------------
# MODNet (Ke et al., "MODNet: Real-Time Trimap-Free Portrait Matting via
# Objective Decomposition", AAAI 2022): a MobileNetV2 encoder; a low-resolution
# semantic branch (SE block on the 1/32 features, two upsample + 5x5 conv
# steps to 1/8), a high-resolution detail branch (the image at 1/2 and 1/4 with
# the 1/2 and 1/4 encoder features) and a fusion branch; IBNorm (BatchNorm
# on half the channels, InstanceNorm on the other half) after every conv.
# Written from the paper's description.


def _make_divisible(v: float, d: int = 8) -> int:
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


class _ConvBNReLU6(nn.Sequential):
    def __init__(self, cin, cout, k=3, stride=1, groups=1):
        super().__init__(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class _InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = int(round(cin * expand))
        layers = [] if expand == 1 else [_ConvBNReLU6(cin, hidden, 1)]
        layers += [_ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2Encoder(nn.Module):
    """MobileNetV2 features; returns the maps at strides 2, 4, 8, 16, 32."""

    def __init__(self, alpha=1.0, last_channel=1280, repeats=(1, 2, 3, 4, 3, 3, 1)):
        super().__init__()
        setting = [(1, 16, 1), (6, 24, 2), (6, 32, 2), (6, 64, 2), (6, 96, 1), (6, 160, 2), (6, 320, 1)]
        cin = _make_divisible(32 * alpha)
        feats = [_ConvBNReLU6(3, cin, 3, 2)]
        for (t, c, s), n in zip(setting, repeats):
            cout = _make_divisible(c * alpha)
            for i in range(n):
                feats.append(_InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        feats.append(_ConvBNReLU6(cin, last_channel, 1))
        # The block index after which each stride is reached.
        ends = [sum(repeats[:k]) + 1 for k in range(1, 8)]
        self.cuts = [ends[0], ends[1], ends[2], ends[4], len(feats)]
        self.features = nn.Sequential(*feats)
        self.channels = [_make_divisible(c * alpha) for c in (16, 24, 32, 96)] + [last_channel]

    def forward(self, x):
        outs, start = [], 0
        for end in self.cuts:
            for i in range(start, end):
                x = self.features[i](x)
            outs.append(x)
            start = end
        return outs


class IBNorm(nn.Module):
    """BatchNorm on the first half of the channels, InstanceNorm on the rest."""

    def __init__(self, c):
        super().__init__()
        self.nb = c // 2
        self.bnorm = nn.BatchNorm2d(self.nb, affine=True)
        self.inorm = nn.InstanceNorm2d(c - self.nb, affine=False)

    def forward(self, x):
        return torch.cat([self.bnorm(x[:, :self.nb]), self.inorm(x[:, self.nb:])], dim=1)


class ConvIBNormReLU(nn.Sequential):
    def __init__(self, cin, cout, k, stride=1, ibn=True, relu=True):
        layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, bias=True)]
        if ibn:
            layers.append(IBNorm(cout))
        if relu:
            layers.append(nn.ReLU(inplace=True))
        super().__init__(*layers)


class SEBlock(nn.Module):
    def __init__(self, c, reduction=4):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(c, c // reduction, bias=False), nn.ReLU(inplace=True),
                                nn.Linear(c // reduction, c, bias=False), nn.Sigmoid())

    def forward(self, x):
        w = self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
        return x * w[:, :, None, None]


def _up(x, scale):
    return F.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False)


class MODNet(nn.Module):
    def __init__(self, alpha=1.0, last_channel=1280, hr=32, repeats=(1, 2, 3, 4, 3, 3, 1)):
        super().__init__()
        self.backbone = MobileNetV2Encoder(alpha, last_channel, repeats)
        c2, c4, c8, c16, c32 = self.backbone.channels
        # Low-resolution (semantic) branch.
        self.se = SEBlock(c32)
        self.conv_lr16x = ConvIBNormReLU(c32, c16, 5)
        self.conv_lr8x = ConvIBNormReLU(c16, c8, 5)
        self.conv_lr = ConvIBNormReLU(c8, 1, 3, ibn=False, relu=False)
        # High-resolution (detail) branch.
        self.tohr_enc2x = ConvIBNormReLU(c2, hr, 1)
        self.conv_enc2x = ConvIBNormReLU(hr + 3, hr, 3, stride=2)
        self.tohr_enc4x = ConvIBNormReLU(c4, hr, 1)
        self.conv_enc4x = ConvIBNormReLU(2 * hr, 2 * hr, 3)
        self.conv_hr4x = nn.Sequential(ConvIBNormReLU(2 * hr + c8 + 3, 2 * hr, 3),
                                       ConvIBNormReLU(2 * hr, 2 * hr, 3), ConvIBNormReLU(2 * hr, hr, 3))
        self.conv_hr2x = nn.Sequential(ConvIBNormReLU(2 * hr, 2 * hr, 3), ConvIBNormReLU(2 * hr, hr, 3),
                                       ConvIBNormReLU(hr, hr, 3), ConvIBNormReLU(hr, hr, 3))
        self.conv_hr = nn.Sequential(ConvIBNormReLU(hr + 3, hr, 3), ConvIBNormReLU(hr, 1, 1, ibn=False, relu=False))
        # Fusion branch.
        self.conv_lr4x = ConvIBNormReLU(c8, hr, 5)
        self.conv_f2x = ConvIBNormReLU(2 * hr, hr, 3)
        self.conv_f = nn.Sequential(ConvIBNormReLU(hr + 3, hr // 2, 3),
                                    ConvIBNormReLU(hr // 2, 1, 1, ibn=False, relu=False))

    def forward(self, image):
        enc2x, enc4x, _, _, enc32x = self.backbone(image)
        # Semantic branch: 1/32 -> 1/8.
        lr8x = self.conv_lr8x(_up(self.conv_lr16x(_up(self.se(enc32x), 2)), 2))
        semantic = torch.sigmoid(self.conv_lr(lr8x))
        # Detail branch.
        img2x, img4x = _up(image, 0.5), _up(image, 0.25)
        e2 = self.tohr_enc2x(enc2x)
        hr4x = self.conv_enc2x(torch.cat([img2x, e2], 1))
        hr4x = self.conv_enc4x(torch.cat([hr4x, self.tohr_enc4x(enc4x)], 1))
        hr4x = self.conv_hr4x(torch.cat([hr4x, _up(lr8x, 2), img4x], 1))
        hr2x = self.conv_hr2x(torch.cat([_up(hr4x, 2), e2], 1))
        detail = torch.sigmoid(self.conv_hr(torch.cat([_up(hr2x, 2), image], 1)))
        # Fusion.
        lr2x = _up(self.conv_lr4x(_up(lr8x, 2)), 2)
        f2x = self.conv_f2x(torch.cat([lr2x, hr2x], 1))
        matte = torch.sigmoid(self.conv_f(torch.cat([_up(f2x, 2), image], 1)))
        return matte, semantic, detail


def _modnet(mini=False):
    torch.manual_seed(SEED)
    if mini:
        return _finish(MODNet(alpha=0.35, last_channel=128, hr=16, repeats=(1, 2, 2, 2, 1, 2, 1)))
    return _finish(MODNet())


# ---------------------------------------------------------------------------
# torchvision CNNs.


def _resnet50(mini=False):
    from torchvision.models.resnet import Bottleneck, ResNet
    torch.manual_seed(SEED)
    if not mini:
        return _finish(ResNet(Bottleneck, [3, 4, 6, 3]))
    m = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=100)
    m.layer3, m.layer4 = nn.Identity(), nn.Identity()  # stops at 512 channels, 1/8
    m.fc = nn.Linear(512, 100)
    return _finish(m)


def _mobilenetv2(mini=False):
    from torchvision.models.mobilenetv2 import MobileNetV2
    torch.manual_seed(SEED)
    if not mini:
        return _finish(MobileNetV2())
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2], [6, 64, 2, 2], [6, 96, 1, 1], [6, 160, 2, 2],
               [6, 320, 1, 1]]
    return _finish(MobileNetV2(num_classes=100, width_mult=0.35, inverted_residual_setting=setting))


def _convnext_tiny(mini=False):
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    torch.manual_seed(SEED)
    dims, depths = ((16, 32, 64, 128), (1, 1, 2, 1)) if mini else ((96, 192, 384, 768), (3, 3, 9, 3))
    setting = [CNBlockConfig(dims[i], dims[i + 1] if i < 3 else None, depths[i]) for i in range(4)]
    m = ConvNeXt(setting, num_classes=100 if mini else 1000)
    with torch.no_grad():  # torchvision initializes layer_scale to 1e-6: make the blocks count
        for blk in m.modules():
            if hasattr(blk, "layer_scale"):
                blk.layer_scale.uniform_(0.5, 1.0)
    return _finish(m)


# ---------------------------------------------------------------------------
# timm vision transformers.


def _timm(name, **kw):
    import timm
    torch.manual_seed(SEED)
    return timm.create_model(name, pretrained=False, **kw)


def _deit_tiny(mini=False):
    if mini:
        m = _timm("deit_tiny_patch16_224", depth=2, embed_dim=64, num_heads=2, img_size=64, num_classes=100)
    else:
        m = _timm("deit_tiny_patch16_224")
    return _finish(m)


def _davit_base(mini=False):
    if mini:
        m = _timm("davit_tiny", depths=(1, 1, 1, 1), embed_dims=(16, 32, 64, 128), num_heads=(1, 2, 4, 8),
                  num_classes=100)
    else:
        # DaViT pads feature maps to whole windows, so any size runs; pass
        # img_size only to a timm whose DaViT takes it.
        import timm.models.davit as davit
        kw = {"img_size": 768} if "img_size" in inspect.signature(davit.DaVit.__init__).parameters else {}
        m = _timm("davit_base", **kw)
    return _finish(m)


# ---------------------------------------------------------------------------
# transformers: Whisper-base encoder, BART-base decoder (eager attention).


def _eager(config):
    """Eager attention (explicit MatMul / Softmax), whatever the default is."""
    try:
        config._attn_implementation = "eager"
    except Exception:  # noqa: BLE001 - older configs have a plain attribute
        config.__dict__["_attn_implementation"] = "eager"
    return config


class _EncoderOutput(nn.Module):
    """A transformers encoder whose forward returns last_hidden_state (named
    arguments, so every exporter names the graph input after them)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_features):
        return _first(self.m(input_features=input_features))


class _DecoderOutput(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, encoder_hidden_states):
        return _first(self.m(input_ids=input_ids, encoder_hidden_states=encoder_hidden_states, use_cache=False))


def _whisper_sizes(mini):
    if mini:
        return dict(d_model=64, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=128,
                    decoder_layers=2, decoder_attention_heads=2, decoder_ffn_dim=128, max_source_positions=100,
                    max_target_positions=64, vocab_size=1000)
    # whisper-base
    return dict(d_model=512, encoder_layers=6, encoder_attention_heads=8, encoder_ffn_dim=2048,
                decoder_layers=6, decoder_attention_heads=8, decoder_ffn_dim=2048, max_source_positions=1500,
                max_target_positions=448, vocab_size=51865)


def _whisper_encoder(mini=False):
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    torch.manual_seed(SEED)
    cfg = _eager(WhisperConfig(num_mel_bins=80, **_whisper_sizes(mini)))
    return _finish(_EncoderOutput(WhisperEncoder(cfg)))


def _whisper_inputs(mini=False):
    frames = 2 * _whisper_sizes(mini)["max_source_positions"]  # the encoder's fixed input length
    g = torch.Generator().manual_seed(SEED)
    return {"input_features": torch.randn(1, 80, frames, generator=g)}


def _bart_sizes(mini):
    if mini:
        return dict(vocab_size=1000, d_model=64, decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=128,
                    encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, max_position_embeddings=64)
    # bart-base
    return dict(vocab_size=50265, d_model=768, decoder_layers=6, decoder_attention_heads=12, decoder_ffn_dim=3072,
                encoder_layers=6, encoder_attention_heads=12, encoder_ffn_dim=3072, max_position_embeddings=1024)


def _bart_decoder(mini=False):
    from transformers import BartConfig
    from transformers.models.bart.modeling_bart import BartDecoder
    torch.manual_seed(SEED)
    cfg = _eager(BartConfig(use_cache=False, **_bart_sizes(mini)))
    return _finish(_DecoderOutput(BartDecoder(cfg)))


def _bart_inputs(mini=False):
    s = _bart_sizes(mini)
    g = torch.Generator().manual_seed(SEED)
    return {"input_ids": torch.randint(0, s["vocab_size"], (1, 32), generator=g, dtype=torch.int64),
            "encoder_hidden_states": torch.randn(1, 16 if mini else 128, s["d_model"], generator=g)}


# ---------------------------------------------------------------------------
# A hand-written transformer, plain torch: two pre-norm blocks with causal and
# padding masks, softmax attention, layer_norm, GELU (erf, then tanh).


class _Block(nn.Module):
    def __init__(self, d, heads, approximate):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.act = nn.GELU(approximate=approximate)

    def forward(self, x, keep):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.h)
        pos = torch.arange(s, device=x.device)
        causal = pos[None, :] > pos[:, None]
        scores = scores.masked_fill(causal, float("-inf"))
        scores = scores.masked_fill(keep[:, None, None, :] == 0, torch.finfo(scores.dtype).min)
        att = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class TransformerBlocks(nn.Module):
    def __init__(self, d=64, heads=4, vocab=100):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([_Block(d, heads, "none"), _Block(d, heads, "tanh")])
        self.norm = nn.LayerNorm(d)

    def forward(self, ids, x, keep):
        x = x + self.embed(ids)
        for blk in self.blocks:
            x = blk(x, keep)
        return self.norm(x)


def _transformer(mini=False):
    torch.manual_seed(SEED)
    return _finish(TransformerBlocks(64, 4) if mini else TransformerBlocks(256, 8, 1000))


def _transformer_inputs(mini=False):
    s, d, vocab = (24, 64, 100) if mini else (128, 256, 1000)
    g = torch.Generator().manual_seed(SEED)
    keep = torch.ones(1, s, dtype=torch.int64)
    keep[0, s - s // 4:] = 0  # the last quarter is padding
    return {"ids": torch.randint(0, vocab, (1, s), generator=g, dtype=torch.int64),
            "x": torch.randn(1, s, d, generator=g), "keep": keep}


# ---------------------------------------------------------------------------
# Plain-torch stand-ins for the timm and transformers models, written from
# the papers' descriptions, so their patterns export with any torch (1.13 has
# neither package): a ViT with a class token (DeiT), window and channel
# attention with padding and convolutional position encoding (DaViT), a
# Conv1d front end with sinusoidal positions and pre-norm layers (Whisper's
# encoder), and a post-norm decoder with learned positions, a causal mask and
# cross-attention (BART's decoder).


class _MHA(nn.Module):
    """Multi-head attention with separate projections (transformers style)."""

    def __init__(self, d, heads, k_bias=True):
        super().__init__()
        self.h, self.scaling = heads, (d // heads) ** -0.5
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d, bias=k_bias)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x, kv=None, mask=None):
        kv = x if kv is None else kv
        b, s, d = x.shape
        split = lambda t: t.reshape(b, -1, self.h, d // self.h).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q_proj(x) * self.scaling), split(self.k_proj(kv)), split(self.v_proj(kv))
        w = q @ k.transpose(2, 3)
        if mask is not None:
            w = w + mask
        return self.out_proj((torch.softmax(w, dim=-1) @ v).transpose(1, 2).reshape(b, s, d))


class _FusedAttention(nn.Module):
    """One qkv projection, heads split by reshape/permute/unbind (timm style)."""

    def __init__(self, d, heads):
        super().__init__()
        self.h, self.scale = heads, (d // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        a = torch.softmax((q * self.scale) @ k.transpose(-2, -1), dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, n, c))


def _mlp(d, hidden):
    return nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))


class _PreNormBlock(nn.Module):
    def __init__(self, d, heads, attn):
        super().__init__()
        self.n1, self.n2, self.attn, self.mlp = nn.LayerNorm(d), nn.LayerNorm(d), attn, _mlp(d, 4 * d)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class ViTLike(nn.Module):
    def __init__(self, img=64, patch=16, d=64, depth=2, heads=2, classes=100):
        super().__init__()
        n = (img // patch) ** 2
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.blocks = nn.Sequential(*[_PreNormBlock(d, heads, _FusedAttention(d, heads)) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, image):
        x = self.patch(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class _LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _ConvPosEnc(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Conv2d(d, d, 3, 1, 1, groups=d)

    def forward(self, x, hw):
        b, n, c = x.shape
        return x + self.proj(x.transpose(1, 2).reshape(b, c, hw[0], hw[1])).flatten(2).transpose(1, 2)


class _WindowBlock(nn.Module):
    def __init__(self, d, heads, ws):
        super().__init__()
        self.ws, self.cpe1, self.cpe2 = ws, _ConvPosEnc(d), _ConvPosEnc(d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.mlp = _FusedAttention(d, heads), _mlp(d, 4 * d)

    def forward(self, x, hw):
        h, w = hw
        b, _, c = x.shape
        x = self.cpe1(x, hw)
        y = self.n1(x).view(b, h, w, c)
        ph, pw = (self.ws - h % self.ws) % self.ws, (self.ws - w % self.ws) % self.ws
        y = F.pad(y, (0, 0, 0, pw, 0, ph))
        hp, wp, ws = h + ph, w + pw, self.ws
        y = y.view(b, hp // ws, ws, wp // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        y = self.attn(y).view(b, hp // ws, wp // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
        x = x + y[:, :h, :w, :].reshape(b, h * w, c)
        x = self.cpe2(x, hw)
        return x + self.mlp(self.n2(x))


class _ChannelAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.scale = heads, (d // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        a = torch.softmax((k * self.scale).transpose(-1, -2) @ v, dim=-1)
        y = (a @ q.transpose(-1, -2)).transpose(-1, -2)
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class _ChannelBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.cpe1, self.cpe2 = _ConvPosEnc(d), _ConvPosEnc(d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.mlp = _ChannelAttention(d, heads), _mlp(d, 4 * d)

    def forward(self, x, hw):
        x = self.cpe1(x, hw)
        x = x + self.attn(self.n1(x))
        x = self.cpe2(x, hw)
        return x + self.mlp(self.n2(x))


class DaViTLike(nn.Module):
    def __init__(self, dims=(16, 32, 64, 128), heads=(1, 2, 4, 8), ws=7, classes=100):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 7, 4, 3), _LayerNorm2d(dims[0]))
        self.down = nn.ModuleList([nn.Sequential(_LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], dims[i], 2, 2))
                                   for i in range(1, 4)])
        self.stages = nn.ModuleList([nn.ModuleList([_WindowBlock(d, h, ws), _ChannelBlock(d, h)])
                                     for d, h in zip(dims, heads)])
        self.norm, self.head = nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], classes)

    def forward(self, image):
        x = self.stem(image)
        for i, stage in enumerate(self.stages):
            if i:
                x = self.down[i - 1](x)
            b, c, h, w = x.shape
            t = x.flatten(2).transpose(1, 2)
            for blk in stage:
                t = blk(t, (h, w))
            x = t.transpose(1, 2).reshape(b, c, h, w)
        return self.head(self.norm(x.mean((2, 3))))


def _sinusoids(length, d):
    inc = math.log(10000) / (d // 2 - 1)
    t = torch.arange(length)[:, None] * torch.exp(-inc * torch.arange(d // 2))[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class _EncoderLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.attn = _MHA(d, heads, k_bias=False)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class SpeechEncoderLike(nn.Module):
    def __init__(self, mels=80, d=64, layers=2, heads=2, ffn=128, positions=100):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.register_buffer("pos", _sinusoids(positions, d))
        self.layers = nn.ModuleList([_EncoderLayer(d, heads, ffn) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)

    def forward(self, input_features):
        x = F.gelu(self.conv2(F.gelu(self.conv1(input_features)))).permute(0, 2, 1) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class _DecoderLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.self_attn, self.cross_attn = _MHA(d, heads), _MHA(d, heads)
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x, enc, mask):
        x = self.n1(x + self.self_attn(x, mask=mask))
        x = self.n2(x + self.cross_attn(x, kv=enc))
        return self.n3(x + self.fc2(F.gelu(self.fc1(x))))


class DecoderLike(nn.Module):
    def __init__(self, vocab=1000, d=64, layers=2, heads=4, ffn=128, positions=64, head=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.head = nn.Linear(d, vocab, bias=False) if head else None  # logits over the vocabulary
        self.pos = nn.Embedding(positions + 2, d)  # BART offsets positions by 2
        self.norm_embed = nn.LayerNorm(d)
        self.layers = nn.ModuleList([_DecoderLayer(d, heads, ffn) for _ in range(layers)])

    def forward(self, input_ids, encoder_hidden_states):
        s = input_ids.shape[1]
        x = self.norm_embed(self.embed(input_ids) + self.pos(torch.arange(s, device=input_ids.device) + 2))
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype, device=x.device)
        mask = torch.triu(mask, diagonal=1)[None, None]
        for layer in self.layers:
            x = layer(x, encoder_hidden_states, mask)
        return x if self.head is None else self.head(x)


def _standin(cls, **kw):  # one (small) size: mini or not
    def build(mini=False):
        torch.manual_seed(SEED)
        return _finish(cls(**kw))
    return build


def _images(full, mini):
    return lambda mini_=False: {"image": _image(mini if mini_ else full)}


MODELS: Dict[str, Spec] = {
    "modnet": Spec(_modnet, _images(512, 256), ["matte", "semantic", "detail"],
                   "MODNet, MobileNetV2 backbone (BatchNorm kept), IBNorm, SE block, bilinear resizes"),
    "resnet50": Spec(_resnet50, _images(224, 128), ["logits"], "torchvision ResNet-50, BatchNorm kept"),
    "mobilenetv2": Spec(_mobilenetv2, _images(224, 128), ["logits"], "torchvision MobileNetV2"),
    "convnext_tiny": Spec(_convnext_tiny, _images(224, 128), ["logits"], "torchvision ConvNeXt-Tiny"),
    "deit_tiny": Spec(_deit_tiny, _images(224, 64), ["logits"], "timm deit_tiny_patch16_224", ["timm"]),
    "davit_base": Spec(_davit_base, _images(768, 128), ["logits"], "timm davit_base at 768x768", ["timm"]),
    "whisper_base_encoder": Spec(_whisper_encoder, _whisper_inputs, ["last_hidden_state"],
                                 "transformers WhisperEncoder, whisper-base sizes, 80x3000 log-mel",
                                 ["transformers"]),
    "bart_base_decoder": Spec(_bart_decoder, _bart_inputs, ["last_hidden_state"],
                              "transformers BartDecoder, bart-base sizes, 32 ids + 128 encoder states",
                              ["transformers"]),
    "transformer_block": Spec(_transformer, _transformer_inputs, ["hidden"],
                              "two hand-written pre-norm blocks: masked softmax attention, layer_norm, GELU"),
}

MODELS.update({
    "vit_standin": Spec(_standin(ViTLike), _images(64, 64), ["logits"],
                        "plain-torch ViT with a class token (DeiT's pattern)"),
    "davit_standin": Spec(_standin(DaViTLike), _images(96, 96), ["logits"],
                          "plain-torch window + channel attention, padding, conv position encoding (DaViT's pattern)"),
    "whisper_standin": Spec(_standin(SpeechEncoderLike), _whisper_inputs, ["last_hidden_state"],
                            "plain-torch Conv1d front end + pre-norm encoder layers (Whisper encoder's pattern)"),
    "bart_standin": Spec(_standin(DecoderLike), _bart_inputs, ["last_hidden_state"],
                         "plain-torch post-norm decoder, causal mask, cross-attention (BART decoder's pattern)"),
    # bart-base sizes (one size: mini or not) and an output head: a 154 MB
    # token embedding and a 154 MB head weight, over WebGPU's default 128 MiB
    # storage binding (tests/onnx/bart_full_vs_ort.py).
    "bart_base_standin": Spec(_standin(DecoderLike, vocab=50265, d=768, layers=6, heads=12, ffn=3072, positions=1024,
                                       head=True),
                              lambda mini=False: _bart_inputs(False), ["logits"],
                              "bart_standin at bart-base sizes with an output head (vocab 50265 x 768)"),
})

# The nine models of the README (ISNet is fetched by scripts/setup, not built here).
ZOO = ["modnet", "resnet50", "mobilenetv2", "convnext_tiny", "deit_tiny", "davit_base", "whisper_base_encoder",
       "bart_base_decoder"]
