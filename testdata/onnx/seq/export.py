"""Exports the 1-D sequence models and the fixed-batch transformers of
mlbuild's import tests.

Regenerate with Debian's python3-torch (1.13), from this folder:

    /usr/bin/python3 export.py [NAME...]

It writes, next to itself, NAME_opsetN.onnx for each model and opset (eval
mode), the input it ran (NAME.input.bin) and PyTorch's output for it
(NAME.output.bin) as raw little-endian float32, and manifest.json with
their shapes. Names given on the command line rewrite only those models
(PyTorch's floats differ a little between machines).

- seq1d: Conv1d (stride, padding, dilation, groups), MaxPool1d,
  BatchNorm1d, AvgPool1d and AdaptiveAvgPool1d(1), as a small audio or
  sequence classifier would use them; exported with a dynamic batch axis.
- encoder_b1, encoder2_b1, gpt_b1, tokens_b1: nn.TransformerEncoderLayer,
  two pre-norm ones stacked, a nanoGPT-like block, and an MLP over the
  tokens merged with the batch (x.reshape(-1, C)), exported with the
  batch fixed at 1 (no dynamic_axes), as users often
  have them; PyTorch's outputs are for four samples, which the exported
  graph itself cannot run, so the importer must find the batch axis.
cmd/mlbuild/import_test.go (TestImportSequenceExports) imports each
model, compiles it and compares the binary's output with PyTorch's.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Seq1D(nn.Module):
    """A 1-D convolutional classifier over [channels, length] samples, with
    a BatchNorm1d that PyTorch cannot fold into a convolution (a pool is
    between them)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(2, 8, 5, stride=1, padding=2)
        self.pool1 = nn.MaxPool1d(2)
        self.bn = nn.BatchNorm1d(8)
        self.conv2 = nn.Conv1d(8, 8, 3, stride=2, padding=2, dilation=2, groups=4)
        self.pool2 = nn.AvgPool1d(3, stride=1, padding=1)
        self.conv3 = nn.Conv1d(8, 6, 3, bias=False)
        self.pool3 = nn.MaxPool1d(3, stride=2, padding=1, dilation=1)
        self.head = nn.Linear(6, 4)

    def forward(self, x):
        h = self.bn(self.pool1(F.relu(self.conv1(x))))
        h = self.pool2(torch.tanh(self.conv2(h)))
        h = self.pool3(F.relu(self.conv3(h)))
        h = F.adaptive_avg_pool1d(h, 1).flatten(1)
        return self.head(h)


class Encoder(nn.Module):
    """PyTorch's nn.TransformerEncoderLayer (batch_first, GELU, two heads)."""

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


class GPTBlock(nn.Module):
    """A nanoGPT-like block without the causal mask: pre-norm, a packed
    q, k, v projection split by torch.split, four heads by view and
    transpose, the heads merged by transpose and view, a GELU MLP."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TokenMLP(nn.Module):
    """A residual GELU MLP applied to the tokens merged with the batch:
    x.reshape(-1, C), two Linear layers (Gemm), viewed back as
    [B, T, C]."""

    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)

    def forward(self, x):
        B, T, C = x.size()
        h = self.out(F.gelu(self.fc(x.reshape(-1, C))))
        return x + h.view(B, T, C)


# name, class, per-sample shape, opsets, dynamic batch
MODELS = [("seq1d", Seq1D, [2, 32], [11, 13, 17], True),
          ("encoder_b1", Encoder, [5, 16], [13, 17], False),
          ("gpt_b1", GPTBlock, [6, 16], [13, 17], False),
          ("encoder2_b1", Encoder2, [7, 16], [13, 17], False),
          ("tokens_b1", TokenMLP, [6, 16], [13, 17], False)]


def main():
    only = set(sys.argv[1:])
    torch.manual_seed(0)
    manifest = []
    for name, cls, shape, opsets, dynamic in MODELS:
        model = cls()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm1d):
                # trained-looking statistics, so that batchnorm matters
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
            if isinstance(m, nn.LayerNorm):
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        model.eval()
        x = torch.randn(4, *shape)
        with torch.no_grad():
            y = model(x)
        entries = [{"model": "%s_opset%d.onnx" % (name, opset), "input": name + ".input.bin",
                    "inputShape": list(x.shape), "output": name + ".output.bin",
                    "outputShape": list(y.shape)} for opset in opsets]
        manifest += entries
        if only and name not in only:
            continue
        x.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".input.bin"))
        y.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".output.bin"))
        for opset in opsets:
            path = os.path.join(HERE, "%s_opset%d.onnx" % (name, opset))
            if dynamic:
                torch.onnx.export(model, x, path, opset_version=opset, input_names=["x"], output_names=["y"],
                                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
            else:
                # traced with one sample and no dynamic axes: the batch
                # of 1 is written into the graph's shapes
                torch.onnx.export(model, x[:1], path, opset_version=opset, input_names=["x"], output_names=["y"])
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
