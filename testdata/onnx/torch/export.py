"""Exports small PyTorch models to ONNX for mlbuild's import tests.

Run with Debian's python3-torch (1.13):  /usr/bin/python3 export.py
It writes, next to itself, NAME_opsetN.onnx for each model and opset (eval
mode, a dynamic batch axis), the input it ran (NAME.input.bin) and PyTorch's
output (NAME.output.bin) as raw little-endian float32, and manifest.json
with their shapes. cmd/mlbuild/import_test.go imports each model, compiles
it and checks the binary's output against PyTorch's within 1e-4.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OPSETS = [9, 11, 13, 17]


class MLP(nn.Module):
    """x.view(x.size(0), -1), two Linear layers, batchnorm over features,
    tanh, dropout, sigmoid."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        x = self.drop(torch.tanh(self.bn(self.fc1(x))))
        return torch.sigmoid(self.fc2(x))


class CNN(nn.Module):
    """Convolutions with batchnorm, pools (one padded: exported as a Pad),
    leaky ReLU, flatten, log-softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool2 = nn.AvgPool2d(3, stride=1, padding=1)
        self.pool3 = nn.AvgPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool1(F.relu(self.bn1(self.conv1(x))))
        x = self.pool3(self.pool2(F.leaky_relu(self.bn2(self.conv2(x)), 0.1)))
        x = torch.flatten(x, 1)
        return F.log_softmax(self.fc(x), dim=1)


class Residual(nn.Module):
    """A residual block (graph form), global average pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = F.relu(self.conv1(x))
        y = F.relu(self.conv2(y) + x)
        y = F.adaptive_avg_pool2d(y, 1)
        return self.fc(y.view(y.size(0), -1))


class GELU(nn.Module):
    """Linear, GELU (before opset 20 exported as its Erf formula), Linear."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Scaled(nn.Module):
    """A convolution scaled and shifted per channel by parameters
    (LayerScale-like, folded into its weights), then halved."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.scale = nn.Parameter(torch.rand(4, 1, 1) + 0.5)
        self.shift = nn.Parameter(torch.randn(1, 4, 1, 1))
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        y = (self.conv(x) * self.scale + self.shift) / 2.0
        return self.fc(torch.flatten(F.relu(y), 1))


class Padded(nn.Module):
    """An explicit asymmetric zero pad (exported as a Pad node) before a
    strided convolution whose last window never reaches the extra row."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, stride=2)
        self.fc = nn.Linear(2 * 3 * 3, 3)

    def forward(self, x):
        y = F.relu(self.conv(F.pad(x, (1, 2, 1, 2))))
        return self.fc(torch.flatten(y, 1))


class Norms(nn.Module):
    """LayerNorm (LayerNormalization from opset 17, written out as
    ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add before), one
    without parameters, and arithmetic of runtime values: Pow, ReduceMean,
    Sqrt and Div (an RMS normalisation written by hand)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.ln1 = nn.LayerNorm(32)
        self.ln2 = nn.LayerNorm(32, eps=1e-6)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = self.ln2(F.gelu(self.ln1(self.fc1(x))))
        rms = torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True) + 1.0)
        return self.fc2(h / rms)


class Norm2D(nn.Module):
    """LayerNorm over the last two axes of [4, 8] samples, then each
    column's mean over the rows subtracted (ReduceMean of a middle axis)."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm([4, 8], eps=1e-3)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        y = self.ln(x)
        y = y - y.mean(dim=1, keepdim=True)
        return self.fc(torch.flatten(y, 1))


class Attention(nn.Module):
    """A pre-norm transformer encoder block written by hand, on [tokens,
    features] samples: LayerNorm, Linear q, k and v (MatMul by a constant
    of rank-2 samples, Add), heads split by view and transpose, q·kᵀ (a
    MatMul of two runtime values) scaled, softmax over the last axis,
    times v, heads merged, Linear, a residual Add, then LayerNorm, a GELU
    MLP and a second residual Add."""

    def __init__(self, d=16, heads=2, ff=32):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        dh = d // self.heads
        y = self.ln1(x)
        q = self.q(y).view(b, t, self.heads, dh).transpose(1, 2)
        k = self.k(y).view(b, t, self.heads, dh).transpose(1, 2)
        v = self.v(y).view(b, t, self.heads, dh).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / dh ** 0.5, dim=-1)
        z = (a @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(z)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Packed(nn.Module):
    """Self-attention with one packed q, k, v projection (as nanoGPT
    writes it), split by torch.split (a Split node) in the first block and
    by chunk (Slices with computed ends) in the second; four heads, a
    scale from math.sqrt, no MLP."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv1 = nn.Linear(d, 3 * d)
        self.o1 = nn.Linear(d, d)
        self.qkv2 = nn.Linear(d, 3 * d, bias=False)
        self.o2 = nn.Linear(d, d)

    def attend(self, x, qkv, o, split):
        b, t, d = x.shape
        h = qkv(x)
        q, k, v = h.split(d, dim=2) if split else h.chunk(3, dim=-1)
        q, k, v = [z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v)]
        a = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads)), dim=-1)
        return x + o((a @ v).transpose(1, 2).contiguous().view(b, t, d))

    def forward(self, x):
        return self.attend(self.attend(x, self.qkv1, self.o1, True), self.qkv2, self.o2, False)


