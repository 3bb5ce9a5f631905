"""PyTorch's twin of mlbuild's GPT specs (models/gpt.cue, testdata/text/gpt_moby.cue).

    python3 torch_gpt.py TEXT [--context 32 --width 32 --heads 2 --layers 2 ...]

The same model as the spec writes it: a token table and a learned position
table (both drawn U(-0.02*sqrt(3), 0.02*sqrt(3)), mlbuild's embedding init),
dropout, then per layer layernorm without bias, q/k/v projections without
bias (PyTorch's default Linear init, as mlbuild's dense), causal attention
scaled by 1/sqrt(head width) with dropout on the weights, an output
projection, a residual, layernorm, a 4x MLP with exact GELU, a residual;
then a final layernorm and the head (with --tie, the token table's
transpose, as the spec's tie). The same data: the text's
characters, the vocabulary the sorted characters of the training split,
the split by position (the last --val-split of the bytes, moved to a
character boundary), training windows at random positions of the training
split, and the validation loss the mean next-token loss over
len(val)/context windows at random positions of the validation split.
The recipe: AdamW (decay on matrices and tables, none on norms), linear
warmup then cosine decay to --min-lr, clipping of the global gradient norm.
Prints one JSON line with the validation loss before and after training,
the last training losses and the seconds per step.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):  # without bias (torch 1.13's has no bias=False)
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads, self.dropout, self.sdpa = heads, dropout, False
        self.ln1, self.ln2 = LayerNorm(d), LayerNorm(d)
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.proj = nn.Linear(d, d, bias=False)
        self.fc, self.mlp = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        h = self.ln1(x)
        split = lambda t: t.view(B, T, self.heads, D // self.heads).transpose(1, 2)
        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        if self.sdpa:  # PyTorch 2's fused attention (flash or memory-efficient)
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.heads)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = F.dropout(att.masked_fill(~mask, float("-inf")).softmax(-1), self.dropout, self.training)
            y = att @ v
        y = y.transpose(1, 2).reshape(B, T, D)
        x = x + F.dropout(self.proj(y), self.dropout, self.training)
        return x + F.dropout(self.mlp(F.gelu(self.fc(self.ln2(x)))), self.dropout, self.training)


class GPT(nn.Module):
    def __init__(self, vocab, context, d, heads, layers, dropout, tie=False):
        super().__init__()
        self.tie = tie
        bound = 0.02 * math.sqrt(3)
        self.wte = nn.Parameter(torch.empty(vocab, d).uniform_(-bound, bound))
        self.wpe = nn.Parameter(torch.empty(context, d).uniform_(-bound, bound))
        self.dropout = dropout
        self.blocks = nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln_f = LayerNorm(d)
        self.head = None if tie else nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = F.dropout(self.wte[ids] + self.wpe[: ids.shape[1]], self.dropout, self.training)
        for b in self.blocks:
            x = b(x)
        h = self.ln_f(x)
        return h @ self.wte.t() if self.tie else self.head(h)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("text", nargs="+")
    for name, default in [("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("vocab", 0),
                          ("batch", 16), ("steps", 200), ("warmup", 0), ("seed", 1)]:
        a.add_argument("--" + name, type=int, default=default)
    for name, default in [("dropout", 0.1), ("lr", 3e-3), ("min-lr", -1.0), ("beta1", 0.9), ("beta2", 0.999),
                          ("weight-decay", 0.01), ("clip", 0.0), ("val-split", 0.1)]:
        a.add_argument("--" + name, type=float, default=default)
    a.add_argument("--device", default="cpu")
    a.add_argument("--tie", action="store_true", help="the head is the token table (the spec's tie)")
    a.add_argument("--threads", type=int, default=0)
    a.add_argument("--bf16", action="store_true", help="autocast to bfloat16 (GPU)")
    a.add_argument("--sdpa", action="store_true", help="attention by F.scaled_dot_product_attention (PyTorch 2)")
    a.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
    a.add_argument("--time-only", action="store_true", help="skip the validation losses: time the steps alone")
    o = a.parse_args()
    if o.threads:
        torch.set_num_threads(o.threads)
    torch.manual_seed(o.seed)
    raw = b"".join(open(p, "rb").read() for p in o.text)
    cut = len(raw) - int(len(raw) * o.val_split)
    while cut < len(raw) and (raw[cut] & 0xC0) == 0x80:
        cut += 1
    train_text, val_text = raw[:cut].decode(), raw[cut:].decode()
    chars = sorted(set(train_text))
    ids = {c: i for i, c in enumerate(chars)}
    V = max(o.vocab, len(chars))
    train = torch.tensor([ids[c] for c in train_text], dtype=torch.long)
    val = torch.tensor([ids[c] for c in val_text], dtype=torch.long)
    T = o.context

    def windows(data, n, gen):
        starts = torch.randint(0, len(data) - T, (n,), generator=gen)
        x = torch.stack([data[s:s + T] for s in starts])
        y = torch.stack([data[s + 1:s + T + 1] for s in starts])
        return x.to(o.device), y.to(o.device)

    model = GPT(V, T, o.width, o.heads, o.layers, o.dropout, o.tie).to(o.device)
    for b in model.blocks:
        b.sdpa = o.sdpa
    fwd = torch.compile(model) if o.compile else model
    cuda = o.device.startswith("cuda")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=o.lr, betas=(o.beta1, o.beta2))
    min_lr = o.lr if o.min_lr < 0 else o.min_lr

    def lr_at(step):  # step counts from 0
        if step < o.warmup:
            return o.lr * (step + 1) / o.warmup
        if o.min_lr < 0:
            return o.lr
        frac = (step - o.warmup) / max(1, o.steps - o.warmup)
        return min_lr + 0.5 * (o.lr - min_lr) * (1 + math.cos(math.pi * frac))

    vgen = torch.Generator().manual_seed(12345)
    vx, vy = windows(val, max(len(val) // T, 1), vgen)

    def val_loss():
        model.eval()
        total = 0.0
        with torch.no_grad():
            for i in range(0, len(vx), 256):
                logits = model(vx[i:i + 256])
                total += F.cross_entropy(logits.reshape(-1, V), vy[i:i + 256].reshape(-1), reduction="sum").item()
        model.train()
        return total / vy.numel()

    before = -1.0 if o.time_only else val_loss()
    gen = torch.Generator().manual_seed(o.seed)
    # The first steps (torch.compile's compilation, cuDNN's and cuBLAS's
    # searches) are timed apart; losses stay on the device until the end,
    # so a GPU step is not synchronised with the host. A run of a few steps
    # (the CPU's timing runs) still leaves its first step out, as mlbuild's
    # bench leaves out its first: oneDNN creates its primitives there.
    warm = max(min(10, o.steps // 10), 1 if o.steps > 1 else 0)
    losses, t0, first = [], time.time(), 0.0
    for step in range(o.steps):
        if step == warm:
            if cuda:
                torch.cuda.synchronize()
            first, t0 = time.time() - t0, time.time()
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = windows(train, o.batch, gen)
        with torch.autocast("cuda" if cuda else "cpu", torch.bfloat16, enabled=o.bf16):
            loss = F.cross_entropy(fwd(x).reshape(-1, V).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if o.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.clip)
        opt.step()
        losses.append(loss.detach())
    if cuda:
        torch.cuda.synchronize()
    secs = (time.time() - t0) / max(1, o.steps - warm)
    losses = [v.item() for v in losses[-5:]]
    print(json.dumps(dict(model="torch twin", torch=torch.__version__, device=o.device, bf16=o.bf16, sdpa=o.sdpa,
                          compile=o.compile, vocab=V, train_chars=len(train_text), val_windows=len(vx), steps=o.steps,
                          val_loss_before=round(before, 4), val_loss=-1.0 if o.time_only else round(val_loss(), 4),
                          last_train_losses=[round(v, 4) for v in losses], step_ms=round(1000 * secs, 2),
                          first_steps_s=round(first, 2), params=sum(p.numel() for p in model.parameters()))), flush=True)


if __name__ == "__main__":
    main()
