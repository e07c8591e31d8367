"""wgnn.torch in .venv-executorch (scripts/setup-executorch): a module
compiled with wgnn.torch.compile, and torch.compile(backend="wgnn"), give
eager PyTorch's results; a graph wgnn cannot run falls back to PyTorch with
a warning and still gives them.

    .venv-executorch/bin/python tests/pte/torch_frontend.py
"""
import sys
import warnings

import torch

import wgnn
import wgnn.torch

HERE = __file__.rsplit("/", 2)[0]
sys.path.insert(0, HERE.rsplit("/", 1)[0] + "/scripts/models")
import zoo  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.bn(self.conv(x)))
        pooled = y.mean(dim=(2, 3))
        return torch.softmax(self.fc(pooled), -1), pooled


class Flipper(torch.nn.Module):
    def forward(self, x):
        return torch.flip(x, [1]) * 2.0  # aten.flip: no mapping in wgnn


def close(a, b, tol=1e-4):
    return torch.allclose(a, b, atol=tol, rtol=tol)


def main():
    failures = []
    torch.manual_seed(0)
    m = Block().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        want = m(x)
    for part in ("webgpu", None):
        fast = wgnn.torch.compile(m, (x,), partitioner=part)
        got = fast(x)
        if not (isinstance(got, tuple) and len(got) == 2 and all(close(g, w) for g, w in zip(got, want))):
            failures.append(f"wgnn.torch.compile (partitioner {part}): results differ from eager")
        # Another input of the same shape: the same plan, new values.
        x2 = torch.randn(2, 3, 16, 16)
        with torch.no_grad():
            w2 = m(x2)
        if not all(close(g, w) for g, w in zip(fast(x2), w2)):
            failures.append(f"wgnn.torch.compile (partitioner {part}): a second input differs from eager")

    # A seed model's architecture (the ViT stand-in).
    spec = zoo.MODELS["vit_standin"]
    vit = spec.build(mini=True).eval()
    (img,) = spec.inputs(True).values()
    with torch.no_grad():
        want = vit(img)
    got = wgnn.torch.compile(vit, (img,))(img)
    if not close(got, want, 1e-3):
        failures.append(f"vit_standin: max difference {float((got - want).abs().max()):.3g}")

    # torch.compile's backend, found through the package's entry point.
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="wgnn")
    with torch.no_grad():
        got = compiled(x)
        want = m(x)
    if not all(close(g, w) for g, w in zip(got, want)):
        failures.append("torch.compile(backend='wgnn'): results differ from eager")

    # A graph wgnn cannot run: PyTorch runs it, with a warning naming why.
    torch._dynamo.reset()
    flip = torch.compile(Flipper(), backend="wgnn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            got = flip(x)
    if not close(got, torch.flip(x, [1]) * 2.0):
        failures.append("fallback: results differ from eager")
    if not any("runs in PyTorch" in str(w.message) and "flip" in str(w.message) for w in caught):
        failures.append(f"fallback: no warning naming aten.flip ({[str(w.message)[:200] for w in caught]})")

    for f in failures:
        print("FAIL " + f)
    print(f"wgnn.torch: {'ok' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