class ViTBlock(nn.Module):
    """A pre-norm ViT block with attention as timm writes it: one packed
    q, k, v Linear reshaped to [B, N, 3, heads, d] and permuted with
    permute(2, 0, 3, 1, 4) (a Transpose that moves the batch axis), taken
    apart by unbind(0) (a Split along the first axis and Squeezes), a
    scale multiplied in, then a GELU MLP; residual adds."""

    def __init__(self, dim=16, heads=4, ff=32):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ff)
        self.fc2 = nn.Linear(ff, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        a = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n, c))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Encoder(nn.Module):
    """PyTorch's own nn.TransformerEncoderLayer (batch_first, GELU, two
    heads): its attention moves the batch axis (sequence-first inside),
    splits the packed projection by chunk, merges the batch with the heads
    and with the tokens, and moves it back."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)

    def forward(self, x):
        return self.layer(x)


class Encoder2(nn.Module):
    """Two pre-norm nn.TransformerEncoderLayers (norm_first, ReLU, four
    heads) stacked by nn.TransformerEncoder."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


class Pools(nn.Module):
    """Average pools that round up (ceil_mode: a partial last window,
    divided by its part inside the padded input) with count_include_pad
    both ways. Exported from opset 11: opset 9's AveragePool has no
    ceil_mode, and PyTorch emulates it with end pads, which mlbuild
    refuses as asymmetric padding."""

    def __init__(self):
        super().__init__()
        self.d = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.c = nn.AvgPool2d(2, ceil_mode=True)
        self.a = nn.AvgPool2d(3, 2, 1, ceil_mode=True)
        self.b = nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        return self.b(self.a(self.c(self.d(x))))


class Upsample(nn.Module):
    """Resizes as torchvision's segmentation and detection heads write
    them: nn.Upsample(scale_factor=2) (nearest: Resize with asymmetric
    coordinates and nearest_mode floor), bilinear by 2 without
    align_corners (pytorch_half_pixel), to a size and by 2 with it
    (align_corners), then bilinear and nearest to sizes no whole factor
    gives (down and up)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        y = self.up(F.relu(self.conv(x)))
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        y = F.interpolate(y, size=(7, 9), mode="bilinear", align_corners=True)
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=True)
        y = F.interpolate(y, size=(11, 13), mode="bilinear", align_corners=False)
        return F.interpolate(y, size=(15, 20), mode="nearest")


# TOLERANCE holds the largest difference from PyTorch's output a model's
# import test accepts, where it is not cmd/mlbuild's default of 1e-4.
TOLERANCE = {"upsample": 1e-5}

MODELS = [("mlp", MLP, [1, 8, 8]), ("cnn", CNN, [1, 16, 16]), ("residual", Residual, [4, 6, 6]), ("gelu", GELU, [16]),
          ("scaled", Scaled, [2, 5, 5]), ("padded", Padded, [1, 5, 5]), ("norms", Norms, [16]), ("norm2d", Norm2D, [4, 8]),
          ("attention", Attention, [5, 16]), ("packed", Packed, [6, 16]),
          ("vit", ViTBlock, [6, 16]), ("encoder", Encoder, [5, 16]),
          ("encoder2", Encoder2, [5, 16]), ("pools", Pools, [2, 14, 11], [11, 13, 17]),
          ("upsample", Upsample, [2, 5, 4], [11, 13, 17])]


def entry(e, name):
    """e with the model's tolerance, where it has its own."""
    if name in TOLERANCE:
        e["tolerance"] = TOLERANCE[name]
    return e


def main():
    # Each model's files are rewritten only when it is named on the
    # command line (all when none is): PyTorch's float results vary a
    # little between machines, and files other tests compare against
    # should not churn.
    only = set(sys.argv[1:])
    torch.manual_seed(0)
    manifest = []
    for name, cls, shape, *opsets in MODELS:
        # a model's own opsets, where it names them
        opsets = opsets[0] if opsets else OPSETS
        model = cls()
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                # trained-looking statistics, so that batchnorm matters
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
            if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                # trained-looking parameters, so that they matter
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        model.eval()
        x = torch.randn(3, *shape)
        if only and name not in only:
            for opset in opsets:
                manifest.append(entry({"model": "%s_opset%d.onnx" % (name, opset), "input": name + ".input.bin",
                                       "inputShape": list(x.shape), "output": name + ".output.bin",
                                       "outputShape": list(model(x).shape)}, name))
            continue
        with torch.no_grad():
            y = model(x)
        x.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".input.bin"))
        y.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".output.bin"))
        for opset in opsets:
            path = os.path.join(HERE, "%s_opset%d.onnx" % (name, opset))
            torch.onnx.export(model, x, path, opset_version=opset, input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
            manifest.append(entry({"model": os.path.basename(path), "input": name + ".input.bin",
                                   "inputShape": list(x.shape), "output": name + ".output.bin",
                                   "outputShape": list(y.shape)}, name))
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
