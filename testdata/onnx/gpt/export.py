"""Exports tiny nanoGPT-style language models for mlbuild's import tests
(issue #31): token ids in, logits per token out.

Regenerate with Debian's python3-torch (1.13), from this folder:

    /usr/bin/python3 export.py [NAME...]

The model is written as nanoGPT writes it for a PyTorch without
scaled_dot_product_attention: nn.Embedding on int64 ids [B, T], a learned
position table (nn.Embedding(T, D) of torch.arange(T)), pre-norm blocks
whose attention is q·kᵀ·scale, masked_fill of a registered tril buffer
sliced to [:T, :T], softmax and ·v, a final LayerNorm and a Linear head.

It writes, next to itself, NAME_opsetN.onnx for each model and opset
(eval mode, a dynamic batch axis), the ids it ran (NAME.input.bin, as
little-endian float32: mlbuild's programs read token ids as exact
integers in float32) and PyTorch's logits (NAME.output.bin, float32),
and manifest.json with their shapes. Names given on the command line
rewrite only those models.

- gpt: two blocks, an untied head (lm_head with its own weight).
- gpt_tied: one block, the head tied to the token embedding
  (self.transformer.wte.weight = self.lm_head.weight, as nanoGPT).
- gpt_last: gpt_tied with nanoGPT's inference forward, which keeps the
  last token's features only (x[:, [-1], :]) before the head: logits
  [B, 1, V].
- gpt_b1: gpt exported with the batch fixed at 1 (no dynamic_axes), as
  users often have them; PyTorch's logits are for four sequences, which
  the exported graph itself cannot take.
- gpt_dynseq: gpt_tied exported with a dynamic sequence axis as well,
  which mlbuild refuses (its spec's shapes are fixed); no outputs.
- gpt_pad: gpt whose attention also masks the padding keys, those whose
  id is PAD = VOCAB - 1, with masked_fill of (idx == PAD): the first
  block after the causal mask, as (idx == PAD)[:, None, None, :], the
  second before it, as (idx == PAD).view(B, 1, 1, T). Its ids end with
  0, 2, 5 and 7 PADs (never at position 0).
cmd/mlbuild/import_gpt_test.go imports each model, runs the spec on the
CPU and compares with PyTorch's logits.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, CONTEXT, WIDTH, HEADS = 13, 8, 16, 2
PAD = VOCAB - 1  # gpt_pad's padding token id


class CausalSelfAttention(nn.Module):
    # pad: None, or how the block masks the padding keys, PAD in the ids:
    # "after" the causal mask, as (idx == PAD)[:, None, None, :], or
    # "before" it, as (idx == PAD).view(B, 1, 1, T)
    def __init__(self, pad=None):
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)
        self.n_head = HEADS
        self.pad = pad
        self.register_buffer("bias", torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT))

    def forward(self, x, idx):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.pad == "before":
            att = att.masked_fill((idx == PAD).view(B, 1, 1, T), float("-inf"))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        if self.pad == "after":
            att = att.masked_fill((idx == PAD)[:, None, None, :], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.c_proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, pad=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = CausalSelfAttention(pad)
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.mlp = MLP()

    def forward(self, x, idx):
        x = x + self.attn(self.ln_1(x), idx)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, layers, tied, last=False, pad=False):
        super().__init__()
        self.last = last
        # with pad, the first block masks padding after the causal mask
        # and the second before it
        pads = [["after", "before"][i] if pad else None for i in range(layers)]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, WIDTH),
            wpe=nn.Embedding(CONTEXT, WIDTH),
            h=nn.ModuleList([Block(p) for p in pads]),
            ln_f=nn.LayerNorm(WIDTH),
        ))
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        if tied:
            self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x, idx)
        x = self.transformer.ln_f(x)
        if self.last:
            # nanoGPT's forward without targets: "inference-time mini-
            # optimization: only forward the lm_head on the very last position"
            x = x[:, [-1], :]
        return self.lm_head(x)


# name, layers, tied, last token only, opsets, dynamic axes: "batch", "none" (the batch
# fixed at 1) or "batch+seq", padding mask; a new model goes last, so that
# the random draws of those before it stay the same
MODELS = [("gpt", 2, False, False, [13, 17], "batch", False),
          ("gpt_tied", 1, True, False, [13, 17], "batch", False),
          ("gpt_b1", 2, False, False, [17], "none", False),
          ("gpt_dynseq", 1, True, False, [17], "batch+seq", False),
          ("gpt_last", 1, True, True, [13, 17], "batch", False),
          ("gpt_pad", 2, False, False, [13, 17], "batch", True)]

# gpt_pad's sequences end with this many PAD ids (right padding: position
# 0 never is one, so that every query sees a key that is not padding and
# PyTorch's softmax has no row of -inf only, which would be NaN)
PADDED = [0, 2, 5, 7]


def main():
    only = set(sys.argv[1:])
    torch.manual_seed(0)
    manifest = []
    for name, layers, tied, last, opsets, dynamic, pad in MODELS:
        dynseq = dynamic == "batch+seq"
        model = GPT(layers, tied, last, pad)
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                # trained-looking affine parameters, so that they matter
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        model.eval()
        ids = torch.randint(0, VOCAB, (4, CONTEXT))
        if pad:
            ids = torch.randint(0, PAD, (4, CONTEXT))
            for i, n in enumerate(PADDED):
                ids[i, CONTEXT - n:] = PAD
        with torch.no_grad():
            y = model(ids)
        if not dynseq:
            manifest += [{"model": "%s_opset%d.onnx" % (name, opset), "input": name + ".input.bin",
                          "inputShape": list(ids.shape), "output": name + ".output.bin",
                          "outputShape": list(y.shape)} for opset in opsets]
        if only and name not in only:
            continue
        if not dynseq:
            ids.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".input.bin"))
            y.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".output.bin"))
        axes = {"idx": {0: "batch"}, "logits": {0: "batch"}}
        if dynseq:
            axes = {"idx": {0: "batch", 1: "tokens"}, "logits": {0: "batch", 1: "tokens"}}
        for opset in opsets:
            path = os.path.join(HERE, "%s_opset%d.onnx" % (name, opset))
            if dynamic == "none":
                # traced with one sequence and no dynamic axes: the batch
                # of 1 is written into the graph's shapes
                torch.onnx.export(model, ids[:1], path, opset_version=opset, input_names=["idx"],
                                  output_names=["logits"])
                continue
            torch.onnx.export(model, ids, path, opset_version=opset, input_names=["idx"],
                              output_names=["logits"], dynamic_axes=axes)
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
