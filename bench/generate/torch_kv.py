"""PyTorch twin of `generate` on models/gpt.cue's shape: the same GPT
(pre-norm blocks, causal multi-head attention, GELU MLP, no biases, learned
positions), random weights, eager mode, batch 1, and a KV-cache loop:
the prompt's positions once, then one position a token, each layer's keys
and values appended to its cache. Prints tokens/s for greedy decoding.

usage: torch_kv.py TOKENS PROMPT_LEN THREADS [--no-cache] [--device cuda] [--jump]
                   [--dtype fp32|bf16|autocast]

Each token's id comes back to the host (.item()), as a generator that
streams its text must have it. --jump is mlbuild generate's window rule
for a text longer than the context: when the window is full it keeps its
last T/2 ids, which go through an empty cache at once (a batched
prefill), and decoding goes on from there; without it the prompt and the
tokens must fit the context. On a GPU the weights live there, the loop
is timed after a warm-up and the clock stops after a synchronisation.
--dtype bf16 holds every weight in bfloat16 (.to(torch.bfloat16): the
activations are bf16 too); autocast keeps fp32 weights and runs the
products under torch.autocast in bf16 (the weights cast each call).
"""
import argparse
import time

import torch
import torch.nn.functional as F

V, T, D, H, L = 89, 256, 384, 6, 6
HD = D // H


def main():
    a = argparse.ArgumentParser()
    a.add_argument("tokens", type=int)
    a.add_argument("prompt_len", type=int)
    a.add_argument("threads", type=int)
    a.add_argument("--no-cache", action="store_true", help="a forward pass over the context a token")
    a.add_argument("--device", default="cpu")
    a.add_argument("--jump", action="store_true", help="mlbuild's window rule past the context")
    a.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "autocast"])
    args = a.parse_args()
    tokens, prompt_len, threads, dev = args.tokens, args.prompt_len, args.threads, args.device
    cache = not args.no_cache
    if not args.jump and prompt_len + tokens > T:
        a.error(f"{prompt_len} + {tokens} positions pass the context of {T}: give --jump")
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    r = lambda *s: torch.randn(*s, device=dev) * 0.02
    ones = lambda n: torch.ones(n, device=dev)
    wte, wpe = r(V, D), r(T, D)
    layers = [dict(ln1=ones(D), q=r(D, D), k=r(D, D), v=r(D, D), proj=r(D, D),
                   ln2=ones(D), fc=r(4 * D, D), mlp=r(D, 4 * D)) for _ in range(L)]
    lnf, head = ones(D), r(V, D)
    if args.dtype == "bf16":
        bf = lambda t: t.to(torch.bfloat16)
        wte, wpe, lnf, head = bf(wte), bf(wpe), bf(lnf), bf(head)
        layers = [{k: bf(t) for k, t in p.items()} for p in layers]

    def forward(ids, start, kc, vc):
        # ids: the positions start..start+n-1; kc, vc: per layer [H, start, HD] or None
        n = ids.shape[0]
        x = wte[ids] + wpe[start:start + n]
        for i, p in enumerate(layers):
            h = F.layer_norm(x, (D,), p["ln1"])
            q = (h @ p["q"].T).view(n, H, HD).transpose(0, 1)
            k = (h @ p["k"].T).view(n, H, HD).transpose(0, 1)
            v = (h @ p["v"].T).view(n, H, HD).transpose(0, 1)
            if kc is not None:
                if kc[i] is not None:
                    k, v = torch.cat([kc[i], k], 1), torch.cat([vc[i], v], 1)
                kc[i], vc[i] = k, v
            s = (q @ k.transpose(1, 2)) / HD ** 0.5
            m = torch.ones(n, k.shape[1], dtype=torch.bool, device=dev).tril(k.shape[1] - n)
            a = s.masked_fill(~m, float("-inf")).softmax(-1)
            y = (a @ v).transpose(0, 1).reshape(n, D)
            x = x + y @ p["proj"].T
            h = F.layer_norm(x, (D,), p["ln2"])
            x = x + F.gelu(h @ p["fc"].T) @ p["mlp"].T
        return F.layer_norm(x[-1:], (D,), lnf) @ head.T

    def tensor(ids):
        return torch.tensor(ids, device=dev)

    def generate(n):
        ids = torch.randint(0, V, (prompt_len,)).tolist()
        start = 0
        kc, vc = [None] * L, [None] * L
        logits = forward(tensor(ids), 0, kc, vc) if cache else None
        for _ in range(n):
            if not cache:
                logits = forward(tensor(ids[start:]), 0, None, None)
            nxt = int(logits.argmax(-1))  # the id on the host, as streamed text needs it
            ids.append(nxt)
            if len(ids) - start > T:
                start = len(ids) - T // 2  # mlbuild's contextJump: keep half the window
                if cache:
                    kc, vc = [None] * L, [None] * L
                    logits = forward(tensor(ids[start:]), 0, kc, vc)
            elif cache:
                logits = forward(tensor([nxt]), len(ids) - 1 - start, kc, vc)

    amp = torch.autocast(dev.split(":")[0], dtype=torch.bfloat16, enabled=args.dtype == "autocast")
    with torch.no_grad(), amp:
        # warm-up (allocator, cuBLAS handles and heuristics, kernels): a
        # few tokens, through a jump of the window where the run jumps
        generate(min(tokens, T - prompt_len + 2) if args.jump else min(tokens, 8))
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        generate(tokens)
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        secs = time.perf_counter() - start
    where = f"{threads} thread{'s' if threads > 1 else ''}" if dev == "cpu" else dev
    print(f"pytorch {'kv-cache' if cache else 'no cache'} {args.dtype}: {tokens} tokens in {secs:.3f}s, {tokens / secs:.1f} tokens/s ({where}, torch {torch.__version__})")


main()
